"""The database and everything that reads or writes it: the engine and session (`db`), the
tables (`models`), the one conversion between rows and `bpe` tokenisers (`convert`), and one
query module per area (corpora and uploads, tokeniser pages, compare sets, owners' changes,
playground shares). Storage faults (a full disk, a read-only database) are named in `faults`;
`warming` loads tokenisers into convert's cache in a background thread.

May import: `bpe`, `webapp.config`, `webapp.refusals`. Nothing above it (no jobs, rendering,
request plumbing or blueprints), so every layer can ask it.
"""
