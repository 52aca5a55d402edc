"""Sharded counting (`bpe.shards`): the shards' counts summed are the unsharded count, in the
same first-seen order, so sharded training learns the same merges, in-process and on the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe.training
from bpe import cli, shards, train, train_files
from bpe.chunk_counts import count_chunks
from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN
from bpe.shards import ShardRule, count_shards, cut_text, stream_shards
from bpe.training_types import TrainingCancelled
from tests.strategies import TEXTS

CORPORA = sorted(Path(__file__).resolve().parent.parent.joinpath("corpora-data").glob("*.txt"))
CUSTOM = r"\d+|[^\d\s]+|\s"  # a pattern with no argued cut rule: never cut
RULES = {
    "gpt4": ShardRule("chunked", GPT4_PATTERN),
    "gpt2": ShardRule("chunked", GPT2_PATTERN),
    "custom": ShardRule("chunked", CUSTOM),
    "words": ShardRule("words"),
}
SLICE = 60_000  # characters of each corpus: enough for every kind of seam, fast


def unsharded(text: str, rule: ShardRule) -> list[tuple[str, int]]:
    """What training counts today, in its order (empty chunks, which it skips, left out)."""
    counts = Counter(text.split()) if rule.mode == "words" else count_chunks(text, rule.pattern)
    counts.pop("", None)
    return list(counts.items())


def corpus_slice(path: Path) -> str:
    return path.read_text(encoding="utf-8-sig")[:SLICE]


def present_corpora() -> list[Path]:
    """The corpora in corpora-data/, or skip: a fresh clone has none until they are built."""
    if not CORPORA:
        pytest.skip("corpora-data/ is empty: build it with ../shared/corpora (.ci/run does)")
    return CORPORA


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES)
@pytest.mark.parametrize("path", CORPORA, ids=[p.stem for p in CORPORA])
def test_shards_of_every_corpus_sum_to_the_unsharded_count(path, rule):
    text = corpus_slice(path)
    pieces = cut_text(text, rule, shard_chars=500)
    assert "".join(pieces) == text
    if rule.safe_cut is not None:
        assert len(pieces) > 20  # the seams are really there
    assert list(count_shards(pieces, rule, jobs=1).items()) == unsharded(text, rule)


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES)
@settings(max_examples=150, deadline=None)
@given(text=TEXTS)
def test_a_cut_at_any_place_the_rule_allows_keeps_the_count(rule, text):
    # shard_chars from 1 to the length: the first allowed cut after every position is tried.
    want = unsharded(text, rule)
    for size in range(1, len(text) + 1):
        pieces = cut_text(text, rule, shard_chars=size)
        assert "".join(pieces) == text
        assert list(count_shards(pieces, rule, jobs=1).items()) == want


@pytest.mark.parametrize("rule", RULES.values(), ids=RULES)
@settings(max_examples=150, deadline=None)
@given(text=TEXTS, size=st.integers(1, 12), split=st.integers(0, 40))
def test_a_text_is_cut_where_a_stream_of_it_is(rule, text, size, split):
    """cut_text walks offsets into the text, a stream (`_cuts`) its buffer of the blocks read
    so far: the same shards, wherever the blocks end."""
    blocks = iter([text[:split], text[split:]])
    assert cut_text(text, rule, shard_chars=size) == list(shards._cuts(blocks, rule, size))


def test_a_pattern_without_a_rule_is_never_cut():
    text = "ab 12 " * 1000
    assert cut_text(text, RULES["custom"], shard_chars=10) == [text]


@pytest.mark.parametrize("rule", [RULES["gpt4"], RULES["words"]], ids=["gpt4", "words"])
def test_a_pool_of_two_counts_the_same_as_one_process(rule):
    text = corpus_slice(present_corpora()[0])
    pieces = cut_text(text, rule, shard_chars=2_000)
    assert list(count_shards(pieces, rule, jobs=2).items()) == unsharded(text, rule)


@pytest.mark.parametrize("rule", [RULES["gpt4"], RULES["words"]], ids=["gpt4", "words"])
def test_pre_tokens_holding_the_workers_join_character_are_counted_the_same(rule):
    # Workers answer with their shard's pre-tokens joined by NUL, or a dict when one holds it:
    # shards with and without one, and a NUL alone, inside a word and between two.
    text = corpus_slice(present_corpora()[0])[:20_000]
    text += " a\0b \0 c\0\0d x\0" + text[:5_000] + " \0end"
    pieces = cut_text(text, rule, shard_chars=2_000)
    assert any("\0" in piece for piece in pieces) and any("\0" not in p for p in pieces)
    assert list(count_shards(pieces, rule, jobs=2).items()) == unsharded(text, rule)


@pytest.mark.parametrize(
    ("mode", "pattern"), [("chunked", "gpt4"), ("chunked", "gpt2"), ("words", "")]
)
def test_sharded_training_learns_the_same_merges(monkeypatch, mode, pattern):
    monkeypatch.setattr(shards, "SHARD_CHARS", 1_000)
    text = "".join(corpus_slice(p)[:15_000] for p in present_corpora())
    options = {"vocab_size": 300 if mode == "chunked" else 2_000, "mode": mode}
    if pattern:
        options["pattern"] = pattern
    one = train(text, **options)
    two = train(text, jobs=2, **options)
    assert two.merges == one.merges and two.alphabet == one.alphabet
    assert two.training.merge_counts == one.training.merge_counts


@pytest.mark.parametrize("mode", ["chunked", "words"])
def test_a_text_under_half_a_shard_is_counted_in_one_process_whatever_jobs_asks(monkeypatch, mode):
    def no_pool(*args, **kwargs):
        raise AssertionError("a pool for a text under shards.pool_min_chars()")

    monkeypatch.setattr(shards, "SHARD_CHARS", 20_000)
    monkeypatch.setattr(bpe.training, "count_shards", no_pool)
    text = "word " * 1_999  # 9,995 characters, under 10,000
    assert (
        train(text, vocab_size=300, mode=mode, jobs=2).merges
        == train(text, vocab_size=300, mode=mode).merges
    )


@pytest.mark.parametrize("mode", ["chunked", "words"])
def test_a_text_shorter_than_a_shard_per_process_is_cut_in_even_shards(monkeypatch, mode):
    """Each process gets one shard of about the same size, not SHARD_CHARS and the rest."""
    monkeypatch.setattr(shards, "SHARD_CHARS", 8_000)
    sizes: list[list[int]] = []
    real = bpe.training.count_shards

    def noting(pieces, rule, **options):
        pieces = list(pieces)
        sizes.append([len(piece) for piece in pieces])
        return real(pieces, rule, **options)

    monkeypatch.setattr(bpe.training, "count_shards", noting)
    text = "word " * 2_000  # 10,000 characters: 8,000 + 2,000 with SHARD_CHARS alone
    assert (
        train(text, vocab_size=300, mode=mode, jobs=2).merges
        == train(text, vocab_size=300, mode=mode).merges
    )
    (cut,) = sizes
    assert len(cut) == 2 and abs(cut[0] - cut[1]) <= 10, cut


@pytest.mark.parametrize(("mode", "pattern"), [("chunked", "gpt4"), ("words", "")])
def test_a_shard_counter_of_the_callers_counts_the_shards_and_learns_the_same(mode, pattern):
    """`train(shard_counter=...)`: the caller cuts and counts (here backwards, as workers that
    finish in any order would) and adds up in shard order; the merges are unsharded training's."""
    text = "".join(corpus_slice(p)[:15_000] for p in present_corpora())
    options = {"vocab_size": 300 if mode == "chunked" else 2_000, "mode": mode}
    if pattern:
        options["pattern"] = pattern
    seen = []

    def counter(text, rule, should_stop, advanced):
        pieces = cut_text(text, rule, shard_chars=2_000)
        counted = {i: rule.count(pieces[i]) for i in reversed(range(len(pieces)))}
        seen.append(len(pieces))
        advanced(len(text))
        return shards.add_counts(counted[i] for i in range(len(pieces)))

    one = train(text, **options)
    other = train(text, shard_counter=counter, **options)
    assert seen and seen[0] > 10  # it was asked, and the text was cut
    assert other.merges == one.merges and other.alphabet == one.alphabet
    assert other.training.merge_counts == one.training.merge_counts


