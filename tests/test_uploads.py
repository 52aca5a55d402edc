"""Uploads: streaming, the size limit, strict UTF-8, BOMs, refusals that leave nothing behind."""

from __future__ import annotations

import codecs
import hashlib
import io
import os
import tracemalloc

import pytest
from sqlalchemy import func, select

from webapp.storage.models import Corpus
from webapp.storage.uploads import CHUNK


def corpus_count(app) -> int:
    with app.extensions["bpe_db"].read_scope() as session:
        return session.scalar(select(func.count()).select_from(Corpus))


def stored(app, slug: str) -> Corpus:
    with app.extensions["bpe_db"].read_scope() as session:
        row = session.scalar(select(Corpus).where(Corpus.slug == slug))
        _ = row.text  # load the deferred column while the session is open
        return row


def upload_file(client, data: bytes, filename: str = "corpus.txt", **form):
    form = {"name": "", **form, "file": (io.BytesIO(data), filename)}
    return client.post("/corpora", data=form, content_type="multipart/form-data")


def slug_of(response) -> str:
    assert response.status_code == 303, response.get_data(as_text=True)
    return response.headers["Location"].rsplit("/", 1)[-1]


def assert_nothing_left(app):
    assert corpus_count(app) == 0
    tmp = app.config["UPLOAD_TMP_DIR"]
    assert not os.path.exists(tmp) or os.listdir(tmp) == []


def test_file_upload_stores_text_and_shows_stats(app, client):
    data = "héllo wörld\nsecond line\nthird".encode()
    slug = slug_of(upload_file(client, data, name="My corpus"))
    row = stored(app, slug)
    assert row.text == data.decode()
    assert (row.size_bytes, row.char_count, row.line_count) == (len(data), 29, 3)
    assert row.sha256 == hashlib.sha256(data).hexdigest()
    page = client.get(f"/c/{slug}").get_data(as_text=True)
    assert "My corpus" in page and "second line" in page
    assert f"{len(data):,}" in page and "29" in page
    assert_tmp_empty(app)


def assert_tmp_empty(app):
    tmp = app.config["UPLOAD_TMP_DIR"]
    assert not os.path.exists(tmp) or os.listdir(tmp) == []


def test_pasted_text_makes_a_corpus(app, client):
    response = client.post("/corpora", data={"text": "pasted words here", "name": "p"})
    assert stored(app, slug_of(response)).text == "pasted words here"


def test_same_bytes_twice_reuse_the_row(app, client):
    first = slug_of(upload_file(client, b"same text twice"))
    second = slug_of(upload_file(client, b"same text twice", filename="other.txt"))
    assert first == second
    assert corpus_count(app) == 1


def test_slugs_are_long_random_and_url_safe(client):
    slug = slug_of(upload_file(client, b"some text"))
    assert len(slug) == 22 and all(c.isalnum() or c in "-_" for c in slug)


def test_line_count_does_not_count_a_final_newline(app, client):
    assert stored(app, slug_of(upload_file(client, b"a\nb\n"))).line_count == 2


@pytest.mark.parametrize("size", [1001, 5000])
def test_oversize_file_is_413_with_the_limit(app_config, size):
    from webapp import create_app

    app_config["MAX_UPLOAD_BYTES"] = 1000
    app = create_app(app_config)
    response = upload_file(app.test_client(), b"x" * size)
    assert response.status_code == 413
    assert "1,000 bytes" in response.get_data(as_text=True)
    assert_nothing_left(app)


def test_body_far_over_the_limit_is_refused_before_reading(app_config):
    from webapp import create_app

    app_config["MAX_UPLOAD_BYTES"] = 1000
    app = create_app(app_config)
    response = upload_file(app.test_client(), b"x" * (2 * 1024 * 1024))
    assert response.status_code == 413
    assert "1,000 bytes" in response.get_data(as_text=True)
    assert_nothing_left(app)


