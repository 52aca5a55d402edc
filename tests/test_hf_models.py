"""Five real models' tokenizer.json files imported here give exactly HF `tokenizers`' ids, with
and without the model's own special tokens, and decode to exactly its text.

The files are not in the repository: `model_dir()` finds them in the directory named by
BPE_MODEL_TOKENIZERS_DIR, else `model-tokenizers/` in the checkout (gitignored); without them
the tests skip, naming the script that fetches them.
"""

from __future__ import annotations

import json
import os
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import formats
from bpe.importers import import_path
from bpe.model import Tokenizer
from bpe.patterns import BUILT_IN_PATTERNS
from tests.reference_files import CORPORA, CORPORA_DIR, REPO
from tests.strategies import TEXTS

tokenizers = pytest.importorskip("tokenizers")

MODELS = ("llama3", "gptoss", "qwen3", "deepseek_v3", "llama2")
SCRIPT_NAME = "../shared/model-tokenizers/make_model_tokenizers.sh"
SLICE = 4000  # characters of each corpus, taken from three places


def model_path(name: str) -> Path:
    directory = Path(os.environ.get("BPE_MODEL_TOKENIZERS_DIR", REPO / "model-tokenizers"))
    path = directory / name / "tokenizer.json"
    if not path.is_file():
        pytest.skip(f"{path} is missing: build it with {SCRIPT_NAME} {directory}")
    return path


@cache
def _loaded(name: str) -> tuple[Tokenizer, object]:
    path = model_path(name)
    return import_path(path), tokenizers.Tokenizer.from_file(str(path))


def loaded(name: str) -> tuple[Tokenizer, object]:
    model_path(name)  # skips before the cache remembers a failure
    return _loaded(name)


def samples() -> list[str]:
    out = []
    for corpus in CORPORA:
        path = CORPORA_DIR / corpus
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        for start in (0, len(text) // 2, max(len(text) - SLICE, 0)):
            out.append(text[start : start + SLICE])
    return out


ODD = [
    "",
    " ",
    "  two leading spaces",
    "<s>hi</s> <unk> <|endoftext|><|im_start|>x",
    "tabs\tand\r\nnewlines\n\n\n",
    "combining e\u0301 and precomposed \u00e9, ligature \ufb01, \u0130stanbul",
    "emoji \U0001f600\U0001f469\u200d\U0001f4bb and controls \x00\x01\x7f",
    "a\u2581b \u2581\u2581 metaspace characters",
    "12345678901234567890 \u0661\u0662\u0663",
]


def check(tok: Tokenizer, hf: object, text: str) -> None:
    for add in (False, True):
        want = hf.encode(text, add_special_tokens=add).ids  # type: ignore[attr-defined]
        got = tok.encode(text, allowed_special="all", add_special_tokens=add)
        assert got == want, (text[:80], add)
        assert tok.decode(got) == hf.decode(want, skip_special_tokens=False)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", MODELS)
def test_corpus_samples_match_tokenizers(name: str) -> None:
    tok, hf = loaded(name)
    texts = samples()
    assert texts, f"no corpora under {CORPORA_DIR}"
    for text in [*texts, *ODD]:
        check(tok, hf, text)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=st.one_of(TEXTS, st.text(max_size=60)))
def test_any_text_matches_tokenizers(name: str, text: str) -> None:
    tok, hf = loaded(name)
    check(tok, hf, text)


@pytest.mark.parametrize("name", MODELS)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_ids_decode_like_tokenizers(name: str, data: st.DataObject) -> None:
    """Ids that no text gives too: broken byte sequences, specials anywhere, lone `▁`."""
    tok, hf = loaded(name)
    byte_tokens = [i for i in range(300) if tok.id_to_token(i).startswith("<0x")]
    any_id = st.sampled_from(sorted(tok.vocab))
    ids = data.draw(st.lists(st.one_of(any_id, st.sampled_from(byte_tokens or [0])), max_size=12))
    assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", MODELS)
def test_special_tokens_stay_text_unless_allowed(name: str) -> None:
    """`allowed_special=()` (the default) is HF's `split_special_tokens=True`: the special
    added tokens are text; the non-special ones still match."""
    tok, _ = loaded(name)
    path = model_path(name)
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.encode_special_tokens = True
    for text in ODD:
        assert tok.encode(text) == hf.encode(text, add_special_tokens=False).ids


@pytest.mark.parametrize("name", ["qwen3", "deepseek_v3", "llama2"])
def test_saved_and_loaded_pipeline_keeps_ids(name: str) -> None:
    tok, hf = loaded(name)
    again = formats.loads(formats.dumps(tok))
    parts = formats.from_parts(formats.header_dict(tok), **formats.bulk_parts(tok))
    text = samples()[0] + ODD[3]
    for loaded_again in (again, parts):
        check(loaded_again, hf, text)


def test_llama2_tokens_keep_their_text() -> None:
    """Llama 2's vocabulary is not byte-level: a token holds the UTF-8 of its text."""
    tok, hf = loaded("llama2")
    hello = hf.token_to_id("\u2581Hello")  # type: ignore[attr-defined]
    assert tok.token_bytes(hello) == "\u2581Hello".encode()
    assert tok.encode("Hello", add_special_tokens=True) == [1, hello]
    assert tok.decode([1, hello]) == "<s> Hello"


