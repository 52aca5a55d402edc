"""Long multi-byte pieces of imported tokenisers, cut where no token of the vocabulary can sit
across (`bpe.cuts`) so that each distinct part is joined once (docs/algorithms.md, "Imported
tokenisers").

Both imported rules (tiktoken's ranks, HF's merges) only ever join two adjacent parts into a
token, so no join crosses a boundary no token can sit across, and the parts on either side of
one join exactly as they would alone. Parts are joined by the rule's loop without the
whole-piece shortcut: a part that happens to be a token is not that token at once, as it would
not be inside the piece.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable

from bpe.cuts import CutTable
from bpe.encoder import fill_cache
from bpe.modes.base import MULTIBYTE_SHARE

# Pieces from this many UTF-8 bytes on, if mostly multi-byte, are cut. Timed on the UDHR's
# script groups with cl100k and Llama 3, from 12, 24 and 36 bytes and never: from 12, Chinese
# gained most but Llama 3's Thai, Hangul and Greek lost 10-20% (to 1.03-1.06x HF); from 36,
# Chinese gave back half its gain. 24 kept every group that met 1.0x HF uncut under it.
CUT_FROM_BYTES = 24


def worth_cutting(data: bytes, text: str) -> bool:
    """Whether a piece of this text (these its UTF-8 bytes) is long and mostly multi-byte."""
    return len(data) >= CUT_FROM_BYTES and len(data) > MULTIBYTE_SHARE * len(text)


def encode_cut(
    cuts: CutTable,
    pieces: list[str],
    join_part: Callable[[str], list[int]],
    cache: dict[str, list[int]],
    limit: int,
) -> list[list[int]]:
    """Each piece's ids: the pieces cut as one text (cut at their ends too: one pass of the cut
    table in C instead of a call per piece; a token across two pieces' join could only forbid
    cuts there, never allow one), each distinct part joined once by `join_part` through `cache`
    (`bpe.encoder.fill_cache`, at most `limit` parts), the parts' ids joined back per piece."""
    parts, _ = cuts.pieces("".join(pieces), itertools.accumulate(map(len, pieces)))
    table = fill_cache(cache, parts, join_part, limit)
    encoded: list[list[int]] = []
    at = 0
    for piece in pieces:
        left, start = len(piece), at
        while left > 0:
            left -= len(parts[at])
            at += 1
        encoded.append(list(itertools.chain.from_iterable(map(table.__getitem__, parts[start:at]))))
    return encoded