class CountingInput(io.BytesIO):
    """A request body as the WSGI server hands it over, counting the bytes the app reads."""

    bytes_read = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.bytes_read += len(data)
        return data

    def read1(self, size: int = -1) -> bytes:
        data = super().read1(size)
        self.bytes_read += len(data)
        return data

    def readinto(self, buffer: bytearray | memoryview) -> int:
        count = super().readinto(buffer)
        self.bytes_read += count
        return count

    def readline(self, size: int | None = -1) -> bytes:
        data = super().readline(size)
        self.bytes_read += len(data)
        return data


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_a_body_over_the_request_limit_is_refused_having_read_at_most_the_limit(
    app_config, chunked
):
    """MAX_CONTENT_LENGTH at work: a multipart body is parsed (its file spooled to disk)
    before any view sees it, so without the app's request limit a body of any size is read to
    its end and only then refused by the upload's own check. A declared Content-Length over the
    limit is refused before a byte is read; a chunked body once the limit is passed."""
    from webapp import create_app

    app_config["MAX_UPLOAD_BYTES"] = app_config["MAX_IMPORT_BYTES"] = 1000
    app = create_app(app_config)
    # The app's request limit is then about 1 MB (the larger of those, plus a margin for the
    # form's other fields); the body is 8 MB, so reading it whole cannot pass for "the limit".
    read_at_most = 2 * 1024 * 1024
    boundary = "limit-test-boundary"
    body = CountingInput(
        (
            f"--{boundary}\r\n"
            'Content-Disposition: form-data; name="file"; filename="big.txt"\r\n'
            "Content-Type: text/plain\r\n\r\n"
        ).encode()
        + b"x" * (8 * 1024 * 1024)
        + f"\r\n--{boundary}--\r\n".encode()
    )
    size = len(body.getvalue())
    headers = {"Transfer-Encoding": "chunked"} if chunked else {}
    response = app.test_client().post(
        "/corpora",
        input_stream=body,
        content_type=f"multipart/form-data; boundary={boundary}",
        headers=headers,
        # a server that de-chunks the body says so; without it Werkzeug reads nothing at all
        environ_overrides={"wsgi.input_terminated": True} if chunked else {},
    )
    assert response.status_code == 413
    assert body.bytes_read <= read_at_most, f"read {body.bytes_read:,} of the {size:,} bytes"
    assert_nothing_left(app)


def test_default_limit_is_200_mb(app):
    assert app.config["MAX_UPLOAD_BYTES"] == 200 * 1000 * 1000
    assert "200 MB" in app.test_client().get("/").get_data(as_text=True)


def test_upload_exactly_at_the_limit_is_accepted(app_config):
    from webapp import create_app

    app_config["MAX_UPLOAD_BYTES"] = 1000
    app = create_app(app_config)
    slug_of(upload_file(app.test_client(), b"y" * 1000))


@pytest.mark.parametrize(
    ("data", "offset"),
    [
        (b"hello \xff world", 6),
        (b"\xc3\x28", 0),  # a lead byte followed by a non-continuation byte
        (b"abc\xe4\xb8", 3),  # truncated at the end
        (b"ok \xed\xa0\x80", 3),  # an encoded surrogate is not UTF-8
        (b"a" * (CHUNK - 1) + "é".encode() + b" \x80", CHUNK + 2),  # across a chunk boundary
    ],
)
def test_invalid_utf8_is_422_with_the_byte_offset(app, client, data, offset):
    response = upload_file(client, data)
    assert response.status_code == 422
    assert f"byte offset {offset}" in response.get_data(as_text=True)
    assert_nothing_left(app)


def test_utf8_bom_is_stripped(app, client):
    row = stored(app, slug_of(upload_file(client, codecs.BOM_UTF8 + b"bom text")))
    assert row.text == "bom text"
    assert row.size_bytes == 8
    assert row.sha256 == hashlib.sha256(b"bom text").hexdigest()