def test_streamed_files_are_cut_across_blocks_and_files(monkeypatch, tmp_path):
    # Tiny blocks split multi-byte characters; each file may start with a byte-order mark.
    monkeypatch.setattr(shards, "READ_BYTES", 7)
    texts = [corpus_slice(p)[:3_000] for p in present_corpora()]
    paths = []
    for i, text in enumerate(texts):
        paths.append(tmp_path / f"{i}.txt")
        paths[-1].write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    rule = RULES["gpt4"]
    pieces = list(stream_shards(paths, rule, shard_chars=300))
    assert "".join(pieces) == "".join(texts)
    assert list(count_shards(pieces, rule, jobs=1).items()) == unsharded("".join(texts), rule)


def test_stop_check_cancels_and_progress_counts_shards():
    text = corpus_slice(present_corpora()[0])
    rule = RULES["gpt4"]
    pieces = cut_text(text, rule, shard_chars=1_000)
    seen: list[tuple[int, int | None]] = []
    count_shards(pieces, rule, jobs=2, total=len(pieces), progress=lambda *p: seen.append(p))
    assert seen[0] == (1, len(pieces)) and seen[-1] == (len(pieces), len(pieces))
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 3

    with pytest.raises(TrainingCancelled):
        count_shards(pieces, rule, jobs=2, should_stop=stop)
    assert len(asked) == 4


