"""Export a byte-level tokeniser (`naive` or `chunked`) to tiktoken: a rank file plus a sidecar.

Two files, side by side:
- `OUT.tiktoken`: tiktoken's own rank format, one `base64(token bytes) rank` line per token,
  ranks ascending (what `tiktoken.load.load_tiktoken_bpe` reads). A token's rank is its id.
- `OUT.tiktoken.json`: what the rank file cannot hold: `{"format": "bpe-workbench.tiktoken",
  "version": 1, "name", "pat_str", "special_tokens": {text: id}, "mergeable_ranks_file",
  "n_vocab", "mode"}`.

`load_tiktoken(path)` rebuilds the `tiktoken.Encoding` from them, and `to_tiktoken_encoding(tok)`
builds it straight from a tokeniser. Encode with `enc.encode_ordinary(text)` to match our
`tok.encode(text)`, and with `enc.encode(text, allowed_special="all")` to match
`tok.encode(text, allowed_special="all")` (tiktoken's plain `encode` raises on special text).

Where tiktoken can differ from us, by design (docs/exports.md has the measured rates):
- tiktoken knows no merge list. Inside a piece it repeatedly joins the adjacent pair whose joined
  bytes have the lowest rank, whichever two tokens they came from, and a piece that is a token as
  a whole is returned as that token at once. We apply only learned pairs, lowest id first. With
  merges `(b, c)`, `(a, b)`, `(ab, c)`, we encode "abc" as `a|bc` while tiktoken finds `abc`.
- Ids that repeat an earlier id's bytes cannot be ranks (one rank per byte string): the export
  keeps the earliest, as the HF export does (`bpe.export_common.canonical_ids`).
- Naive mode has no split pattern, so the export uses `[\\s\\S]+`, one piece per text between
  special tokens. tiktoken's merge loop is quadratic in a piece's length,
  so long naive texts encode slowly there.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

from bpe import rank_rule
from bpe.export_common import ExportError, check_exportable, distinct_ranks, rank_rule_conflicts
from bpe.model import Tokenizer
from bpe.patterns import NAIVE_PATTERN

__all__ = [
    "NAIVE_PATTERN",
    "load_tiktoken",
    "mergeable_ranks",
    "rank_file_text",
    "rank_rule_conflicts",
    "rank_rule_encode",
    "read_rank_file",
    "tiktoken_pattern",
    "to_tiktoken_encoding",
    "write_tiktoken",
]

if TYPE_CHECKING:  # tiktoken is optional; only the Encoding builders import it
    import tiktoken

SIDECAR_FORMAT = "bpe-workbench.tiktoken"
SIDECAR_VERSION = 1
RANKS_SUFFIX = ".tiktoken"


def tiktoken_pattern(tok: Tokenizer) -> str:
    """The `pat_str` to give tiktoken: our split regex, or `NAIVE_PATTERN` in naive mode."""
    check_exportable(tok, target="tiktoken")
    return tok.mode_object.split_pattern(tok.pattern) or ""


def mergeable_ranks(tok: Tokenizer) -> dict[bytes, int]:
    """token bytes -> rank (= our id), one entry per distinct byte string, earliest id kept.

    >>> mergeable_ranks(Tokenizer(mode="naive", merges=[(104, 105, 256)]))[b"hi"]
    256
    """
    check_exportable(tok, target="tiktoken")
    return distinct_ranks(tok)


def rank_rule_encode(ranks: dict[bytes, int], piece: bytes, *, whole: bool = True) -> list[int]:
    """tiktoken's rule for one piece (`bpe.rank_rule`): a piece that is a token is that token
    (unless `whole=False`); otherwise keep joining the adjacent pair whose joined bytes rank
    lowest, leftmost on ties, until no join is a token.

    >>> rank_rule_encode({b"a": 0, b"b": 1, b"c": 2, b"bc": 3, b"ab": 4, b"abc": 5}, b"abc")
    [5]
    """
    if whole:
        return rank_rule.encode_piece(piece, ranks)
    return [ranks[part] for part in rank_rule.split_piece(piece, ranks)]


def rank_file_text(tok: Tokenizer) -> str:
    """The `.tiktoken` rank file: `base64(bytes) rank` per line, ranks ascending."""
    ranks = sorted(mergeable_ranks(tok).items(), key=lambda item: item[1])
    return "".join(f"{base64.b64encode(token).decode('ascii')} {rank}\n" for token, rank in ranks)


def to_tiktoken_encoding(tok: Tokenizer, *, name: str = "bpe-workbench") -> tiktoken.Encoding:
    """A `tiktoken.Encoding` with our tokens as ranks, our pattern and our special tokens.

    Needs the optional `tiktoken` package. See the module docstring for where its ids can differ.
    """
    return _encoding(
        name=name,
        pat_str=tiktoken_pattern(tok),
        ranks=mergeable_ranks(tok),
        special_tokens=dict(tok.special_tokens),
    )


def write_tiktoken(
    tok: Tokenizer, out_path: str | os.PathLike[str], *, name: str | None = None
) -> tuple[Path, Path]:
    """Write `OUT.tiktoken` (ranks) and `OUT.tiktoken.json` (pattern, special tokens, name).

    `out_path` names the rank file; `.tiktoken` is appended unless it already ends so. The
    encoding's name defaults to the file's stem. Returns (rank file, sidecar) paths.
    """
    check_exportable(tok, target="tiktoken")
    ranks_path = Path(out_path)
    if ranks_path.suffix != RANKS_SUFFIX:
        ranks_path = ranks_path.with_name(ranks_path.name + RANKS_SUFFIX)
    sidecar_path = ranks_path.with_name(ranks_path.name + ".json")
    sidecar = {
        "format": SIDECAR_FORMAT,
        "version": SIDECAR_VERSION,
        "name": name or ranks_path.stem,
        "pat_str": tiktoken_pattern(tok),
        "special_tokens": dict(tok.special_tokens),
        "mergeable_ranks_file": ranks_path.name,
        "n_vocab": tok.vocab_size,
        "mode": tok.mode,
    }
    ranks_path.write_text(rank_file_text(tok), encoding="ascii")
    sidecar_path.write_text(json.dumps(sidecar, ensure_ascii=False, indent=2), encoding="utf-8")
    return ranks_path, sidecar_path


def load_tiktoken(path: str | os.PathLike[str]) -> tiktoken.Encoding:
    """Rebuild the Encoding from files `write_tiktoken` wrote (give either of the two).

    The rank file is read here rather than with `tiktoken.load.load_tiktoken_bpe`, which caches
    local files by path under the temp dir and would serve a stale copy after a re-export.
    """
    given = Path(path)
    sidecar_path = given if given.name.endswith(".json") else given.with_name(given.name + ".json")
    try:
        sidecar = json.loads(sidecar_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExportError(f"cannot read the tiktoken sidecar {sidecar_path}: {exc}") from None
    if not isinstance(sidecar, dict) or sidecar.get("format") != SIDECAR_FORMAT:
        raise ExportError(f"{sidecar_path} is not a {SIDECAR_FORMAT} sidecar file")
    ranks_path = sidecar_path.with_name(str(sidecar["mergeable_ranks_file"]))
    return _encoding(
        name=str(sidecar["name"]),
        pat_str=str(sidecar["pat_str"]),
        ranks=read_rank_file(ranks_path),
        special_tokens={str(k): int(v) for k, v in sidecar["special_tokens"].items()},
    )


def read_rank_file(path: str | os.PathLike[str]) -> dict[bytes, int]:
    """Parse a `.tiktoken` rank file, naming the line at fault if it is malformed."""
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as exc:
        raise ExportError(f"cannot read the rank file {path}: {exc.strerror}") from None
    ranks: dict[bytes, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except ValueError:
            raise ExportError(
                f"{path}, line {number}: expected 'base64-token rank', got {line[:60]!r}"
            ) from None
    return ranks


def _encoding(
    *, name: str, pat_str: str, ranks: dict[bytes, int], special_tokens: dict[str, int]
) -> tiktoken.Encoding:
    try:
        import tiktoken
    except ImportError:
        raise ImportError(
            "building a tiktoken Encoding needs the optional tiktoken package: pip install tiktoken"
        ) from None
    return tiktoken.Encoding(
        name, pat_str=pat_str, mergeable_ranks=ranks, special_tokens=special_tokens
    )
