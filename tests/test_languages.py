"""Which languages pay more: the parallel text read and refused, the script and spacing of each
language, `bpe languages`, and the whole UDHR table, computed by the web app's job, equal to
tiktoken's own counts for GPT-4 (cl100k_base) and GPT-4o (o200k_base) and to HF `tokenizers`'
counts for an imported HF model (Qwen 3), on every complete text."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import unicodedata

import pytest

import bpe
from bpe.importers import import_path
from bpe.languages import (
    LanguageTable,
    ParallelTextError,
    extremes,
    measure,
    read_parallel_text,
)
from bpe.scripts import writing
from tests.reference_files import read_ranks, reference_dir
from tests.udhr_files import udhr_dir
from webapp.content.imports import store_reference, store_upload

TOY = {
    "eng": ("English", "All human beings are born free and equal in dignity and rights.\n"),
    "fra": ("French", "Tous les êtres humains naissent libres et égaux en dignité et en droits.\n"),
    "cmn_hans": ("Chinese", "人人生而自由，在尊严和权利上一律平等。\n"),
}


def write_parallel_text(folder, texts=TOY, *, stage: int = 4) -> None:
    folder.mkdir(exist_ok=True)
    index = [{"code": c, "name": n, "stage": stage} for c, (n, _) in texts.items()]
    (folder / "index.json").write_text(json.dumps(index), encoding="utf-8")
    for code, (_, text) in texts.items():
        (folder / f"{code}.txt").write_text(text, encoding="utf-8")


def test_reads_complete_texts_in_index_order(tmp_path):
    write_parallel_text(tmp_path)
    index = json.loads((tmp_path / "index.json").read_text())
    index.append({"code": "xyz", "name": "Title only", "stage": 2})  # no file needed: left out
    (tmp_path / "index.json").write_text(json.dumps(index))
    languages = read_parallel_text(tmp_path)
    assert [lang.code for lang in languages] == ["eng", "fra", "cmn_hans"]
    assert languages[1].text == TOY["fra"][1]


@pytest.mark.parametrize(
    ("index", "message"),
    [
        ("not json", "is not JSON"),
        ('{"code": "eng"}', "must be a list"),
        ('[{"code": "../etc/passwd", "name": "x", "stage": 4}]', "a code is letters"),
        ('[{"code": "eng", "name": "English", "stage": "4"}]', "needs a name"),
        ('[{"code": "zzz", "name": "Missing", "stage": 4}]', "cannot read"),
        ('[{"code": "eng", "name": "English", "stage": 1}]', "no complete text"),
    ],
)
def test_a_bad_folder_is_refused_saying_why(tmp_path, index, message):
    write_parallel_text(tmp_path)
    (tmp_path / "index.json").write_text(index, encoding="utf-8")
    with pytest.raises(ParallelTextError, match=message):
        read_parallel_text(tmp_path)


def test_premium_worst_and_best_by_hand():
    tok = bpe.Tokenizer(mode="naive", merges=[(104, 105, 256)])  # "hi"
    from bpe.languages import Language

    texts = [Language("eng", "E", "hi hi"), Language("a", "A", "hé"), Language("b", "B", "hihi")]
    table = measure({"t": tok}, texts)
    base = table.baseline
    # eng: hi, " ", hi = 3 tokens; a: h, é (2 bytes) = 3; b: hi hi = 2.
    assert [r.tokens["t"] for r in table.rows] == [3, 3, 2]
    assert [r.premium("t", base) for r in table.rows] == [1.0, 1.0, 2 / 3]
    worst, best = extremes(table, "t", count=2)
    assert [r.code for r in worst] == ["eng", "a"] and [r.code for r in best] == ["b", "a"]
    assert extremes(LanguageTable(["t"], []), "t") == ([], [])


def test_script_and_spacing_of_the_udhr_texts():
    languages = {lang.code: lang for lang in read_parallel_text(udhr_dir())}
    expect = {
        "eng": ("Latin", True),
        "kal": ("Latin", True),  # Greenlandic's long words are still words
        "rus": ("Cyrillic", True),
        "arb": ("Arabic", True),
        "hin": ("Devanagari", True),
        "kor": ("Hangul", True),
        "cmn_hans": ("Han", False),
        "jpn": ("Hiragana", False),
        "tha": ("Thai", False),
        "khm": ("Khmer", False),
        "amh": ("Ethiopic", False),  # written with the Ethiopic wordspace, not spaces
    }
    got = {code: (writing(languages[code].text).script, writing(languages[code].text).spaced)
           for code in expect}  # fmt: skip
    assert got == expect


def test_cli_languages(tmp_path):
    write_parallel_text(tmp_path / "udhr")
    tok = bpe.train(TOY["eng"][1] * 3, vocab_size=280, mode="chunked", trainer="reference")
    bpe.save(tok, tmp_path / "toy.json")
    run = subprocess.run(
        [sys.executable, "-m", "bpe", "languages", str(tmp_path / "toy.json"), "--csv",
         "--udhr", str(tmp_path / "udhr")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    rows = {r["code"]: r for r in csv.DictReader(io.StringIO(run.stdout))}
    eng = len(tok.encode(TOY["eng"][1]))
    for code, (_, text) in TOY.items():
        assert int(rows[code]["tokens"]) == len(tok.encode(text))
        assert float(rows[code]["premium"]) == pytest.approx(len(tok.encode(text)) / eng)
    assert rows["cmn_hans"]["fertility_unit"] == "tokens/char"
    assert rows["fra"]["fertility_unit"] == "tokens/word" and rows["fra"]["tokenizer"] == "toy"
    bad = subprocess.run(
        [sys.executable, "-m", "bpe", "languages", str(tmp_path / "toy.json"),
         "--udhr", str(tmp_path)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert bad.returncode == 1 and "make_udhr.sh" in bad.stderr and "Traceback" not in bad.stderr


# ----- the whole UDHR, through the web app's job, against the peers -------------------------------
def comparable(text: str) -> bool:
    """Characters Python's Unicode tables know: the `regex` module's newer tables may split
    characters assigned later differently from tiktoken's and HF's engines."""
    return all(unicodedata.category(c) != "Cn" for c in text)


@pytest.mark.slow
def test_the_web_table_equals_tiktoken_and_tokenizers(app, client, runner):
    tiktoken = pytest.importorskip("tiktoken")
    hf = pytest.importorskip("tokenizers")
    from tests.test_hf_models import model_path

    folder = udhr_dir()
    refs = reference_dir()
    qwen_path = model_path("qwen3")
    result = runner.invoke(args=["fetch-udhr", "--dir", str(folder)])
    assert result.exit_code == 0, result.output
    database = app.extensions["bpe_db"]
    slugs = {
        label: store_reference(database, import_path(refs / f"{name}.tiktoken"), label)
        for name, label in (("cl100k_base", "GPT-4"), ("o200k_base", "GPT-4o"))
    }
    slugs["Qwen 3"] = store_upload(database, import_path(qwen_path), owner_id=None).slug
    answer = client.post("/api/languages", json={"tokenizers": list(slugs.values())})
    assert answer.status_code == 202, answer.get_data(as_text=True)
    data = client.get(f"/api/languages/{answer.get_json()['job_id']}").get_json()
    assert data["status"] == "succeeded", data["error"]
    names = {t["slug"]: t["name"] for t in data["tokenizers"]}
    table: dict[tuple[str, str], int] = {
        (r["tokenizer"], r["code"]): r["tokens"] for r in data["languages"]
    }

    texts = {lang.code: lang.text for lang in read_parallel_text(folder) if comparable(lang.text)}
    assert len(texts) >= 500
    for name in ("cl100k_base", "o200k_base"):
        meta = json.loads((refs / f"{name}.tiktoken.json").read_text(encoding="utf-8"))
        encoding = tiktoken.Encoding(
            name,
            pat_str=meta["pat_str"],
            mergeable_ranks=read_ranks(refs / f"{name}.tiktoken"),
            special_tokens=meta["special_tokens"],
        )
        label = names[slugs["GPT-4" if name == "cl100k_base" else "GPT-4o"]]
        theirs = {code: len(encoding.encode_ordinary(text)) for code, text in texts.items()}
        assert {code: table[(label, code)] for code in texts} == theirs
    qwen = hf.Tokenizer.from_file(str(qwen_path))
    theirs = {
        code: len(qwen.encode(text, add_special_tokens=False).ids) for code, text in texts.items()
    }
    assert {code: table[(names[slugs["Qwen 3"]], code)] for code in texts} == theirs
    # The premium is the count over English's, by the same tokeniser.
    label = names[slugs["GPT-4"]]
    row = next(r for r in data["languages"] if r["tokenizer"] == label and r["code"] == "cmn_hans")
    assert row["premium"] == pytest.approx(table[(label, "cmn_hans")] / table[(label, "eng")])