def test_train_files_refuses_naive_mode(tmp_path):
    (tmp_path / "a.txt").write_text("abc")
    with pytest.raises(ValueError, match="whole text as one sequence"):
        train_files([tmp_path / "a.txt"], vocab_size=300, mode="naive")


@pytest.mark.parametrize(
    ("mode", "pattern"),
    [("chunked", "gpt4"), ("chunked", "gpt2"), ("chunked", CUSTOM), ("words", "")],
)
def test_cli_jobs_2_writes_the_merges_of_jobs_1(monkeypatch, tmp_path, mode, pattern):
    monkeypatch.setattr(shards, "SHARD_CHARS", 700)
    monkeypatch.setattr(shards, "READ_BYTES", 1_000)
    corpus = tmp_path / "corpus.txt"
    text = "".join(corpus_slice(p)[:10_000] for p in present_corpora())
    corpus.write_text(text, encoding="utf-8")
    saved = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"{jobs}.json"
        args = ["train", str(corpus), "--vocab-size", "2000", "--mode", mode, "-q"]
        args += ["--pattern", pattern] if pattern else []
        assert cli.main([*args, "--jobs", jobs, "-o", str(out)]) == 0
        saved[jobs] = json.loads(out.read_text())
    for key in ("merges", "alphabet", "special_tokens", "pattern"):
        assert saved["2"].get(key) == saved["1"].get(key)


def test_cli_refuses_jobs_for_naive_mode(tmp_path, capsys):
    (tmp_path / "a.txt").write_text("abc")
    args = ["train", str(tmp_path / "a.txt"), "--vocab-size", "300", "--mode", "naive"]
    assert cli.main([*args, "--jobs", "2", "-o", str(tmp_path / "o.json")]) != 0
    assert "naive mode trains on the whole text as one sequence" in capsys.readouterr().err


def test_cli_jobs_2_names_a_bad_byte_where_jobs_1_does(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(shards, "READ_BYTES", 4)  # the first block ends inside the é
    bad = tmp_path / "bad.txt"
    bad.write_bytes("abcé".encode() + b"\xff tail")
    errors = []
    for jobs in ("1", "2"):
        args = ["train", str(bad), "--vocab-size", "300", "--jobs", jobs]
        assert cli.main([*args, "-o", str(tmp_path / "o.json")]) != 0
        errors.append(capsys.readouterr().err)
    assert errors[1] == errors[0] == f"bpe: {bad} is not UTF-8 (first bad byte at offset 5)\n"


COUNT_FOREVER = """
import itertools
from bpe.patterns import GPT2_PATTERN
from bpe.shards import ShardRule, count_shards
print("started", flush=True)
# Shards that take seconds each: a worker left behind would still be counting one.
count_shards(itertools.repeat("wörd, " * 2_000_000), ShardRule("chunked", GPT2_PATTERN), jobs=2)
"""


def _running(pid: str) -> bool:
    """Neither gone nor a zombie (dead, waiting for init to reap it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def test_the_pool_dies_with_the_process_that_started_it():
    proc = subprocess.Popen(
        [sys.executable, "-c", COUNT_FOREVER],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline() == b"started\n"
        children_file = Path(f"/proc/{proc.pid}/task/{proc.pid}/children")
        deadline = time.monotonic() + 30
        while len(workers := children_file.read_text().split()) < 2:
            assert time.monotonic() < deadline, "the pool never started"
            time.sleep(0.05)
        time.sleep(0.5)  # both workers counting
    finally:
        proc.kill()
        proc.wait()
    deadline = time.monotonic() + 0.5  # far less than a shard's count
    while alive := [pid for pid in workers if _running(pid)]:
        assert time.monotonic() < deadline, f"workers {alive} outlived their parent"
        time.sleep(0.05)
