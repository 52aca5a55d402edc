"""What a page shows: token bytes turned into safe, honest HTML (chips, token views, page text),
the charts and figures of the compare and evaluation pages, the "why this split?" replay, the
encode API's JSON, the downloads and the Jinja filters.

May import: `bpe`, `webapp.refusals`, `webapp.storage` (rows to show and the queries that find
them), `webapp.jobs` (a job's phases and figures). Nothing of request plumbing or blueprints.
"""
