"""The languages page: a table of tokenisers counted on the parallel text, run as a job, with
its owner rules, filters, grouping by script, chart and downloads; bad input answered 4xx.

The parallel text here is a hand-made one of five languages (stored as `flask fetch-udhr`
stores one), so every figure can be checked by hand; tests/test_languages.py holds the real
UDHR's table to tiktoken's and HF `tokenizers`' own counts.
"""

from __future__ import annotations

import csv
import io
import re

import pytest
from sqlalchemy import select

from bpe.languages import Language
from webapp.storage.models import LanguageCount, LanguageJob, Tokenizer
from webapp.storage.parallel_texts import replace_parallel_text

TEXTS = [
    Language("eng", "English", "All human beings are born free and equal.\n"),
    Language("deu", "German", "Alle Menschen sind frei und gleich an Würde geboren.\n"),
    Language(
        "cmn_hans", "Chinese (Mandarin, simplified)", "人人生而自由，在尊严和权利上一律平等。\n"
    ),
    Language("rus", "Russian", "Все люди рождаются свободными и равными.\n"),
    Language("xyz", "Unfinished", "Title only\n", stage=2),
]


@pytest.fixture
def texts(app):
    replace_parallel_text(app.extensions["bpe_db"], TEXTS, source_sha256="0" * 64)
    return TEXTS


@pytest.fixture
def reference(app, make_tokenizer):
    """A small tokeniser of the site's (no owner), labelled as a reference."""
    ref = make_tokenizer("All human beings are born free " * 20, vocab_size=270, owner=None)
    with app.extensions["bpe_db"].session_scope() as session:
        session.get_one(Tokenizer, ref.id).reference = "GPT-2"
    return ref.slug


def ask(client, *slugs: str):
    return client.post("/languages", data={"tokenizer": list(slugs)})


def job_id_of(response) -> int:
    assert response.status_code == 303, response.get_data(as_text=True)[:400]
    return int(re.search(r"/languages/(\d+)$", response.headers["Location"]).group(1))


def test_a_table_counts_every_complete_text_with_every_tokenizer(
    app, client, texts, make_tokenizer, reference
):
    own = make_tokenizer(vocab_size=280)
    job = job_id_of(ask(client, own.slug, reference))
    page = client.get(f"/languages/{job}").get_data(as_text=True)
    with app.extensions["bpe_db"].read_scope() as session:
        counts = session.execute(select(LanguageCount.tokens)).scalars().all()
        assert session.get_one(LanguageJob, job).status == "succeeded"
    assert len(counts) == 2 * 4  # four complete texts (stage 2 left out), two tokenisers
    eng = len(own.tok.encode(TEXTS[0].text))
    deu = len(own.tok.encode(TEXTS[1].text))
    # The premium is German's tokens over English's, by the same tokeniser.
    assert f"{deu / eng:.2f}×" in page
    assert "Unfinished" not in page
    for script in ("Latin", "Han", "Cyrillic"):
        assert f">{script} <small>" in page  # a group per script
    # Chinese: tokens per character, labelled so; the others tokens per word.
    han = page[page.index('data-code="cmn_hans"') :].split("</tr>")[0]
    assert "tokens/char" in han and "tokens/word" not in han
    assert "tokens/word" in page[page.index('data-code="deu"') :].split("</tr>")[0]
    assert '<svg class="premium-chart"' in page


def test_filters_sort_and_downloads(app, client, texts, make_tokenizer):
    own = make_tokenizer(vocab_size=280)
    job = job_id_of(ask(client, own.slug))
    han = client.get(f"/languages/{job}?script=Han").get_data(as_text=True)
    assert 'data-code="cmn_hans"' in han and 'data-code="deu"' not in han
    named = client.get(f"/languages/{job}?q=GERM").get_data(as_text=True)
    assert 'data-code="deu"' in named and 'data-code="rus"' not in named
    by_code = client.get(f"/languages/{job}?sort=code&order=asc&script=Latin").get_data(
        as_text=True
    )
    assert by_code.index('data-code="deu"') < by_code.index('data-code="eng"')
    rows = list(
        csv.DictReader(io.StringIO(client.get(f"/languages/{job}.csv").get_data(as_text=True)))
    )
    assert [r["code"] for r in rows] == ["cmn_hans", "deu", "eng", "rus"]
    by_code_rows = {r["code"]: r for r in rows}
    assert float(by_code_rows["eng"]["premium"]) == 1.0
    assert by_code_rows["cmn_hans"]["fertility_unit"] == "tokens/char"
    assert int(by_code_rows["rus"]["tokens"]) == len(own.tok.encode(TEXTS[3].text))
    data = client.get(f"/languages/{job}.json").get_json()
    assert data["status"] == "succeeded" and len(data["languages"]) == 4
    assert data["tokenizers"][0]["slug"] == own.slug


