"""What the site brings itself: the sample corpus and its pair of tokenisers, the reference and
imported tokenisers, and the `flask` commands that make them.

May import: `bpe`, `webapp.refusals`, `webapp.storage`, `webapp.jobs`, `webapp.rendering`.
"""
