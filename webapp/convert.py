"""The one module that turns a trained `bpe.Tokenizer` into rows and rows back into one.

`store_tokenizer` writes the tokeniser, its merges and its whole vocabulary with the caller's
session, so they land in the caller's single transaction. `load_tokenizer` rebuilds the
library object from the rows; tokenisers never change, so it is cached by slug.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from typing import cast

from sqlalchemy import insert, select
from sqlalchemy.orm import Session

import bpe
from bpe.model import Mode
from bpe.token_info import token_category
from webapp.models import Merge, Tokenizer, VocabEntry
from webapp.slugs import new_slug

_BATCH = 5000  # rows per executemany; keeps parameter lists small on both back ends


def final_token_count(tok: bpe.Tokenizer) -> int:
    """Tokens in the training corpus after the last merge (special tokens aside)."""
    stats = tok.training
    if stats is None:
        raise ValueError("the tokeniser has no training record; store only freshly trained ones")
    return stats.tokens_after[-1] if stats.tokens_after else stats.initial_tokens


def store_tokenizer(session: Session, tok: bpe.Tokenizer, *, corpus_id: int) -> Tokenizer:
    """Add the tokeniser, its merges and vocabulary rows to `session` (flushed, not committed)."""
    stats = tok.training
    if stats is None:
        raise ValueError("the tokeniser has no training record; store only freshly trained ones")
    row = Tokenizer(
        slug=new_slug(),
        corpus_id=corpus_id,
        mode=tok.mode,
        pattern=tok.pattern,
        trainer=stats.trainer,
        vocab_size_requested=stats.vocab_size,
        vocab_size=tok.vocab_size,
        min_frequency=stats.min_frequency,
        special_tokens=json.dumps(tok.special_tokens, ensure_ascii=False),
        alphabet=None if tok.alphabet is None else json.dumps(tok.alphabet, ensure_ascii=False),
        initial_tokens=stats.initial_tokens,
        final_token_count=final_token_count(tok),
        training_seconds=stats.seconds,
        merge_count=len(tok.merges),
    )
    session.add(row)
    session.flush()  # assigns row.id
    _insert_batched(session, Merge, merge_rows(tok, row.id))
    _insert_batched(session, VocabEntry, vocab_rows(tok, row.id))
    return row


def merge_rows(tok: bpe.Tokenizer, tokenizer_id: int) -> list[dict]:
    stats = tok.training
    if stats is None:  # each stored merge keeps its count: only a trained tokeniser is stored
        raise ValueError("a tokeniser without its training record cannot be stored")
    return [
        {
            "tokenizer_id": tokenizer_id,
            "rank": rank,
            "left_id": left,
            "right_id": right,
            "new_id": new,
            "pair_count": stats.merge_counts[rank],
            "tokens_after": stats.tokens_after[rank],
        }
        for rank, (left, right, new) in enumerate(tok.merges)
    ]


def vocab_rows(tok: bpe.Tokenizer, tokenizer_id: int) -> list[dict]:
    """One row per id, base ids included; what the vocabulary browser filters and sorts on."""
    counts = tok.training.merge_counts if tok.training is not None else []
    specials = set(tok.special_tokens.values())
    rows = []
    for token_id in range(tok.vocab_size):
        raw = tok.token_bytes(token_id)
        is_special = token_id in specials
        ends_word = tok.ends_word(token_id)
        # NUL becomes U+FFFD like any undecodable byte: PostgreSQL text cannot hold it.
        text = raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
        rank = token_id - tok.base_size
        rows.append(
            {
                "tokenizer_id": tokenizer_id,
                "token_id": token_id,
                "token_bytes": raw,
                "display_text": text + bpe.END_OF_WORD if ends_word else text,
                "hex": raw.hex(),
                "byte_length": len(raw),
                "char_length": len(text),
                "category": token_category(raw, special=is_special),
                "pair_count": counts[rank] if 0 <= rank < len(tok.merges) else None,
                "is_special": is_special,
                "ends_word": ends_word,
            }
        )
    return rows


def _insert_batched(session: Session, model, rows: list[dict]) -> None:
    for start in range(0, len(rows), _BATCH):
        session.execute(insert(model), rows[start : start + _BATCH])


# ----- rows -> bpe.Tokenizer -----------------------------------------------------------------
_CACHE_SIZE = 32
_cache: OrderedDict[tuple[int, str], bpe.Tokenizer] = OrderedDict()  # (id, slug) -> tokeniser
_cache_lock = threading.Lock()


def load_tokenizer(session: Session, row: Tokenizer) -> bpe.Tokenizer:
    """The stored tokeniser as a `bpe.Tokenizer` (cached: stored tokenisers never change)."""
    key = (row.id, row.slug)
    with _cache_lock:
        if key in _cache:
            _cache.move_to_end(key)
            return _cache[key]
    tok = _build(session, row)
    with _cache_lock:
        _cache[key] = tok
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return tok


def _build(session: Session, row: Tokenizer) -> bpe.Tokenizer:
    merges = session.execute(
        select(Merge.left_id, Merge.right_id, Merge.new_id, Merge.pair_count, Merge.tokens_after)
        .where(Merge.tokenizer_id == row.id)
        .order_by(Merge.rank)
    ).all()
    training = bpe.TrainingStats(
        trainer=row.trainer,
        vocab_size=row.vocab_size_requested,
        min_frequency=row.min_frequency,
        initial_tokens=row.initial_tokens,
        merge_counts=[m.pair_count for m in merges],
        tokens_after=[m.tokens_after for m in merges],
        seconds=row.training_seconds,
    )
    return bpe.Tokenizer(
        mode=cast(Mode, row.mode),  # the column holds only modes the library wrote
        merges=[(m.left_id, m.right_id, m.new_id) for m in merges],
        special_tokens=row.special_tokens_dict,
        pattern=row.pattern,
        alphabet=row.alphabet_list,
        training=training,
    )