def test_bad_requests_are_4xx(app, client, stranger, texts, make_tokenizer):
    assert ask(client).status_code == 400
    assert ask(client, "not-a-slug").status_code == 404
    own = make_tokenizer(vocab_size=280)
    assert ask(client, *[own.slug] * 9).status_code == 400
    assert client.get("/languages/999999").status_code == 404
    assert client.get("/languages/99999999999").status_code == 404
    job = job_id_of(ask(client, own.slug))
    assert (
        client.get(f"/languages/{job}?by=99&sort=%00&order=x&script=" + "x" * 500).status_code
        == 200
    )
    # An index of more digits than Python turns into an int: the default column, not a 500.
    assert client.get(f"/languages/{job}?by={'9' * 5000}").status_code == 200
    api = client.post("/api/languages", json={"tokenizers": "abc"})
    assert api.status_code == 400 and "list of tokeniser slugs" in api.get_json()["error"]
    assert client.post("/api/languages", json={"tokenizers": [1, 2]}).status_code == 400


def test_without_the_parallel_text_a_table_is_409(client, make_tokenizer):
    own = make_tokenizer(vocab_size=280)
    response = ask(client, own.slug)
    assert response.status_code == 409
    assert "fetch-udhr" in response.get_data(as_text=True)


def test_owner_rules(app, client, stranger, make_owner, texts, make_tokenizer, reference):
    own = make_tokenizer(vocab_size=280)
    private = job_id_of(ask(client, own.slug))
    public = job_id_of(ask(client, reference))
    # Another's private tokeniser's table: missing to a stranger; a references-only one is seen.
    assert stranger.get(f"/languages/{private}").status_code == 404
    assert stranger.get(f"/languages/{private}.csv").status_code == 404
    assert stranger.get(f"/api/languages/{private}").status_code == 404
    assert stranger.get(f"/languages/{public}").status_code == 200
    # Only the job's owner may cancel it.
    assert stranger.post(f"/languages/{public}/cancel").status_code == 403
    other = make_owner().client()
    assert f'/languages/{public}"' in other.get("/languages").get_data(as_text=True)
    assert f'/languages/{private}"' not in other.get("/languages").get_data(as_text=True)


def test_the_api_queues_and_answers(app, client, owner, texts, make_tokenizer):
    own = make_tokenizer(vocab_size=280)
    response = client.post("/api/languages", json={"tokenizers": [own.slug]})
    assert response.status_code == 202
    body = response.get_json()
    assert body["status"] in ("queued", "running", "succeeded")
    done = client.get(f"/api/languages/{body['job_id']}").get_json()
    assert done["status"] == "succeeded"
    eng = next(r for r in done["languages"] if r["code"] == "eng")
    assert eng["tokens"] == len(own.tok.encode(TEXTS[0].text)) and eng["premium"] == 1.0


def test_a_cancelled_job_stores_nothing(app, texts, make_tokenizer):
    from webapp.jobs.languages import LanguageRows, run_languages

    own = make_tokenizer(vocab_size=280)
    rows = LanguageRows(app.extensions["bpe_db"])
    job = rows.submit([own.id])
    assert rows.claim_next() == job
    rows.request_cancel(job)
    assert run_languages(rows, job, interval=0.0).value == "cancelled"
    with app.extensions["bpe_db"].read_scope() as session:
        assert session.scalars(select(LanguageCount)).all() == []
        assert session.get_one(Tokenizer, own.id) is not None


def test_the_status_fragment_polls_until_done_then_reloads(
    app, client, owner, texts, make_tokenizer
):
    from webapp.jobs.languages import LanguageRows

    own = make_tokenizer(vocab_size=280)
    queued = LanguageRows(app.extensions["bpe_db"]).submit([own.id], owner_id=owner.id)
    fragment = client.get(f"/languages/{queued}", headers={"HX-Request": "true"})
    assert 'hx-trigger="every 1s"' in fragment.get_data(as_text=True)
    assert "HX-Refresh" not in fragment.headers
    page = client.get(f"/languages/{queued}").get_data(as_text=True)
    assert "Status: <strong" in page and "premium-chart" not in page
    done = job_id_of(ask(client, own.slug))
    fragment = client.get(f"/languages/{done}", headers={"HX-Request": "true"})
    assert fragment.headers.get("HX-Refresh") == "true"  # htmx reloads: the page has the table
    assert "every 1s" not in fragment.get_data(as_text=True)


def test_claiming_an_owner_link_moves_language_tables_too(
    app, owner, make_owner, texts, make_tokenizer
):
    other = make_owner()
    theirs = make_tokenizer(vocab_size=280, owner=other)
    device = other.client()
    job = job_id_of(ask(device, theirs.slug))
    claimed = device.post("/owner/claim", data={"token": owner.token, "move": "yes"})
    assert claimed.status_code == 303
    with app.extensions["bpe_db"].read_scope() as session:
        assert session.get_one(LanguageJob, job).owner_id == owner.id
    assert f'/languages/{job}"' in owner.client().get("/languages").get_data(as_text=True)
