"""The JSON API cancels and re-runs training jobs: the owner's only, under the same CSRF and
same-origin rules as every other write (webapp/plumbing/security.py)."""

from __future__ import annotations

import pytest


def api(corpus_slug: str, job_id: int, action: str = "") -> str:
    return f"/api/corpora/{corpus_slug}/jobs/{job_id}" + (f"/{action}" if action else "")


@pytest.mark.embedded_only  # steps the runner by hand (manual execution)
def test_the_owner_cancels_a_queued_job_and_runs_it_again(app, client, make_corpus):
    corpus = make_corpus()
    job_id = client.post(f"/api/corpora/{corpus.slug}/jobs", json={"vocab_size": 270}).get_json()[
        "id"
    ]
    cancelled = client.post(api(corpus.slug, job_id, "cancel"), json={})
    assert cancelled.status_code == 200, cancelled.get_data(as_text=True)
    assert cancelled.get_json()["status"] == "cancelled"
    assert cancelled.get_json()["cancel_requested"] is True
    again = client.post(api(corpus.slug, job_id, "cancel"), json={})
    assert again.status_code == 409 and "already finished" in again.get_json()["error"]

    rerun = client.post(api(corpus.slug, job_id, "rerun"), json={})
    assert rerun.status_code == 202, rerun.get_data(as_text=True)
    new = rerun.get_json()
    assert new["status"] == "queued" and new["rerun_of"] == job_id and new["id"] != job_id
    assert new["settings"]["vocab_size"] == 270
    assert rerun.headers["Location"] == new["api_url"]
    assert app.extensions["bpe_jobs"].run_next() == new["id"]
    done = client.get(api(corpus.slug, new["id"])).get_json()
    assert done["status"] == "succeeded" and done["worker"]["pid"] > 0
    # A job that succeeded is not run again.
    refused = client.post(api(corpus.slug, new["id"], "rerun"), json={})
    assert refused.status_code == 422 and "Only a failed" in refused.get_json()["error"]


def test_only_the_owner_may_cancel_or_rerun(app, client, make_corpus, make_owner):
    corpus = make_corpus()
    job_id = client.post(f"/api/corpora/{corpus.slug}/jobs", json={"vocab_size": 270}).get_json()[
        "id"
    ]
    stranger = make_owner().client()
    for action in ("cancel", "rerun"):
        answer = stranger.post(api(corpus.slug, job_id, action), json={})
        assert answer.status_code == 403, (action, answer.get_data(as_text=True))
    assert client.get(api(corpus.slug, job_id)).get_json()["status"] in ("queued", "running")
    assert client.post(api(corpus.slug, 999999, "cancel"), json={}).status_code == 404


def test_a_cookie_carrying_cancel_needs_the_csrf_token(client, make_corpus):
    corpus = make_corpus()
    job_id = client.post(f"/api/corpora/{corpus.slug}/jobs", json={"vocab_size": 270}).get_json()[
        "id"
    ]
    forged = client.post(api(corpus.slug, job_id, "cancel"), json={}, csrf=False)
    assert forged.status_code in (400, 403), forged.get_data(as_text=True)
    assert client.get(api(corpus.slug, job_id)).get_json()["cancel_requested"] is False
