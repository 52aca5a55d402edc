"""Two vocabularies side by side: the tokens both have, and those only one has.

A token is the same in both when what it stands for (`Tokenizer.display_bytes`: its bytes, but
Llama 2's `▁the` as `" the"`) and its end-of-word mark agree (words mode's `the</w>` is not a
byte-level `the`), whatever its id: GPT-2 and GPT-4 share `" the"` under different ids.
Counted per category (`bpe.token_info.token_category`).

>>> import bpe
>>> a = bpe.train("low lower lowest " * 20, vocab_size=262, mode="chunked")
>>> b = bpe.train("new newer newest " * 20, vocab_size=262, mode="chunked")
>>> diff = vocab_diff(a, b)
>>> len(diff.both) >= 256, [a.vocab[i] for i in diff.only_a][:2]
(True, [b'lo', b'low'])
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from bpe.model import Tokenizer
from bpe.token_info import token_category

SIDES = ("both", "only_a", "only_b")


@dataclass(frozen=True)
class VocabDiff:
    both: list[tuple[int, int]]  # (id in a, id in b), by a's ids
    only_a: list[int]
    only_b: list[int]
    counts: dict[str, Counter[str]]  # side -> category -> tokens


def _keys(tok: Tokenizer) -> dict[tuple[bytes, bool], int]:
    """Each token's key and its lowest id (a vocabulary may spell two ids alike)."""
    keys: dict[tuple[bytes, bool], int] = {}
    for token_id in sorted(tok.vocab):
        keys.setdefault(_key(tok, token_id), token_id)
    return keys


def _key(tok: Tokenizer, token_id: int) -> tuple[bytes, bool]:
    return tok.display_bytes(token_id), tok.ends_word(token_id)


def _category(tok: Tokenizer, token_id: int, specials: set[int]) -> str:
    return token_category(tok.display_bytes(token_id), special=token_id in specials)


def vocab_diff(a: Tokenizer, b: Tokenizer) -> VocabDiff:
    keys_b = _keys(b)
    keys_a = _keys(a)
    specials_a, specials_b = set(a.special_tokens.values()), set(b.special_tokens.values())
    both, only_a, only_b = [], [], []
    counts: dict[str, Counter[str]] = {side: Counter() for side in SIDES}
    for token_id in sorted(a.vocab):
        other = keys_b.get(_key(a, token_id))
        side = "only_a" if other is None else "both"
        if other is None:
            only_a.append(token_id)
        else:
            both.append((token_id, other))
        counts[side][_category(a, token_id, specials_a)] += 1
    for token_id in sorted(b.vocab):
        if _key(b, token_id) not in keys_a:
            only_b.append(token_id)
            counts["only_b"][_category(b, token_id, specials_b)] += 1
    return VocabDiff(both=both, only_a=only_a, only_b=only_b, counts=counts)
