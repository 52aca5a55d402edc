"""Every bad input is a clear 4xx, never a 5xx: a table of bad requests over every route of
`app.url_map` (huge and malformed ids and slugs, wrong methods, over-long URLs, bytes that are
not UTF-8, lone surrogates, deep JSON, out-of-range and garbage query values, bad bodies).

Each row names the statuses it may get; under /api/ every error must be JSON. The table must
reach every route, and holds at least 150 requests.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from werkzeug.exceptions import MethodNotAllowed, NotFound

BIG = [str(2**63), str(2**64), str(2**31), str(10**30), "99999999999999999999999999999"]
BAD_SLUGS = ["x", "A" * 300, "%FF%FE", "%ED%A0%80", "<script>", "AAAAAAAAAAAAAAAAAAAAAA"]
SURROGATE_JSON = b'{"text": "a\\ud800b"}'
DEEP_JSON = b"[" * 100_000
NOT_UTF8_JSON = b'{"text": "caf\xe9"}'
HUGE_NUMBER = b"9" * 5000  # past Python's 4,300-digit limit for int(): a ValueError, not JSON's


@dataclass
class Row:
    method: str
    url: str
    expect: set[int]
    kwargs: dict[str, Any] = field(default_factory=dict)
    rule: str = ""  # the url_map rule this row is about
    says: str = ""  # what the error message must mention


@pytest.fixture
def app_config(app_config):
    app_config["MAX_PASTE_BYTES"] = 100_000  # a pasted text past it is a 413
    return app_config


@pytest.fixture
def world(app, client, make_tokenizer):
    a = make_tokenizer(vocab_size=300, special_tokens=["<|end|>"])
    b = make_tokenizer(vocab_size=280, mode="naive", pattern=None)
    c = make_tokenizer(vocab_size=290, mode="words")
    d = make_tokenizer(vocab_size=270, pattern="gpt2")
    corpus = a.corpus_slug
    job = client.post(f"/c/{corpus}/train", data={"vocab_size": "260"}).headers["Location"]
    job_id = int(job.rsplit("/", 1)[1])
    pair = client.post(f"/c/{corpus}/compare", data={"vocab_size": "260"}).headers["Location"]
    job_a, job_b = (int(part) for part in pair.rstrip("/").split("/")[-2:])
    share = client.post(f"/t/{a.slug}/share", data={"text": "hi"}).headers["Location"]
    evaluation_id = app.extensions["bpe_evaluations"].submit(
        tokenizer_id=a.id, corpus_id=a.corpus_id
    )
    return {
        "slug": a.slug,
        "slug_a": a.slug,
        "slug_b": b.slug,
        "slug_c": c.slug,
        "slug_d": d.slug,
        "corpus": corpus,
        "job_id": job_id,
        "job_a": job_a,
        "job_b": job_b,
        "share_slug": share.rsplit("/", 1)[1],
        "evaluation_id": evaluation_id,
    }


def _url(rule: str, values: dict[str, str]) -> str:
    url = rule
    for name, value in values.items():
        url = url.replace(f"<int:{name}>", value).replace(f"<{name}>", value)
        url = url.replace(f"<path:{name}>", value)
    return url


def _values_for(rule, world) -> dict[str, str]:
    """Valid values for every argument of a rule (the corpus slug for corpus routes)."""
    values = {}
    for name in rule.arguments:
        if name == "slug" and rule.rule.startswith("/c/"):
            values[name] = world["corpus"]
        elif name == "token_id":
            values[name] = "260"
        elif name == "fmt":
            values[name] = "json"
        elif name == "filename":
            values[name] = "htmx.min.js"
        else:
            values[name] = str(world[name])
    return values


def build_table(app, world) -> list[Row]:
    rows: list[Row] = []

    def add(method, url, expect, rule="", says="", **kwargs):
        rows.append(Row(method, url, set(expect), kwargs, rule, says))

    # Several rules can share one address (GET and DELETE of /api/t/<slug> are two views), so a
    # method is wrong only when no rule of that address takes it.
    taken: dict[str, set[str]] = {}
    for rule in app.url_map.iter_rules():
        taken.setdefault(rule.rule, set()).update(rule.methods or ())
    for rule in app.url_map.iter_rules():
        good = _values_for(rule, world)
        methods = sorted(rule.methods - {"HEAD", "OPTIONS"})
        method = methods[0]
        # every argument replaced by bad values, one at a time: the same 404 as a missing item
        for name in rule.arguments:
            bad_values = (
                BIG + ["-1", "abc", "1e3"]
                if "int:" in rule.rule or name in ("token_id",)
                else BAD_SLUGS
            )
            if name == "filename":
                bad_values = ["..%2F..%2Fwebapp%2F__init__.py", "%FF", "nope.js"]
            if name == "fmt":
                bad_values = ["exe", "..%2Fjson", "%00", "%FF"]
            for bad in bad_values:
                url = _url(rule.rule, {**good, name: bad})
                expect = {404}
                if method == "POST":
                    expect |= {400, 422}
                if "%FF" in bad or "%ED" in bad:
                    expect |= {400}
                add(method, url, expect, rule.rule)
        url = _url(rule.rule, good)
        # a method the route does not take
        for wrong in ("PUT", "DELETE", "PATCH"):
            if wrong not in taken[rule.rule]:
                add(wrong, url, {405}, rule.rule)
        # an over-long address, and a query value that is not UTF-8
        add(method, url + "?pad=" + "a" * 9000, {414}, rule.rule, "at most 8,192")
        add(method, url + "?q=%FF%FEx", {400}, rule.rule, "byte offset 0 (0xff")
    rows.extend(_list_rows(world))
    rows.extend(_body_rows(world))
    return rows


def _list_rows(world) -> list[Row]:
    rows = []
    t, a, b = world["slug"], world["slug_a"], world["slug_b"]
    bad_queries = [
        "page=0",
        "page=-1",
        "page=abc",
        f"page={10**30}",
        "page=99999999",
        "per_page=0",
        "per_page=201",
        f"per_page={10**30}",
        "sort=evil",
        "category=evil",
        "min_len=-1",
        f"min_len={10**30}",
        "min_len=abc",
        "max_len=abc",
        "match=evil",
        "match=hex&q=zz",
        "match=id&q=abc",
        "q=%FF",
    ]
    for base in (f"/t/{t}/merges", f"/t/{t}/vocab", f"/api/t/{t}/merges", f"/api/t/{t}/vocab"):
        for query in bad_queries:
            rows.append(Row("GET", f"{base}?{query}", {400}))
        # ids no column can hold match nothing; they are not an overflow
        for big in BIG + ["-5"]:
            rows.append(Row("GET", f"{base}?q={big}&match=id", {200}))
        # a page past the last: the pages say there is none; the API answers an empty page
        past = {200} if base.startswith("/api/") else {404}
        rows.append(Row("GET", f"{base}?page=10000000", past))
    rows.append(Row("GET", f"/t/{t}/merges?sort=id", {400}))  # a vocabulary sort, not a merges one
    rows.append(Row("GET", f"/t/{t}/vocab?sort=rank", {400}))
    for query in ("sort=-count", "category=letters", "min_len=2&max_len=3"):
        rows.append(Row("GET", f"/t/{t}/merges?{query}", {200}))
        rows.append(Row("GET", f"/api/t/{t}/merges?{query}", {200}))
    for query in ("sort=evil", "sort=-count", "category=letters", "min_len=-1", "page=0"):
        rows.append(Row("GET", f"/compare/{a}/{b}/merges?{query}", {400}))
        rows.append(Row("GET", f"/compare/{a}/{b}?{query}", {400}))
    for query in ("b=", "b=%FF", f"b={'A' * 300}", "b=AAAAAAAAAAAAAAAAAAAAAA"):
        rows.append(Row("GET", f"/compare/{a}/with?{query}", {400, 404}))
    for query in ("", "text=%FF", "allowed_special=bogus&text=a", "text=" + "a" * 9000):
        rows.append(Row("GET", f"/api/t/{t}/encode?{query}", {400, 414, 422}))
    for token in ("-1", "300", str(2**63), "x" * 5000):
        rows.append(Row("GET", f"/t/{t}/token/{token}", {404}))
    return rows


def _json(data: bytes) -> dict[str, Any]:
    return {"data": data, "content_type": "application/json"}


def _form(data: bytes) -> dict[str, Any]:
    return {"data": data, "content_type": "application/x-www-form-urlencoded"}


def _body_rows(world) -> list[Row]:
    rows = []
    t, corpus = world["slug"], world["corpus"]
    a, b = world["slug_a"], world["slug_b"]
    says = {
        SURROGATE_JSON: "lone surrogate (U+D800) at character 1",
        DEEP_JSON: "deeper than 32",
        b'{"a":' * 40 + b"1" + b"}" * 40: "deeper than 32",
        NOT_UTF8_JSON: "byte offset 13 (0xe9)",
        b'{"\\udc80": "key"}': "lone surrogate (U+DC80)",
        b'{"text": "ok", "name": "\\ud800"}': "$.name holds a lone surrogate",
    }
    bad_json = [
        SURROGATE_JSON,
        DEEP_JSON,
        b'{"a":' * 40 + b"1" + b"}" * 40,
        NOT_UTF8_JSON,
        b'{"text": 5}',
        b"[]",
        b"",
        b"not json",
        b'{"text": NaN}',
        b'{"\\udc80": "key"}',
        json.dumps({"text": "x" * 60_000}).encode(),
        b'{"text": "a", "allowed_special": ["nope"]}',
        b'{"text": "a", "allowed_special": 5}',
    ]
    for body in bad_json:
        rows.append(
            Row("POST", f"/api/t/{t}/encode", {400, 413, 422}, _json(body), says=says.get(body, ""))
        )
    rows.append(Row("POST", f"/api/t/{t}/encode", {400}, {"data": '{"text": "a"}'}))  # text/plain
    for ids in ("5", "[true]", "[1.5]", f"[{2**70}]", "[-1]", '["a"]', "[" * 5000, "null"):
        body = f'{{"ids": {ids}}}'.encode()
        rows.append(Row("POST", f"/api/t/{t}/decode", {400, 422}, _json(body)))
    rows.append(Row("POST", f"/api/t/{t}/decode", {400}, _json(SURROGATE_JSON)))
    for body in (SURROGATE_JSON, DEEP_JSON, NOT_UTF8_JSON, b'{"text": "ok", "name": "\\ud800"}'):
        rows.append(Row("POST", "/api/corpora", {400}, _json(body), says=says[body]))
    for body in (b'{"text": ""}', b'{"name": "no text"}', b"[1, 2]", b'{"text": "a\\u0000b"}'):
        rows.append(Row("POST", "/api/corpora", {422}, _json(body)))
    raw = {"content_type": "text/plain"}
    for body in (b"caf\xe9", b"", b"a\x00b", b"\xff\xfe\x00\xd8"):  # last: UTF-16 BOM, bad pair
        rows.append(Row("POST", "/api/corpora?name=raw", {422}, {"data": body, **raw}))
    rows.append(Row("POST", "/api/corpora?name=%FF", {400}, {"data": b"fine", **raw}))
    rows.append(
        Row("POST", "/api/corpora", {422}, {"data": {}, "content_type": "multipart/form-data"})
    )
    for body in (b"text=a%FFb&name=x", b"text=&name=x", b"text=a%00b", b"name=%ED%A0%80&text=hi"):
        rows.append(Row("POST", "/corpora", {400, 422}, _form(body)))
    rows.append(Row("POST", "/corpora", {413}, _form(b"text=" + b"a" * 200_000)))
    train_forms = [
        b"vocab_size=" + str(10**30).encode(),
        b"vocab_size=abc",
        b"vocab_size=-1",
        b"mode=evil",
        b"trainer=evil",
        b"pattern=custom&custom_pattern=(",
        b"min_frequency=-1",
        b"min_frequency=" + str(2**63).encode(),
        b"special_tokens=" + b"%0A".join(b"s%d" % i for i in range(101)),
        b"special_tokens=a%0Aa",
        b"custom_pattern=%FF&pattern=custom",
    ]
    for body in train_forms:
        rows.append(Row("POST", f"/c/{corpus}/train", {400, 422}, _form(body)))
        if not body.startswith(b"mode="):  # the comparison sets the modes itself
            rows.append(Row("POST", f"/c/{corpus}/compare", {400, 422}, _form(body)))
    for url in (f"/t/{t}/encode", f"/t/{t}/share", f"/compare/{a}/{b}/encode"):
        rows.append(Row("POST", url, {400}, _form(b"text=a%FF")))
        rows.append(Row("POST", url, {413}, _form(b"text=" + b"a" * 60_000)))
    # Evaluating pasted text: the form and the API.
    rows.append(Row("POST", f"/t/{t}/evaluate", {400}, _form(b"text=a%FF")))
    rows.append(Row("POST", f"/t/{t}/evaluate", {400}, _form(b"text=")))
    rows.append(Row("POST", f"/t/{t}/evaluate", {413}, _form(b"text=" + b"a" * 1_100_000)))
    for body in (SURROGATE_JSON, DEEP_JSON, NOT_UTF8_JSON, b'{"text": 5}', b"[]", b"", b"{}"):
        rows.append(
            Row("POST", f"/api/t/{t}/evaluate", {400}, _json(body), says=says.get(body, ""))
        )
    huge = json.dumps({"text": "x" * 1_100_000}).encode()
    rows.append(Row("POST", f"/api/t/{t}/evaluate", {413}, _json(huge), says="at most 1 MB"))
    rows.append(Row("POST", f"/api/t/{t}/evaluate", {400}, {"data": '{"text": "a"}'}))
    # Numbers of 5,000 digits in every JSON body, and the owner's PATCH bodies checked like the
    # others (depth, lone surrogates): each a 400 that names the problem.
    huge_says = "number of 5,000 digits"
    for url, body in (
        (f"/api/t/{t}/encode", b'{"text": "a", "n": ' + HUGE_NUMBER + b"}"),
        (f"/api/t/{t}/decode", b'{"ids": [' + HUGE_NUMBER + b"]}"),
        (f"/api/t/{t}/evaluate", b'{"text": "a", "n": -' + HUGE_NUMBER + b"}"),
        ("/api/corpora", b'{"text": "a", "n": ' + HUGE_NUMBER + b"}"),
        (f"/api/corpora/{corpus}/jobs", b'{"vocab_size": ' + HUGE_NUMBER + b"}"),
    ):
        rows.append(Row("POST", url, {400}, _json(body), says=huge_says))
    for url in (f"/api/corpora/{corpus}", f"/api/t/{t}"):
        for body, said in (
            (DEEP_JSON, "deeper than 32"),
            (b'{"name": "\\ud800"}', "$.name holds a lone surrogate (U+D800)"),
            (b'{"name": ' + HUGE_NUMBER + b"}", huge_says),
        ):
            rows.append(Row("PATCH", url, {400}, _json(body), says=said))
    # A form of 5,000 parts is refused for its parts, not for a size it is far below.
    boundary = "b0undary"
    parts = "".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="f{i}"\r\n\r\nx\r\n'
        for i in range(5000)
    )
    many = {
        "data": (parts + f"--{boundary}--\r\n").encode(),
        "content_type": f"multipart/form-data; boundary={boundary}",
    }
    rows.append(Row("POST", "/corpora", {413}, many, says="at most 1,000 parts"))
    # A count that is not ASCII digits, or too long for int(), confirms nothing (409), never 500.
    for count in (HUGE_NUMBER, b"%C2%B2"):  # the second is '²', a digit to str.isdigit
        body = b"confirm_tokenizers=" + count
        rows.append(Row("POST", f"/c/{corpus}/delete", {409}, _form(body)))
    job = world["job_id"]
    for big in BIG:
        rows.append(Row("POST", f"/c/{corpus}/jobs/{big}/cancel", {404}))
        rows.append(Row("GET", f"/c/{corpus}/compare/jobs/{job}/{big}", {404}))
    rows.append(Row("POST", f"/c/{corpus}/jobs/{job}/rerun", {422}))  # queued: cannot run again
    return rows


def test_every_bad_input_is_a_clear_4xx(app, client, owner, world):
    table = build_table(app, world)
    assert len(table) >= 150
    adapter = app.url_map.bind("localhost")
    reached: set[str] = set()
    failures = []
    for row in table:
        kwargs = dict(row.kwargs)
        if row.url.startswith("/api/"):
            # The owner's script, as the README's curl examples are: the bearer token lets any
            # body through the API's same-origin guard, so each row tests its input, not that guard
            # (tests/test_security.py covers the refusals).
            kwargs["headers"] = {**kwargs.get("headers", {}), **owner.bearer}
        response = client.open(row.url, method=row.method, **kwargs)
        status = response.status_code
        if row.rule:
            reached.add(row.rule)
        else:
            path = row.url.split("?")[0]
            with contextlib.suppress(NotFound, MethodNotAllowed):
                reached.add(adapter.match(path, method=row.method, return_rule=True)[0].rule)
        if status >= 500 or status not in row.expect:
            failures.append((row.method, row.url[:120], status, row.expect, response.data[:200]))
            continue
        if status >= 400:
            body = response.get_data(as_text=True)
            if row.says not in body:
                failures.append((row.method, row.url[:120], "message", row.says, body[:300]))
            if row.url.startswith("/api/"):
                if not response.is_json or response.get_json().get("status") != status:
                    failures.append((row.method, row.url[:120], "not JSON", body[:200]))
            elif "text/html" not in response.content_type or len(body) < 50:
                failures.append((row.method, row.url[:120], "no error page", body[:200]))
    assert failures == [], "\n".join(map(repr, failures))
    assert reached == {rule.rule for rule in app.url_map.iter_rules()}
