"""The blueprints, one per area of the site (home, corpora, jobs, tokenisers, compare,
evaluations, imports, owners' changes, the owner's pages, the sample, the JSON API): each view
parses its request, calls storage, jobs or content, and renders what comes back. `pages` holds
the lookups and page contexts that several blueprints share; no blueprint imports another.

May import: every package below (`webapp.storage`, `webapp.jobs`, `webapp.rendering`,
`webapp.content`, `webapp.plumbing`), but no SQL of its own (tests/test_layout.py).
"""