def test_llama2_chips_show_the_text_not_the_marks() -> None:
    """The playground's chips show `▁` as the space it stands for and `<0xNN>` as its byte,
    so the tokens put together read as the text (the emoji from four byte tokens)."""
    from webapp.rendering.token_display import token_infos

    tok, _ = loaded("llama2")
    ids = tok.encode("Hello world\n\U0001f9ec")
    shown = b"".join(info.data for info in token_infos(tok, ids))
    assert shown == " Hello world\n\U0001f9ec".encode()
    assert any(tok.token_bytes(i).startswith(b"<0x") for i in ids)


@pytest.mark.parametrize("name", ["llama2", "qwen3"])
def test_pipeline_imports_work_in_the_web_app(app, client, name: str) -> None:
    import io

    from tests.conftest import TEST_OWNER_TOKEN
    from tests.test_web_imports import imported_slug

    _, hf = loaded(name)
    raw = model_path(name).read_bytes()
    response = client.post(
        "/import",
        data={"file": (io.BytesIO(raw), "tokenizer.json")},
        content_type="multipart/form-data",
    )
    assert response.status_code == 303, response.get_data(as_text=True)[:500]
    slug = imported_slug(client, response)  # the import's job ran within the request
    text = "Hello world\n\U0001f9ec caf\u00e9"
    api = client.post(
        f"/api/t/{slug}/encode",
        json={"text": text},
        headers={"Authorization": f"Bearer {TEST_OWNER_TOKEN}"},
    )
    want = hf.encode(text, add_special_tokens=False).ids  # type: ignore[attr-defined]
    assert api.get_json()["ids"] == want
    hx = {"HX-Request": "true"}
    for url in (
        f"/t/{slug}",
        f"/t/{slug}/vocab",
        f"/t/{slug}/merges?per_page=25",
        f"/t/{slug}/token/{want[1]}",
    ):
        assert client.get(url, headers=hx).status_code == 200, url
    played = client.post(f"/t/{slug}/encode", data={"text": text, "view": "ids"}, headers=hx)
    assert played.status_code == 200
    assert f">{want[1]}<" in played.get_data(as_text=True)


def test_pipeline_tokenisers_encode_in_worker_processes() -> None:
    """`encode_batch` pickles the tokeniser to its workers; the pipeline goes too."""
    import pickle

    tok, hf = loaded("llama2")
    again = pickle.loads(pickle.dumps(tok.hf_pipeline))
    texts = [text + " <s>" for text in samples()[:4]]
    assert again.encode(texts[0]) == tok.encode(texts[0], allowed_special="all")
    batch = tok.encode_batch(
        texts * 270, workers=2, allowed_special="all"
    )  # enough text to start the processes
    assert batch[:4] == [hf.encode(t, add_special_tokens=False).ids for t in texts]  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["llama2", "qwen3"])
def test_pipeline_imports_scrub_and_replay(app, client, name: str) -> None:
    """The scrubber encodes with the first k merges; the step-by-step replay shows the
    pipeline's stages before the merges (tests/test_import_pages.py holds it to `tokenizers`)."""
    import io

    from tests.test_web_imports import imported_slug

    raw = model_path(name).read_bytes()
    response = client.post(
        "/import",
        data={"file": (io.BytesIO(raw), "tokenizer.json")},
        content_type="multipart/form-data",
    )
    slug = imported_slug(client, response)  # the import's job ran within the request
    tok, _ = loaded(name)
    hx = {"HX-Request": "true"}
    text = "Hello world, hello"
    scrubbed = client.post(f"/t/{slug}/encode", data={"text": text, "k": "5"}, headers=hx)
    assert scrubbed.status_code == 200
    html = scrubbed.get_data(as_text=True)
    limited = tok.encode(text, merge_limit=5)
    assert limited != tok.encode(text)
    assert all(f'data-tip="id {token_id} ' in html for token_id in limited)
    why = client.post(f"/t/{slug}/why", data={"text": text, "at": "1"}, headers=hx)
    assert why.status_code == 200
    assert 'class="pipeline-stages"' in why.get_data(as_text=True)


@pytest.mark.parametrize("name", MODELS)
def test_the_fetched_models_split_with_patterns_known_to_be_bounded(name: str) -> None:
    # bpe.patterns lists the fetched files' Split regexes among the built-in patterns, whose
    # splits skip the time limit (tests/test_patterns_bounded.py holds each to the probe check):
    # they must be the files' regexes exactly, character for character.
    raw = json.loads(model_path(name).read_text(encoding="utf-8"))
    steps = [raw["pre_tokenizer"]] if raw.get("pre_tokenizer") else []
    steps = [s for step in steps for s in step.get("pretokenizers", [step])]
    regexes = [s["pattern"]["Regex"] for s in steps if s["type"] == "Split"]
    assert all(regex in BUILT_IN_PATTERNS for regex in regexes), regexes
    tok, _ = loaded(name)
    assert not tok._timed_splits
