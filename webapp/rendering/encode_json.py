"""The encode API's answer, assembled from JSON pieces kept per tokeniser.

An answer lists every token of the text with its id, bytes in hex and readable text. Encoding
1 KiB takes well under a millisecond; building those few hundred dicts and serialising them
took longer than the encode itself. A tokeniser never changes, so each token's piece of JSON
is made once (with the app's own JSON settings in jsonify's compact form, so the answer is
byte for byte what `jsonify` gives outside debug mode)
and reused; the pieces go when the tokeniser leaves convert's cache.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from flask import Response, current_app

import bpe
from webapp.rendering.token_display import Counts

# Pieces kept per tokeniser at most: a client encoding a whole 200,000-token vocabulary gets
# the rest made per answer rather than growing this for ever.
MAX_PIECES = 50_000

_pieces: weakref.WeakKeyDictionary[bpe.Tokenizer, dict[int, str]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _pieces_of(tok: bpe.Tokenizer) -> dict[int, str]:
    with _lock:
        found = _pieces.get(tok)
        if found is None:
            found = _pieces[tok] = {}
        return found


def _dumps(value: Any) -> str:  # any JSON
    return current_app.json.dumps(value, separators=(",", ":"))


def token_piece(tok: bpe.Tokenizer, token_id: int) -> str:
    """`{"hex": ..., "id": ..., "text": ...}` of one token, as the app's JSON provider writes it."""
    return _dumps(
        {"id": token_id, "hex": tok.token_bytes(token_id).hex(), "text": tok.id_to_token(token_id)}
    )


def encode_response(tok: bpe.Tokenizer, ids: list[int], counts: Counts) -> Response:
    """`jsonify(ids=..., tokens=[...], counts={...})`, with the token list joined from pieces."""
    pieces = _pieces_of(tok)
    parts = []
    for token_id in ids:
        piece = pieces.get(token_id)
        if piece is None:
            piece = token_piece(tok, token_id)
            if len(pieces) < MAX_PIECES:
                pieces[token_id] = piece  # a lost race only makes the same string twice
        parts.append(piece)
    fields = {
        "counts": _dumps(
            {
                "bytes": counts.bytes,
                "characters": counts.characters,
                "tokens": counts.tokens,
                "bytes_per_token": counts.bytes_per_token,
            }
        ),
        "ids": _dumps(ids),
        "tokens": "[" + ",".join(parts) + "]",
    }
    # The keys in the order the app's provider writes them (sorted by default).
    order = sorted(fields) if getattr(current_app.json, "sort_keys", True) else list(fields)
    body = "{" + ",".join(f"{_dumps(key)}:{fields[key]}" for key in order) + "}\n"
    return current_app.response_class(body, mimetype="application/json")