@pytest.mark.parametrize("codec", ["utf-16", "utf-16-be", "utf-32", "utf-32-be"])
def test_utf16_and_utf32_with_bom_are_transcoded(app, client, codec):
    text = "Grüße, 東京 😀\nline two"
    bom = {"utf-16-be": codecs.BOM_UTF16_BE, "utf-32-be": codecs.BOM_UTF32_BE}.get(codec, b"")
    row = stored(app, slug_of(upload_file(client, bom + text.encode(codec))))
    assert row.text == text
    assert row.sha256 == hashlib.sha256(text.encode()).hexdigest()
    assert row.source_encoding.startswith(codec[:6])


def test_utf16_without_bom_is_not_utf8(app, client):
    response = upload_file(client, "hi".encode("utf-16-le") + "é".encode("utf-16-le"))
    assert response.status_code == 422


def test_broken_utf16_is_422_with_offset(app, client):
    data = codecs.BOM_UTF16_LE + "ab".encode("utf-16-le") + b"\x00\xd8" + b"x\x00"  # lone surrogate
    response = upload_file(client, data)
    assert response.status_code == 422
    assert "byte offset 6" in response.get_data(as_text=True)


@pytest.mark.parametrize("data", [b"", codecs.BOM_UTF8, codecs.BOM_UTF16_LE])
def test_empty_upload_is_refused(app, client, data):
    response = upload_file(client, data)
    assert response.status_code == 422
    assert "empty" in response.get_data(as_text=True)
    assert_nothing_left(app)


def test_nul_characters_are_refused(app, client):
    response = upload_file(client, b"binary\x00stuff")
    assert response.status_code == 422
    assert "NUL" in response.get_data(as_text=True)
    assert_nothing_left(app)


@pytest.mark.parametrize("codec", ["utf-16-le", "utf-16-be"])
def test_utf16_without_a_bom_is_named_with_a_hint(app, client, codec):
    response = upload_file(client, "Plain English text, saved as UTF-16.\n".encode(codec))
    assert response.status_code == 422
    name = codec.upper().replace("-LE", "LE").replace("-BE", "BE")
    assert f"looks like {name} without a byte-order mark" in response.text
    assert "binary file" not in response.text
    assert_nothing_left(app)


def test_no_file_and_no_text_is_422(app, client):
    response = client.post("/corpora", data={"name": "x"})
    assert response.status_code == 422
    assert "Choose a file" in response.get_data(as_text=True)


def test_hostile_filename_is_display_only(app, client, tmp_path):
    response = upload_file(client, b"contents", filename="../../x\x00.txt")
    row = stored(app, slug_of(response))
    assert row.filename == "x.txt"
    assert row.name == "x.txt"
    assert not (tmp_path.parent / "x.txt").exists() and not (tmp_path / "x.txt").exists()
    page = client.get(f"/c/{row.slug}").get_data(as_text=True)
    assert "x.txt" in page and "\x00" not in page


def test_a_name_keeps_its_slashes_and_loses_its_control_characters(app, client, owner):
    # A name is no path: "2024/25 news" is what its owner typed, in the form and the API alike.
    form = upload_file(client, b"first text", filename="dir/f.txt", name="2024/25\u202e news")
    row = stored(app, slug_of(form))
    assert (row.name, row.filename) == ("2024/25 news", "f.txt")
    api = client.post(
        "/api/corpora?name=a%2Fb%5Cc",
        data=b"second text",
        headers=owner.bearer,
        content_type="text/plain",
    )
    assert api.status_code == 201, api.get_json()
    assert api.get_json()["name"] == "a/b\\c"


def test_names_are_escaped(app, client):
    response = upload_file(client, b"<script>alert(1)</script>", name='<img src=x onerror="y">')
    page = client.get(f"/c/{slug_of(response)}").get_data(as_text=True)
    assert "<script>alert(1)" not in page and "<img src=x" not in page
    assert "&lt;script&gt;" in page and "&lt;img" in page


