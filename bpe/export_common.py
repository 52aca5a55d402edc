"""What the HuggingFace and tiktoken exports share: which tokenisers they can hold, the one id
kept per byte string, and the warnings on where the peer will encode differently from us.

`bpe.export_hf` and `bpe.export_tiktoken` both build on this module and not on each other.
"""

from __future__ import annotations

from typing import Literal

from bpe import rank_rule
from bpe.byte_level import byte_level_string
from bpe.encoder import encode_ids
from bpe.model import Tokenizer

ExportTarget = Literal["hf", "tiktoken"]
TARGET_NAMES = {"hf": "HuggingFace tokenizer.json", "tiktoken": "tiktoken"}


class ExportError(ValueError):
    """A tokeniser this export cannot represent; the message says why and what to do."""


def check_exportable(tok: Tokenizer, *, target: ExportTarget) -> None:
    """Refuse what the target cannot express: exports cover the byte-level modes whose pieces
    one regex can cut (`TrainingMode.split_pattern`), and of the imported tokenisers only
    tiktoken's, to tiktoken (their ranks are their ids)."""
    rule = tok.rule_object
    if rule.exports_own_pipeline and target in rule.export_targets:
        return
    mode = tok.mode_object
    if not mode.byte_level or mode.split_pattern(tok.pattern) is None:
        raise ExportError(
            f"cannot export a {tok.mode!r} tokeniser to {TARGET_NAMES[target]}: exports cover "
            "the byte-level modes only (naive, chunked); retrain with --mode chunked or naive"
        )
    if target not in tok.rule_object.export_targets:
        source = tok.source.filename if tok.source is not None else f"a {tok.rule} file"
        raise ExportError(
            f"this tokeniser was imported from {source} and encodes by {tok.rule}'s rule, which "
            f"a {TARGET_NAMES[target]} file cannot carry exactly: use the original file"
        )


def duplicate_tokens(tok: Tokenizer) -> dict[bytes, list[int]]:
    """Byte strings that more than one id stands for, with those ids in ascending order.

    Special tokens are not counted: both exports keep them apart from the byte-level tokens.

    >>> tok = Tokenizer(mode="naive", merges=[(97, 98, 256), (98, 99, 257), (256, 99, 258),
    ...                                       (97, 257, 259)])
    >>> duplicate_tokens(tok)
    {b'abc': [258, 259]}
    """
    by_bytes: dict[bytes, list[int]] = {}  # bytes -> ids holding them
    vocab = tok.vocab
    for token_id in tok.ordinary_ids:
        by_bytes.setdefault(vocab[token_id], []).append(token_id)
    return {b: ids for b, ids in by_bytes.items() if len(ids) > 1}


def canonical_ids(tok: Tokenizer) -> dict[int, int]:
    """id -> the first (lowest) id with the same bytes; only ids that differ are listed."""
    return {later: ids[0] for ids in duplicate_tokens(tok).values() for later in ids[1:]}


def canonical_merges(tok: Tokenizer) -> list[tuple[int, int, int]]:
    """The merges rewritten over canonical ids, in learned order.

    A merge whose rewritten pair repeats an earlier one is dropped (the earlier has the better
    rank, and a pair can only have one rank); it made the same bytes, so nothing else refers to
    an id the export does not have.
    """
    canon = canonical_ids(tok)
    seen: set[tuple[int, int]] = set()
    merges: list[tuple[int, int, int]] = []  # (left, right, new), canonical ids
    for left, right, new in tok.merges:
        pair = (canon.get(left, left), canon.get(right, right))
        if pair not in seen:
            seen.add(pair)
            merges.append((pair[0], pair[1], canon.get(new, new)))
    return merges


def distinct_ranks(tok: Tokenizer) -> dict[bytes, int]:
    """token bytes -> id, one entry per distinct byte string, the earliest id kept."""
    later = canonical_ids(tok)
    vocab = tok.vocab
    return {vocab[i]: i for i in tok.ordinary_ids if i not in later}


def special_token_clashes(tok: Tokenizer) -> set[str]:
    """Special tokens whose text is also the byte-level spelling of an ordinary token.

    HF looks an added token up in the model's vocabulary by its text, so such a token would get
    the ordinary token's id (e.g. a naive tokeniser that learned the bytes `<|endoftext|>`).
    """
    spellings = {byte_level_string(tok.vocab[i]) for i in tok.ordinary_ids}
    return {text for text in tok.special_tokens if text in spellings}


def rank_rule_conflicts(tok: Tokenizer) -> list[int]:
    """Ids whose own bytes tiktoken's rule cuts differently from our merges: a cheap probe for
    merge lists where tiktoken can diverge (none for the lists our trainers write).

    >>> rank_rule_conflicts(Tokenizer(mode="naive", merges=[(98, 99, 256), (97, 98, 257),
    ...                                                     (257, 99, 258)]))
    [258]
    """
    if tok.rule == "tiktoken":
        return []  # it encodes by that rule already
    ranks = distinct_ranks(tok)
    conflicts: list[int] = []
    for _, _, token_id in tok.merges:
        data = tok.vocab[token_id]
        ours = encode_ids(list(data), tok.ranks)
        theirs = [ranks[part] for part in rank_rule.split_piece(data, ranks)]
        if ours != [token_id] or theirs != ours:
            conflicts.append(token_id)
    return conflicts


def export_warnings(tok: Tokenizer, *, target: ExportTarget) -> list[str]:
    """Plain-language lines on where the export will encode differently from us (none: [])."""
    check_exportable(tok, target=target)
    if tok.rule_object.exports_own_pipeline:
        return []  # the file's own vocabulary and pipeline, written back as they were read
    lines: list[str] = []
    groups = duplicate_tokens(tok)
    if groups:
        later = sum(len(ids) - 1 for ids in groups.values())
        example_bytes, example_ids = next(iter(groups.items()))
        lines.append(
            f"{later} token id(s) repeat the bytes of an earlier token (e.g. {example_ids} are all "
            f"{example_bytes!r}); {TARGET_NAMES[target]} keeps one id per byte string, so the "
            "export uses the earliest and text we encode with a later one comes out differently"
        )
    if target == "hf":
        clashes = special_token_clashes(tok)
        if clashes:
            lines.append(
                f"special token(s) {sorted(clashes)} are spelled like ordinary tokens in HF's "
                "byte-level alphabet, so HF gives them the ordinary token's id"
            )
    if target == "tiktoken":
        conflicts = rank_rule_conflicts(tok)
        if conflicts:
            lines.append(
                f"{len(conflicts)} token(s) (e.g. id {conflicts[0]}) are cut differently by "
                "tiktoken's rule, which joins by the rank of the joined bytes rather than by "
                "learned pair, so text holding them can get other ids (see docs/exports.md)"
            )
    return lines
