"""How well a tokeniser compresses a text: the figures people compare tokenisers by.

`evaluate(tok, texts)` encodes each text as ordinary text (special tokens are not recognised)
and reports, over all of them:
- bytes per token and characters per token (higher is better compression);
- tokens per word (fertility; a word is what `str.split()` separates), only where the text
  separates its words with spaces (`bpe.scripts`: judged from its first 500,000 characters);
  in Chinese, Japanese, Thai and the other scripts written without them a whitespace-separated
  "word" is a whole clause, so there it is None and tokens per character is the figure;
- the share of the vocabulary used, and every ordinary token never used (special tokens are not
  counted: ordinary text cannot produce them). On a large corpus, never-used tokens are the
  candidates for under-trained "glitch" tokens;
- the longest tokens used, with how often;
- the time it took.

Texts are walked piece by piece (`Tokenizer.iter_pieces`), so a large corpus needs no list of
all its pieces or ids; `progress(done, total)` (characters) is called now and then, and
`should_stop()` is polled there too (True raises `EvaluationCancelled`).
"""

from __future__ import annotations

import time
from array import array
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

from bpe.model import Tokenizer
from bpe.scripts import SAMPLE_CHARS, writing

LONGEST_SHOWN = 20
_PROGRESS_EVERY = 4096  # pieces between progress calls and stop checks


class EvaluationCancelled(Exception):
    """`should_stop()` returned True."""


@dataclass
class Evaluation:
    bytes: int
    characters: int
    words: int
    tokens: int
    vocab_size: int  # ordinary tokens (special tokens aside)
    used: int  # distinct ordinary tokens that occurred
    never_used: list[int]  # their ids, ascending
    longest: list[tuple[int, int]]  # (id, count) of the longest tokens used, longest first
    seconds: float
    script: str | None = None  # the Unicode script of most of the text's letters
    spaced: bool = True  # words separated by spaces: tokens per word means something

    @property
    def bytes_per_token(self) -> float | None:
        return self.bytes / self.tokens if self.tokens else None

    @property
    def chars_per_token(self) -> float | None:
        return self.characters / self.tokens if self.tokens else None

    @property
    def tokens_per_word(self) -> float | None:
        """None where words are not separated by spaces (see `tokens_per_char` there)."""
        return self.tokens / self.words if self.words and self.spaced else None

    @property
    def tokens_per_char(self) -> float | None:
        return self.tokens / self.characters if self.characters else None

    @property
    def fertility(self) -> tuple[str, float | None]:
        """The fertility that means something for this text, labelled: ("tokens/word", ...)
        where words are spaced, else ("tokens/char", ...)."""
        if self.spaced:
            return "tokens/word", self.tokens_per_word
        return "tokens/char", self.tokens_per_char

    @property
    def vocab_share(self) -> float:
        return self.used / self.vocab_size if self.vocab_size else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["longest"] = [list(pair) for pair in self.longest]
        data.update(
            bytes_per_token=self.bytes_per_token,
            chars_per_token=self.chars_per_token,
            tokens_per_word=self.tokens_per_word,
            tokens_per_char=self.tokens_per_char,
            vocab_share=self.vocab_share,
        )
        return data


def evaluate(
    tok: Tokenizer,
    texts: Iterable[str],
    *,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    total_chars: int | None = None,
) -> Evaluation:
    """Encode every text and measure it (see the module docstring).

    `total_chars` is what progress is reported against (the texts' length when they are a
    list). A worked example, by hand: "aaab" with merges a+a and aa+a is one token `aaa` and
    one `b`, 2 tokens for 4 bytes, 1 word.

    >>> tok = Tokenizer(mode="naive", merges=[(97, 97, 256), (256, 97, 257)])
    >>> result = evaluate(tok, ["aaab"])
    >>> result.tokens, result.bytes_per_token, result.tokens_per_word, result.used
    (2, 2.0, 2.0, 2)

    Chinese separates no words with spaces: six characters of three UTF-8 bytes each, 18 tokens
    here, tokens per character instead of per "word".

    >>> chinese = evaluate(tok, ["人人生而自由"])
    >>> chinese.script, chinese.tokens_per_word, chinese.fertility
    ('Han', None, ('tokens/char', 3.0))
    """
    started = time.perf_counter()
    if total_chars is None and isinstance(texts, (list, tuple)):
        total_chars = sum(len(t) for t in texts)
    ids = array("I")
    n_bytes = n_chars = n_words = 0
    done = 0
    head: list[str] = []  # the first SAMPLE_CHARS characters, to judge how the text is written
    for text in texts:
        if n_chars < SAMPLE_CHARS:
            head.append(text[: SAMPLE_CHARS - n_chars])
        n_bytes += len(text.encode("utf-8", errors="surrogatepass"))
        n_chars += len(text)
        n_words += count_words(text)
        for k, piece in enumerate(tok.iter_pieces(text)):
            ids.extend(tok.encode_piece(piece))
            done += len(piece)
            if k % _PROGRESS_EVERY == 0:
                # Progress first: a caller that learns of a cancel while writing it stops here.
                if progress is not None:
                    progress(min(done, total_chars or done), total_chars or done)
                if should_stop is not None and should_stop():
                    raise EvaluationCancelled("evaluation stopped on request")
        done = n_chars
    counts = [0] * max(tok.id_limit, 1)
    for token_id in ids:
        counts[token_id] += 1
    # An imported file may list a special token in its vocabulary too (HF's added tokens):
    # it is still a special token, never "unused vocabulary".
    special = set(tok.special_tokens.values())
    ordinary = [i for i in tok.ordinary_ids if i not in special]
    never = [i for i in ordinary if counts[i] == 0]
    used_ids = [i for i in ordinary if counts[i]]
    vocab = tok.vocab
    longest = sorted(used_ids, key=lambda i: (-len(vocab[i]), i))[:LONGEST_SHOWN]
    if progress is not None:
        progress(total_chars or done, total_chars or done)
    how = writing("".join(head))
    return Evaluation(
        bytes=n_bytes,
        characters=n_chars,
        words=n_words,
        tokens=len(ids),
        vocab_size=len(ordinary),
        used=len(used_ids),
        never_used=never,
        longest=[(i, counts[i]) for i in longest],
        seconds=time.perf_counter() - started,
        script=how.script,
        spaced=how.spaced,
    )


def count_words(text: str, *, block: int = 1 << 20) -> int:
    """`len(text.split())` without building the list: counted in blocks cut just after a
    whitespace character, where no word can continue.

    >>> count_words(" a bb\\tccc\\n"), count_words("x" * 10 + " y", block=4)
    (3, 2)
    """
    count = 0
    start = 0
    n = len(text)
    while start < n:
        end = min(start + block, n)
        while end < n and not text[end - 1].isspace():
            end += 1
        count += len(text[start:end].split())
        start = end
    return count