def test_pasted_text_over_its_limit_is_413(app_config):
    from webapp import create_app

    app_config["MAX_PASTE_BYTES"] = 100
    app = create_app(app_config)
    response = app.test_client().post("/corpora", data={"text": "z" * 500})
    assert response.status_code == 413
    assert "100 bytes" in response.get_data(as_text=True)
    assert_nothing_left(app)


# ----- the JSON / API upload --------------------------------------------------------------------
@pytest.mark.parametrize("kind", ["raw", "json"])
def test_the_upload_answer_already_has_the_words_floor(client, owner, kind):
    """The answer to a fresh upload gives every mode's smallest vocab, as a later GET does."""
    text = "hello wörld, hello wörld " * 10
    if kind == "raw":
        response = client.post(
            "/api/corpora?name=floor",
            data=text.encode(),
            content_type="text/plain; charset=utf-8",
            headers=owner.bearer,
        )
    else:
        response = client.post("/api/corpora", json={"text": text, "name": "floor"})
    answer = response.get_json()
    later = client.get(f"/api/corpora/{answer['slug']}").get_json()
    assert answer["smallest_vocab_size"] == later["smallest_vocab_size"]
    assert answer["smallest_vocab_size"]["words"] == len(set(text) - {" "}) + 2  # </w>, <unk>


def test_api_upload_raw_body(app, client, owner):
    data = "raw body corpus ✓".encode()
    response = client.post(
        "/api/corpora?name=raw&filename=a/b.txt",
        data=data,
        content_type="text/plain; charset=utf-8",
        headers=owner.bearer,
    )
    assert response.status_code == 201
    body = response.get_json()
    assert body["sha256"] == hashlib.sha256(data).hexdigest()
    assert body["name"] == "raw" and body["filename"] == "b.txt" and body["created"] is True
    again = client.post(
        "/api/corpora", data=data, content_type="application/octet-stream", headers=owner.bearer
    )
    assert again.status_code == 200 and again.get_json()["slug"] == body["slug"]


def test_api_upload_json(app, client):
    response = client.post("/api/corpora", json={"text": "json text", "name": "j"})
    assert response.status_code == 201
    assert stored(app, response.get_json()["slug"]).text == "json text"


def test_api_upload_multipart(app, client, owner):
    response = client.post(
        "/api/corpora",
        data={"file": (io.BytesIO(b"multi"), "m.txt")},
        content_type="multipart/form-data",
        headers=owner.bearer,
    )
    assert response.status_code == 201 and response.get_json()["filename"] == "m.txt"


@pytest.mark.parametrize(
    ("kwargs", "status", "words"),
    [
        ({"data": b"\xff", "content_type": "text/plain"}, 422, "byte offset 0"),
        ({"data": b"", "content_type": "text/plain"}, 422, "empty"),
        ({"json": {"name": "no text"}}, 422, '"text"'),
        ({"json": [1, 2]}, 422, '"text"'),
    ],
)
def test_api_upload_errors_are_json(app, client, owner, kwargs, status, words):
    response = client.post("/api/corpora", headers=owner.bearer, **kwargs)
    assert response.status_code == status
    assert words in response.get_json()["error"]
    assert_nothing_left(app)


def test_api_oversize_is_json_413(app_config):
    from webapp import create_app

    app_config["MAX_UPLOAD_BYTES"] = 10
    app = create_app(app_config)
    client = app.test_client()
    bearer = {"Authorization": f"Bearer {client.get_cookie('bpe_owner').value}"}
    response = client.post(
        "/api/corpora", data=b"x" * 11, content_type="text/plain", headers=bearer
    )
    assert response.status_code == 413
    assert "10 bytes" in response.get_json()["error"]
    assert_nothing_left(app)


