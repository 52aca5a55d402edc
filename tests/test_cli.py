"""The `bpe` command line, run as a user runs it: a subprocess, exit codes and stderr."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

TEXT = "the cat sat on the mat\nthe cat ate the rat\n"


def bpe_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bpe", *args],
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.fixture
def tok_path(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "tok.json"
    result = bpe_cli(
        "train",
        str(corpus),
        "--vocab-size",
        "268",
        "--trainer",
        "reference",
        "--special",
        "<eot>",
        "-o",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert "learned" in result.stderr
    return out


def test_train_writes_the_documented_file(tok_path):
    data = json.loads(tok_path.read_text())
    assert data["mode"] == "chunked"
    assert data["special_tokens"] == {"<eot>": 267}


def test_encode_decode_round_trip(tok_path, tmp_path):
    doc = tmp_path / "doc.txt"
    doc.write_text("the rat sat", encoding="utf-8")
    encoded = bpe_cli("encode", "-t", str(tok_path), str(doc), str(doc))
    assert encoded.returncode == 0, encoded.stderr
    lines = encoded.stdout.splitlines()
    assert len(lines) == 2 and lines[0] == lines[1]
    decoded = bpe_cli("decode", "-t", str(tok_path), *lines[0].split())
    assert decoded.stdout == "the rat sat\n"
    piped = bpe_cli("decode", "-t", str(tok_path), "-", stdin=lines[0])
    assert piped.stdout == "the rat sat\n"
    from_stdin = bpe_cli("encode", "-t", str(tok_path), stdin="the rat sat")
    assert from_stdin.stdout.strip() == lines[0]


def test_encode_allows_special_tokens_on_request(tok_path):
    plain = bpe_cli("encode", "-t", str(tok_path), stdin="cat<eot>")
    allowed = bpe_cli("encode", "-t", str(tok_path), "--allow-special", stdin="cat<eot>")
    assert "267" not in plain.stdout.split()
    assert allowed.stdout.split()[-1] == "267"


def test_info_lists_mode_specials_and_merges(tok_path):
    result = bpe_cli("info", "-t", str(tok_path), "--merges", "3")
    assert result.returncode == 0
    assert "mode: chunked" in result.stdout
    assert "'<eot>'=267" in result.stdout
    assert "first 3 merges:" in result.stdout


def test_all_modes_and_trainers_are_selectable(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    for mode, size in (("naive", "270"), ("words", "40")):
        out = tmp_path / f"{mode}.json"
        result = bpe_cli(
            "train",
            str(corpus),
            "--mode",
            mode,
            "--vocab-size",
            size,
            "--trainer",
            "reference",
            "-q",
            "-o",
            str(out),
        )
        assert result.returncode == 0, result.stderr
        assert result.stderr == ""
        assert json.loads(out.read_text())["mode"] == mode


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("train", "MISSING.txt", "--vocab-size", "300", "-o", "x.json"), "cannot read"),
        (("train", "CORPUS", "--vocab-size", "10", "-o", "x.json"), "vocab_size must be at least"),
        (
            ("train", "CORPUS", "--vocab-size", "300", "--pattern", "(", "-o", "x.json"),
            "not a valid regex",
        ),
        (("train", "BADUTF8", "--vocab-size", "300", "-o", "x.json"), "not UTF-8"),
        (("decode", "-t", "TOK", "12", "x"), "not a token id"),
        (("decode", "-t", "TOK", "99999"), "not in this vocabulary"),
        (("info", "-t", "CORPUS"), "not valid JSON"),
        (("info", "-t", "MISSING.json"), "cannot read"),
    ],
)
def test_bad_input_exits_nonzero_with_one_line(tok_path, tmp_path, args, message):
    corpus = tmp_path / "corpus.txt"
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok \xff\xfe")
    names = {"CORPUS": str(corpus), "BADUTF8": str(bad), "TOK": str(tok_path)}
    argv = [names.get(a, a if a != "x.json" else str(tmp_path / "x.json")) for a in args]
    result = bpe_cli(*argv)
    assert result.returncode != 0
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.stderr


def test_unknown_option_is_a_usage_error():
    result = bpe_cli("train", "--vocab-size")
    assert result.returncode == 2
    assert "usage:" in result.stderr


def test_export_hf_and_tiktoken_files_encode_like_us(tok_path, tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    pytest.importorskip("tiktoken")
    from bpe.export_tiktoken import load_tiktoken
    from bpe.formats import load

    hf_out = tmp_path / "tokenizer.json"
    result = bpe_cli("export", "-t", str(tok_path), "--format", "hf", "-o", str(hf_out))
    assert result.returncode == 0, result.stderr
    tt_out = tmp_path / "tok"
    result = bpe_cli("export", "-t", str(tok_path), "--format", "tiktoken", "-o", str(tt_out))
    assert result.returncode == 0, result.stderr
    ours = load(tok_path)
    text = "the rat sat on the cat, 中文 😀"
    assert tokenizers.Tokenizer.from_file(str(hf_out)).encode(text).ids == ours.encode(text)
    assert load_tiktoken(tmp_path / "tok.tiktoken").encode(text) == ours.encode(text)


def test_export_refuses_words_mode_with_one_line(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT, encoding="utf-8")
    out = tmp_path / "w.json"
    assert (
        bpe_cli(
            "train",
            str(corpus),
            "--mode",
            "words",
            "--vocab-size",
            "40",
            "--trainer",
            "reference",
            "-q",
            "-o",
            str(out),
        ).returncode
        == 0
    )
    result = bpe_cli("export", "-t", str(out), "--format", "hf", "-o", str(tmp_path / "x"))
    assert result.returncode == 1
    assert "byte-level modes only" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_encode_keeps_a_leading_bom_and_decode_gives_the_file_back(tok_path, tmp_path):
    # A byte-order mark is text to a tokeniser: encode must keep it, like HF and tiktoken do.
    doc = tmp_path / "bom.txt"
    original = "\ufeffthe cat\n"
    doc.write_bytes(original.encode("utf-8"))
    encoded = bpe_cli("encode", "-t", str(tok_path), str(doc))
    assert encoded.returncode == 0, encoded.stderr
    ids = encoded.stdout.split()
    from bpe.formats import load

    assert [int(i) for i in ids] == load(tok_path).encode(original)
    decoded = subprocess.run(
        [sys.executable, "-m", "bpe", "decode", "-n", "-t", str(tok_path), *ids],
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert decoded.returncode == 0, decoded.stderr
    assert decoded.stdout == doc.read_bytes()


def test_decode_ends_with_a_newline_unless_asked_not_to(tok_path):
    ids = bpe_cli("encode", "-t", str(tok_path), stdin="the rat").stdout.split()
    assert bpe_cli("decode", "-t", str(tok_path), *ids).stdout == "the rat\n"
    assert bpe_cli("decode", "-t", str(tok_path), "--no-newline", *ids).stdout == "the rat"


def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT * 50, encoding="utf-8")
    args = ["train", str(corpus), "--vocab-size", "290", "-o", str(tmp_path / "t.json")]
    result = bpe_cli(*args)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("merges ") and lines[-1].startswith("learned 16 merges")


def test_progress_redraws_one_line_on_a_terminal(tmp_path):
    import os
    import pty

    corpus = tmp_path / "c.txt"
    corpus.write_text(TEXT * 50, encoding="utf-8")
    leader, follower = pty.openpty()
    args = ["train", str(corpus), "--vocab-size", "290", "-o", str(tmp_path / "t.json")]
    with subprocess.Popen(
        [sys.executable, "-m", "bpe", *args], stderr=follower, stdout=subprocess.DEVNULL
    ) as child:
        os.close(follower)
        output = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:  # the child closed the terminal
                break
            if not chunk:
                break
            output += chunk
        assert child.wait(timeout=120) == 0
    os.close(leader)
    assert b"\rmerges " in output and b"\rlearned 16 merges" in output


def test_tiktoken_export_names_both_files_it_writes(tok_path, tmp_path):
    out = tmp_path / "tok"
    result = bpe_cli("export", "-t", str(tok_path), "--format", "tiktoken", "-o", str(out))
    assert result.returncode == 0, result.stderr
    assert f"{tmp_path / 'tok.tiktoken'} (the ranks)" in result.stderr
    assert f"{tmp_path / 'tok.tiktoken.json'} (split pattern" in result.stderr
    assert (tmp_path / "tok.tiktoken.json").exists()


def test_info_and_eval_write_numbers_as_train_does(tok_path, tmp_path):
    """Thousands separators everywhere a person reads a count, as `bpe train` prints them."""
    info = bpe_cli("info", "-t", str(tok_path)).stdout
    assert "vocab size: 268 (256 base, 11 merges, 1 special)" in info
    doc = tmp_path / "big.txt"
    doc.write_text(TEXT * 100, encoding="utf-8")
    figures = bpe_cli("eval", "-t", str(tok_path), str(doc)).stdout
    assert f"text: {len(TEXT) * 100:,} bytes, {len(TEXT) * 100:,} characters" in figures
    assert "4,300 bytes" in figures
