"""Training jobs say which phase they are in; corpora know words mode's alphabet size.

`training_jobs.phase` (reading, splitting, counting, merging, storing) lets the job page show
where a job is before its first merge. `corpora.word_alphabet_size` (distinct characters
outside whitespace) is what words mode's smallest vocab size follows from, so the train form
can refuse a vocab size that cannot work before a job is queued. Existing corpora are counted
here, one at a time, a slice of text at a time.

Revision ID: 0010_phases_and_word_alphabet
Revises: 0009_corpus_previews
Create Date: 2026-12-01
"""

import sqlalchemy as sa
from alembic import op

revision = "0010_phases_and_word_alphabet"
down_revision = "0009_corpus_previews"
branch_labels = None
depends_on = None

_SLICE = 1_000_000  # characters read per query when counting an existing corpus


def upgrade() -> None:
    with op.batch_alter_table("training_jobs") as batch:
        batch.add_column(sa.Column("phase", sa.String(16), nullable=True))
    conn = op.get_bind()
    # SQLite keeps an upload's zeroblob placeholder lazy only in a row's last column, so the
    # table is rebuilt with the new column before `text` there (PostgreSQL simply adds it).
    sqlite = conn.dialect.name == "sqlite"
    with op.batch_alter_table("corpora", recreate="always" if sqlite else "auto") as batch:
        batch.add_column(
            sa.Column("word_alphabet_size", sa.Integer, nullable=True), insert_before="text"
        )
    corpora = sa.table(
        "corpora",
        sa.column("id", sa.Integer),
        sa.column("text", sa.Text),
        sa.column("char_count", sa.Integer),
        sa.column("word_alphabet_size", sa.Integer),
    )
    for corpus_id, chars in conn.execute(sa.select(corpora.c.id, corpora.c.char_count)).all():
        seen: set[str] = set()
        for start in range(1, (chars or 0) + 1, _SLICE):
            piece = conn.execute(
                sa.select(sa.func.substr(sa.cast(corpora.c.text, sa.Text), start, _SLICE)).where(
                    corpora.c.id == corpus_id
                )
            ).scalar()
            if isinstance(piece, bytes):
                piece = piece.decode("utf-8", errors="replace")
            seen.update(piece or "")
        conn.execute(
            corpora.update()
            .where(corpora.c.id == corpus_id)
            .values(word_alphabet_size=sum(1 for c in seen if not c.isspace()))
        )


def downgrade() -> None:
    with op.batch_alter_table("corpora") as batch:
        batch.drop_column("word_alphabet_size")
    with op.batch_alter_table("training_jobs") as batch:
        batch.drop_column("phase")
