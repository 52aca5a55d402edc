"""Server time of the vocabulary diff (/compare/<a>/<b>/vocab and its API) between the largest
vocabularies a site holds: GPT-2 (50k), GPT-4 (100k) and GPT-4o (200k), imported with
`flask --app webapp import-references DIR` into the database DATABASE_URL names.

    DATABASE_URL=sqlite:////tmp/vdb/db.sqlite3 .venv/bin/python benchmarks/vocab_diff.py
"""

from __future__ import annotations

import statistics
import time

from webapp import create_app
from webapp.storage import db, vocab_diff
from webapp.storage.models import Tokenizer

REPEATS = 5


def main() -> None:
    app = create_app({"RATELIMIT_ENABLED": False})
    with app.app_context():
        rows = {r.reference: r.slug for r in db.session().query(Tokenizer) if r.reference}
    client = app.test_client()
    for slug in rows.values():  # the tokenisers' first load is not the diff's cost
        client.get(f"/t/{slug}/vocab")
    pairs = [("GPT-2", "GPT-4"), ("GPT-4", "GPT-4o"), ("GPT-4o", "GPT-2")]
    print(
        "| A vs B | first view: counts computed (ms) | page, in both (median ms)"
        " | page, only B, longest first | API |"
    )
    print("|---|---|---|---|---|")
    for a, b in pairs:
        urls = [
            f"/compare/{rows[a]}/{rows[b]}/vocab",
            f"/compare/{rows[a]}/{rows[b]}/vocab?side=b&sort=-length",
            f"/api/vocab-diff/{rows[a]}/{rows[b]}",
        ]
        vocab_diff.clear_counts()
        start = time.perf_counter()
        assert client.get(urls[0]).status_code == 200
        cells = [f"{(time.perf_counter() - start) * 1000:,.0f}"]
        for url in urls:
            times = []
            for _ in range(REPEATS):
                start = time.perf_counter()
                response = client.get(url)
                times.append((time.perf_counter() - start) * 1000)
                assert response.status_code == 200, (url, response.status_code)
            cells.append(f"{statistics.median(times):,.0f}")
        print(f"| {a} vs {b} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