class _DroppingStream(io.BytesIO):
    """A request body whose client goes away after sending part of it."""

    def read(self, size=-1):
        chunk = super().read(size)
        if not chunk:
            raise ConnectionResetError("client went away")
        return chunk

    readline = read


@pytest.mark.parametrize("path", ["/api/corpora", "/corpora"])
def test_dropped_connection_leaves_nothing(app, client, path):
    partial = b"a" * (3 * CHUNK)
    body = _DroppingStream(partial)
    content_type = "text/plain" if path.startswith("/api") else "multipart/form-data; boundary=zz"
    if path == "/corpora":
        body = _DroppingStream(
            b'--zz\r\nContent-Disposition: form-data; name="file"; filename="a.txt"\r\n\r\n'
            + partial
        )
    response = client.post(
        path,
        input_stream=body,
        content_type=content_type,
        environ_overrides={"CONTENT_LENGTH": str(10 * CHUNK)},
    )
    assert 400 <= response.status_code < 500
    assert_nothing_left(app)


def test_truncated_body_leaves_nothing(app, client):
    """The client promised more bytes than it sent (Werkzeug: ClientDisconnected)."""
    response = client.post(
        "/api/corpora",
        input_stream=io.BytesIO(b"short"),
        content_type="text/plain",
        environ_overrides={"CONTENT_LENGTH": "100000"},
    )
    assert 400 <= response.status_code < 500
    assert_nothing_left(app)


def test_large_upload_streams_into_the_row_intact(app, client):
    text = "línea número ✓ 東京 😀\n" * 150_000  # several chunks, multi-byte everywhere
    data = text.encode()
    assert len(data) > 3 * CHUNK
    row = stored(app, slug_of(upload_file(client, data)))
    assert row.text == text and row.sha256 == hashlib.sha256(data).hexdigest()
    assert row.char_count == len(text) and row.line_count == 150_000
    page = client.get(f"/c/{row.slug}").get_data(as_text=True)
    assert "línea número ✓ 東京 😀" in page


def test_bidi_and_control_characters_never_reach_a_page_raw(app, client):
    # A right-to-left override in a name could make the page lie about what follows it: the
    # upload drops such characters, and every page shows names through the `visible` filter.
    hostile = "evil\u202egnp.exe\x07"
    response = upload_file(client, b"some text for a corpus", name=hostile)
    slug = slug_of(response)
    assert stored(app, slug).name == "evilgnp.exe"
    pages = [
        client.get(f"/c/{slug}").get_data(as_text=True),
        client.get("/").get_data(as_text=True),
    ]
    for page in pages:
        assert "\u202e" not in page and "\x07" not in page
        assert "evilgnp.exe" in page
    with app.test_request_context():
        rendered = app.jinja_env.from_string("{{ name|visible }}").render(name=hostile)
    assert "\u202e" not in rendered and "U+202E" in rendered


def test_preview_shows_bidi_overrides_in_the_text_as_escapes(app, client):
    response = upload_file(client, "plain \u202eevil\u202c text\nline two\n".encode())
    page = client.get(f"/c/{slug_of(response)}").get_data(as_text=True)
    assert "\u202e" not in page and "\u202c" not in page
    assert "U+202E" in page and "line two" in page


def test_an_htmx_upload_is_sent_on_or_gets_its_form_back(app, client):
    # htmx sends the form when JavaScript runs (for the progress bar): a new corpus answers
    # with HX-Redirect, a refusal with the form itself and its message, never a whole page.
    hx = {"HX-Request": "true"}
    form = {"name": "", "file": (io.BytesIO(b"hello htmx"), "c.txt")}
    ok = client.post("/corpora", data=form, content_type="multipart/form-data", headers=hx)
    assert ok.status_code == 204 and ok.headers["HX-Redirect"].startswith("/c/")
    bad = {"name": "kept", "file": (io.BytesIO(b"bad \xff"), "c.txt")}
    refused = client.post("/corpora", data=bad, content_type="multipart/form-data", headers=hx)
    html = refused.get_data(as_text=True)
    assert refused.status_code == 422 and "<html" not in html
    assert html.lstrip().startswith('<form class="upload-form"') and "offset 4" in html
    assert 'value="kept"' in html


