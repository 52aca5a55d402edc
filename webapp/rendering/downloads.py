"""What a tokeniser page's download links serve: the project's JSON, or an export (HF
`tokenizer.json`, a zipped tiktoken rank file with its sidecar), refused with a 422 that says why
when the format cannot hold the tokeniser."""

from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import bpe
from bpe.modes import get_mode
from bpe.rules import get_rule
from webapp.refusals import UserError
from webapp.storage.models import Tokenizer

DOWNLOADS = {
    "json": "the project's own JSON (every mode, round-trips exactly)",
    "hf": "Hugging Face tokenizer.json (naive and chunked modes)",
    "tiktoken": "tiktoken rank file + settings, zipped (naive and chunked modes)",
}


BYTE_LEVEL_ONLY = "byte-level modes only"
ORIGINAL_FILE_ONLY = "use the original file"


def unavailable(row: Tokenizer, fmt: str) -> str | None:
    """Why `fmt` cannot hold this tokeniser, in a few words for its disabled button; None when
    it can. Asked of the tokeniser's mode and encode rule (`bpe.modes`, `bpe.rules`), as the
    exports themselves ask, so a new mode or rule needs no change here."""
    if fmt == "json":
        return None
    rule = get_rule(row.encode_rule)
    if fmt not in rule.export_targets:
        return ORIGINAL_FILE_ONLY
    if rule.exports_own_pipeline:
        return None  # HF's whole pipeline is written back as the file had it
    mode = get_mode(row.mode)
    if not mode.byte_level or mode.split_pattern(row.pattern) is None:
        return BYTE_LEVEL_ONLY
    return None


def export_file(
    tok: bpe.Tokenizer, row: Tokenizer, fmt: str, what: str
) -> tuple[str | bytes, str, str]:
    """(body, filename, mimetype) of one download; `what` names the format in refusals."""
    name = f"bpe-{row.mode}-{row.vocab_size}-{row.slug[:8]}"
    if fmt == "json":
        return bpe.formats.dumps(tok), f"{name}.json", "application/json"
    why = unavailable(row, fmt)
    if why == BYTE_LEVEL_ONLY:
        raise UserError(
            f"A {tok.mode}-mode tokeniser cannot be exported to {what}: those formats are"
            " byte-level. Download the project's JSON, or train in naive or chunked mode.",
            status=422,
        )
    if why is not None:
        raise UserError(
            f"This tokeniser was imported from {row.source_filename}; {what} cannot carry its"
            " encoding rule exactly. Download the project's JSON, or use the original file.",
            status=422,
        )
    if fmt == "hf":
        from bpe.export_hf import to_hf_json

        return to_hf_json(tok), f"{name}.tokenizer.json", "application/json"
    return _tiktoken_zip(tok, name), f"{name}.tiktoken.zip", "application/zip"


def _tiktoken_zip(tok: bpe.Tokenizer, name: str) -> bytes:
    from bpe.export_tiktoken import write_tiktoken

    with tempfile.TemporaryDirectory() as folder:
        paths = write_tiktoken(tok, Path(folder) / f"{name}.tiktoken", name=name)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in paths:
                archive.write(path, arcname=path.name)
    return buffer.getvalue()
