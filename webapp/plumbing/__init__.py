"""Request plumbing, the same for every blueprint: what a request may send (`inputs`), who owns
what (`owners`), trusted hosts, CSRF, same-origin checks and headers (`security`), the error
pages (`errors`), rate limits per client (`ratelimits`) and answering htmx and plain requests
from one URL (`htmx`).

May import: `bpe`, `webapp.config`, `webapp.refusals`, `webapp.storage`, `webapp.rendering`.
"""