def _multipart(fields: dict[str, bytes], boundary: str = "b0undary") -> tuple[bytes, str]:
    """A multipart body with each field's bytes exactly as given (no file parts)."""
    body = b"".join(
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n'.encode()
        + value
        + b"\r\n"
        for name, value in fields.items()
    )
    return body + f"--{boundary}--\r\n".encode(), f"multipart/form-data; boundary={boundary}"


@pytest.mark.parametrize(
    ("fields", "field", "offset"),
    [
        ({"text": b"pasted \xff words", "name": b"n"}, "text", 7),
        ({"text": b"fine text", "name": b"caf\xc3"}, "name", 3),  # half a character at the end
        ({"text": b"\xed\xa0\x80 a lone surrogate, UTF-8 style"}, "text", 0),
    ],
)
def test_a_multipart_field_that_is_not_utf8_is_400_naming_it(app, client, fields, field, offset):
    """Werkzeug would store U+FFFD in place of the bad bytes, silently; refused instead."""
    body, content_type = _multipart(fields)
    response = client.post("/corpora", data=body, content_type=content_type)
    assert response.status_code == 400, response.get_data(as_text=True)[:300]
    page = response.get_data(as_text=True)
    assert f"field &#39;{field}&#39; is not valid UTF-8" in page, page
    assert f"byte offset {offset}" in page
    assert_nothing_left(app)


def test_a_multipart_field_that_is_not_utf8_is_json_400_on_the_api(app, client, owner):
    body, content_type = _multipart({"text": b"ok", "name": b"\x80bad"})
    response = client.post(
        "/api/corpora", data=body, content_type=content_type, headers=owner.bearer
    )
    assert response.status_code == 400
    assert "field 'name' is not valid UTF-8" in response.get_json()["error"]
    assert_nothing_left(app)


def test_multipart_fields_in_utf8_arrive_exactly(app, client):
    text = "pasted: café 東京 😀 \u202e ﻿ end"
    body, content_type = _multipart({"text": text.encode(), "name": "naïve 名前".encode()})
    row = stored(app, slug_of(client.post("/corpora", data=body, content_type=content_type)))
    assert row.text == text and row.name == "naïve 名前"


def test_an_upload_is_stored_without_holding_its_text_in_memory(app, client, owner, tmp_path):
    """On either database (CI runs this on SQLite and on PostgreSQL): the request's peak of new
    Python allocations stays far below the corpus's size (tracemalloc counts every bytes and
    str object, the file's text read whole included), and the row holds the file's text,
    COPY's special bytes (tab, backslash, CR, newline) and multi-byte characters included."""
    path = tmp_path / "big.txt"
    line = "a\ttab, a back\\slash, \\N, ünïcödé 東京 😀, a CR\r, a newline\n".encode()
    with open(path, "wb") as out:
        while out.tell() < 48_000_000:
            out.write(line * 10_000)
    size = path.stat().st_size
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    tracemalloc.start()
    try:
        with open(path, "rb") as body:
            response = client.post(
                "/api/corpora?name=big",
                input_stream=body,
                content_type="text/plain",
                headers=owner.bearer,
                environ_overrides={"CONTENT_LENGTH": str(size)},
            )
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert response.status_code == 201, response.get_data(as_text=True)[:300]
    # About 15 MB whatever the size (1 MB chunks, decoded and encoded again); half the size here.
    assert peak < size // 2, f"{peak:,} bytes allocated at the peak for a {size:,}-byte upload"
    row = stored(app, response.get_json()["slug"])
    assert row.size_bytes == size and row.sha256 == digest
    assert hashlib.sha256(row.text.encode()).hexdigest() == digest
    assert_tmp_empty(app)
