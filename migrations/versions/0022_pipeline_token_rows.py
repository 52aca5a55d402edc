"""Vocabulary rows of SentencePiece-style HF imports (Llama 2) describe what each token stands
for: `▁` a space, a `<0xNN>` byte-fallback token its byte.

Their shown text, hex, lengths and category were those of the file's spelling (`▁the` was 6
bytes of `mixed`, `<0x0A>` 6 bytes of `mixed`); recomputed here with the library's own rules
(`bpe.hf.pipeline.text_token_display`, `bpe.token_info.token_category`), so old and new rows
agree (docs/imports.md, "The pages of an import"). The token bytes, which loading reads, are
not touched, so the downgrade has nothing to undo.

Revision ID: 0022_pipeline_token_rows
Revises: 0021_languages
Create Date: 2026-12-02
"""

import json

import sqlalchemy as sa
from alembic import op

from bpe.hf.pipeline import text_token_display
from bpe.token_info import token_category

revision = "0022_pipeline_token_rows"
down_revision = "0021_languages"
branch_labels = None
depends_on = None

tokenizers = sa.table(
    "tokenizers",
    sa.column("id", sa.Integer),
    sa.column("encode_rule", sa.String),
    sa.column("document", sa.Text),
)
vocab = sa.table(
    "vocab_entries",
    sa.column("tokenizer_id", sa.Integer),
    sa.column("token_id", sa.Integer),
    sa.column("token_bytes", sa.LargeBinary),
    sa.column("display_text", sa.Text),
    sa.column("hex", sa.Text),
    sa.column("byte_length", sa.Integer),
    sa.column("char_length", sa.Integer),
    sa.column("category", sa.String),
)


def _text_spelled(document: str | None) -> bool | None:
    """The model's byte_fallback if the document is a `text`-spelled pipeline's, else None."""
    pipeline = json.loads(document or "{}").get("hf_pipeline") or {}
    if pipeline.get("spelling") != "text":
        return None
    return bool((pipeline.get("model") or {}).get("byte_fallback", False))


def upgrade() -> None:
    conn = op.get_bind()
    found = conn.execute(
        sa.select(tokenizers.c.id, tokenizers.c.document).where(
            tokenizers.c.encode_rule == "hf_pipeline"
        )
    )
    for tokenizer_id, document in list(found):
        byte_fallback = _text_spelled(document)
        if byte_fallback is None:
            continue
        rows = conn.execute(
            sa.select(vocab.c.token_id, vocab.c.token_bytes, vocab.c.category).where(
                vocab.c.tokenizer_id == tokenizer_id
            )
        )
        changed = []
        for token_id, raw, category in list(rows):
            if category == "special":
                continue  # specials are drawn as written
            shown = text_token_display(bytes(raw), byte_fallback=byte_fallback)
            text = shown.decode("utf-8", errors="replace").replace("\x00", "\ufffd")
            changed.append(
                {
                    "t": tokenizer_id,
                    "i": token_id,
                    "new_display_text": text,
                    "new_hex": shown.hex(),
                    "new_byte_length": len(shown),
                    "new_char_length": len(text),
                    "new_category": token_category(shown),
                }
            )
        for start in range(0, len(changed), 1000):
            conn.execute(
                sa.update(vocab)
                .where(
                    vocab.c.tokenizer_id == sa.bindparam("t"),
                    vocab.c.token_id == sa.bindparam("i"),
                )
                .values(
                    display_text=sa.bindparam("new_display_text"),
                    hex=sa.bindparam("new_hex"),
                    byte_length=sa.bindparam("new_byte_length"),
                    char_length=sa.bindparam("new_char_length"),
                    category=sa.bindparam("new_category"),
                ),
                changed[start : start + 1000],
            )


def downgrade() -> None:
    pass  # the rows stay as they are: they load and show as before, only truer
