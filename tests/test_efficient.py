"""The efficient trainer returns exactly what the reference returns, and stays reachable.

Exactness is checked at two levels: the engine on weighted id sequences, and `bpe.train` in all
three modes (merges, pair counts and per-merge token totals), on hypothesis texts built to hit
the hard cases and on slices of the real corpora when they are present.
"""

from __future__ import annotations

import os
from array import array
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
import bpe.efficient
import bpe.pacing
import bpe.training
from bpe import chunk_counts
from bpe.chunk_counts import count_chunks
from bpe.efficient import train_efficient
from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN, compile_pattern
from bpe.reference import train_reference
from tests.strategies import HARD_PIECES, TEXTS

MODES = ["naive", "chunked", "words"]
REPO = Path(__file__).resolve().parent.parent
CORPORA_DIR = Path(os.environ.get("BPE_CORPORA_DIR", REPO / "corpora-data"))
CORPORA = ["english_small.txt", "english_large.txt", "chinese_modern.txt", "code.txt"]
SLICE_BYTES = 50_000

# Merges of at most this many positions take the plain loop, longer ones the bulk path: none,
# a mix (a list of 3 or fewer goes one way, longer ones the other), or nearly all of them.
SMALL_MERGES = [0, 3, 48]
# Long runs and alternations stress the overlap rules harder than TEXTS alone.
RUNS = st.lists(
    st.one_of(
        HARD_PIECES,
        st.sampled_from(["a", "b", " ", "中", "😀"]).flatmap(
            lambda piece: st.integers(2, 30).map(lambda n: piece * n)
        ),
        st.sampled_from(["ab", "aab", "aba", "中文"]).flatmap(
            lambda piece: st.integers(2, 12).map(lambda n: piece * n)
        ),
    ),
    max_size=20,
).map("".join)


def base_size(text: str, mode: str) -> int:
    """Ids before the first merge, plus `<unk>` in words mode."""
    return len(set("".join(text.split()))) + 2 if mode == "words" else 256


def assert_same_training(text: str, mode: str, merges: int, min_frequency: int = 1) -> None:
    settings_ = {"vocab_size": base_size(text, mode) + merges, "mode": mode}
    ref = bpe.train(text, trainer="reference", min_frequency=min_frequency, **settings_)
    eff = bpe.train(text, trainer="efficient", min_frequency=min_frequency, **settings_)
    assert eff.merges == ref.merges
    assert eff.training.merge_counts == ref.training.merge_counts
    assert eff.training.tokens_after == ref.training.tokens_after
    assert eff.training.initial_tokens == ref.training.initial_tokens


# ----- worked examples --------------------------------------------------------------------------
def test_overlapping_run_merges_left_to_right_like_the_reference():
    tok = bpe.train("aaabdaaabac", vocab_size=259, mode="naive", trainer="efficient")
    assert tok.merges == [(97, 97, 256), (97, 98, 257), (256, 257, 258)]
    assert tok.training.merge_counts == [4, 2, 2]
    assert tok.training.tokens_after == [9, 7, 5]


# Runs where a pair meets itself (docs/algorithms.md, "Efficient training"): the bookkeeping
# around each merged occurrence must not count a neighbour twice or miss one.
@pytest.mark.parametrize(
    "ids",
    [
        [1, 2, 1, 2],  # A B A B -> AB AB: the second merge sees the first as its left neighbour
        [0, 0, 0, 0],  # 0 0 0 0 -> 00 00, not 0 00 0
        [0, 0, 0],  # left to right: 00 0, as the reference's merge_pair cuts it, never 0 00
        [3, 0, 0, 0, 3, 0, 0],
        [1, 2, 1, 2, 1, 2, 1],
    ],
)
def test_overlapping_pair_special_cases(ids):
    kwargs = {"first_id": 10, "max_merges": 6}
    assert train_efficient([(ids, 1)], **kwargs) == train_reference([(ids, 1)], **kwargs)


def test_weights_and_barriers_between_sequences():
    # Glued together, [1, 2][2, 1, 2][1] would also hold (2, 2) and (2, 1) across the seams.
    sequences = [([1, 2], 1), ([2, 1, 2], 3), ([1], 5), ([], 2), ([2, 2, 2], 0)]
    got = train_efficient(sequences, first_id=10, max_merges=5)
    assert got == train_reference(sequences, first_id=10, max_merges=5)
    assert [tuple(r) for r in got] == [(1, 2, 10, 4, 12), (2, 10, 11, 3, 9)]


def test_a_sequences_positions_share_one_weight_object():
    # A corpus whose every chunk occurs often (1 GB of repeated corpora) has a weight above 256
    # on every position: one int object per position would cost 28 bytes each on top of the
    # list's 8 (docs/algorithms.md, "Efficient training", keeps a weight per position).
    sequences = [(b"abc", 1000), (b"de", 3000), (b"fgh", 1)]
    ordered, weights = bpe.efficient._order(sequences, lambda: None)
    assert ordered == [b"abc", b"de", b"fgh"]
    assert weights == [0, 1000, 1000, 1000, 1000, 3000, 3000, 3000]
    assert len({id(w) for w in weights[1:]}) == 2


# ----- properties ---------------------------------------------------------------------------------
@settings(max_examples=100, deadline=None)
@given(
    sequences=st.lists(
        st.tuples(st.lists(st.sampled_from([0, 1, 254, 255]), max_size=14), st.integers(0, 4)),
        max_size=6,
    ),
    max_merges=st.integers(0, 20),
    small=st.sampled_from(SMALL_MERGES),
)
def test_property_engine_on_bytes_equals_reference(sequences, max_merges, small):
    # Bytes take the fast layout unless a 0xFF (never in UTF-8) forces the general one.
    as_bytes = [(bytes(ids), weight) for ids, weight in sequences]
    kwargs = {"first_id": 256, "max_merges": max_merges}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bpe.efficient, "_SMALL", small)
        assert train_efficient(as_bytes, **kwargs) == train_reference(sequences, **kwargs)


@settings(max_examples=150, deadline=None)
@given(
    sequences=st.lists(
        st.tuples(st.lists(st.integers(0, 3), max_size=14), st.integers(0, 4)), max_size=6
    ),
    max_merges=st.integers(0, 20),
    min_frequency=st.integers(1, 4),
    in_array=st.booleans(),
    small=st.sampled_from(SMALL_MERGES),
    high_floor=st.sampled_from([None, (1, 2), (2, 8), (5, 8)]),
)
def test_property_engine_equals_reference_on_weighted_sequences(
    sequences, max_merges, min_frequency, in_array, small, high_floor
):
    kwargs = {"first_id": 4, "max_merges": max_merges, "min_frequency": min_frequency}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bpe.efficient, "_SMALL", small)
        if in_array:  # ids in an array, as a large corpus keeps them
            patch.setattr(bpe.efficient, "_ARRAY_FROM", 0)
        if high_floor:  # a floor grown with the corpus, made high here, falling step by step
            per_floor, step = high_floor
            patch.setattr(bpe.efficient, "_POSITIONS_PER_FLOOR", per_floor)
            patch.setattr(bpe.efficient, "_FLOOR_STEP", step)
            patch.setattr(bpe.efficient, "_FLOOR", 1)  # so it falls through small counts too
        assert train_efficient(sequences, **kwargs) == train_reference(sequences, **kwargs)


@settings(max_examples=120, deadline=None)
@given(
    text=st.one_of(TEXTS, RUNS),
    merges=st.integers(0, 40),
    mode=st.sampled_from(MODES),
    min_frequency=st.sampled_from([1, 1, 2, 3]),
    small=st.sampled_from(SMALL_MERGES),
)
def test_property_train_equals_reference_in_every_mode(text, merges, mode, min_frequency, small):
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(bpe.efficient, "_SMALL", small)
        assert_same_training(text, mode, merges, min_frequency)


def test_long_merges_walked_in_slices_match_the_reference(monkeypatch):
    text = "a" * 40_001 + " abababab" * 3_000  # (a, a) starts at 40,000 places
    assert_same_training(text, "naive", merges=6)
    monkeypatch.setattr(bpe.efficient, "_SLICE", 3)  # runs and `a b a b` across every cut
    assert_same_training("aaaaaaa abababa aaab " * 30, "naive", merges=20)


def test_compacting_stale_positions_changes_nothing(monkeypatch):
    monkeypatch.setattr(bpe.efficient, "_STORED_PER_POSITION", 0)  # compact whenever stale
    monkeypatch.setattr(bpe.efficient, "_SHORT", 0)
    text = "the cat sat on the mat, the rat ate the hat; " * 20 + "aaaaaaa bababab " * 10
    for mode in MODES:
        assert_same_training(text, mode, merges=60)


@pytest.mark.parametrize("step", [2, 8])
def test_a_floor_grown_with_the_corpus_falls_step_by_step_to_the_reference(monkeypatch, step):
    # A large corpus starts tracking only pairs of one count per _POSITIONS_PER_FLOOR positions
    # and lowers that floor as training reaches it; a lowered divisor makes these small texts
    # start far above their pairs' counts, so every merge past the first few comes after a
    # fall of the floor.
    monkeypatch.setattr(bpe.efficient, "_POSITIONS_PER_FLOOR", 4)
    monkeypatch.setattr(bpe.efficient, "_FLOOR_STEP", step)
    text = (
        "the cat sat on the mat, the rat ate the hat; " * 20 + "aaaaaaa bababab \u4e2d\u6587 " * 9
    )
    corpus = bpe.efficient._Corpus([(text.encode("utf-8"), 1)], 256 + 80, 1, lambda: None)
    assert corpus.floor > 4 * bpe.efficient._FLOOR  # the test is about a high floor
    for mode in MODES:
        for min_frequency in (1, 3):
            assert_same_training(text, mode, merges=80, min_frequency=min_frequency)
    weighted = [(b"abcabcab", 7), (b"bcbcbc", 2), (b"ca", 40)]
    kwargs = {"first_id": 256, "max_merges": 12}
    assert train_efficient(weighted, **kwargs) == train_reference(weighted, **kwargs)


@pytest.mark.parametrize(("first_id", "typecode"), [(256, "h"), (40_000, "i")])
def test_large_corpus_ids_in_an_array_train_like_the_reference(monkeypatch, first_id, typecode):
    # A large corpus keeps its ids in an array of 2 bytes (4 once ids pass 2**15) instead of a
    # list; a lowered threshold sends these small ones there, bytes and id sequences alike.
    monkeypatch.setattr(bpe.efficient, "_ARRAY_FROM", 0)
    text = "aaaaaaa abababa aaab the cat sat on the mat, " * 30 + "\u4e2d\u6587\u6587 " * 20
    byte_sequences = [(text.encode("utf-8"), 1), (b"the the cat", 3), (b"aaaa", 2)]
    id_sequences = [(list(ids), weight) for ids, weight in byte_sequences]
    for sequences in (byte_sequences, id_sequences):
        kwargs = {"first_id": first_id, "max_merges": 80}
        assert train_efficient(sequences, **kwargs) == train_reference(id_sequences, **kwargs)
        corpus = bpe.efficient._Corpus(sequences, first_id + 80, 1, lambda: None)
        assert isinstance(corpus.tok, array) and corpus.tok.typecode == typecode
    for mode in MODES:
        assert_same_training(text, mode, merges=60, min_frequency=2)


# ----- the real corpora ---------------------------------------------------------------------------
def corpus_slice(name: str) -> str:
    """SLICE_BYTES from the middle of a corpus, cut at character boundaries."""
    path = CORPORA_DIR / name
    if not path.exists():
        pytest.skip(f"{path} is missing: build the corpora with ../shared/corpora/make_corpora.sh")
    with path.open("rb") as f:
        f.seek(path.stat().st_size // 2)
        data = f.read(SLICE_BYTES + 8)
    start = 0
    while start < len(data) and data[start] & 0xC0 == 0x80:  # a continuation byte
        start += 1
    end = SLICE_BYTES
    while end < len(data) and data[end] & 0xC0 == 0x80:
        end += 1
    return data[start:end].decode("utf-8")


@pytest.mark.corpora
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", CORPORA)
def test_corpus_slice_equals_reference(name, mode):
    assert_same_training(corpus_slice(name), mode, merges=120)


# ----- behaviour ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "a", "ab", "abab", "中"])
@pytest.mark.parametrize("mode", MODES)
def test_tiny_corpus_stops_cleanly_when_no_pair_is_left(text, mode):
    tok = bpe.train(text, vocab_size=base_size(text, mode) + 1000, mode=mode, trainer="efficient")
    assert len(tok.merges) < 10
    assert_same_training(text, mode, 1000)


def test_cancel_before_the_first_merge():
    with pytest.raises(bpe.TrainingCancelled) as info:
        bpe.train("abcabc" * 10, vocab_size=300, trainer="efficient", should_stop=lambda: True)
    assert info.value.merges_done == 0


def test_zero_merges_ask_nothing_like_the_reference():
    kwargs = {"first_id": 3, "max_merges": 0, "should_stop": lambda: True}
    assert train_efficient([([1, 2], 1)], **kwargs) == train_reference([([1, 2], 1)], **kwargs)


def test_cancel_during_the_set_up(monkeypatch):
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)
    calls = iter(range(100))
    with pytest.raises(bpe.TrainingCancelled) as info:
        train_efficient(
            [(b"abcabc", 1)], first_id=256, max_merges=5, should_stop=lambda: next(calls) >= 1
        )
    assert info.value.merges_done == 0


@pytest.mark.parametrize("helper", [False, True])
def test_cancel_while_counting_chunks(monkeypatch, helper):
    monkeypatch.setattr(chunk_counts, "_BLOCK_CHARS", 64)
    if helper:
        monkeypatch.setattr(chunk_counts, "PARALLEL_MIN_CHARS", 10)
    text = "The cat sat.\nThen it ran!\n" * 200
    with pytest.raises(bpe.TrainingCancelled) as info:
        bpe.train(text, vocab_size=300, trainer="efficient", should_stop=lambda: True)
    assert info.value.merges_done == 0


def test_cancel_is_honoured_part_way(monkeypatch):
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)  # check at every opportunity
    seen: list[bpe.Progress] = []
    with pytest.raises(bpe.TrainingCancelled) as info:
        bpe.train(
            "the cat sat on the mat " * 50,
            vocab_size=300,
            mode="naive",
            trainer="efficient",
            progress=seen.append,
            should_stop=lambda: len({p.merges_done for p in seen if p.merges_done}) >= 3,
        )
    assert info.value.merges_done == 3


def test_progress_reports_set_up_before_the_first_merge(monkeypatch):
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)
    seen: list[bpe.Progress] = []
    text = "the cat sat on the mat " * 50
    tok = bpe.train(text, vocab_size=270, mode="naive", trainer="efficient", progress=seen.append)
    before = [p for p in seen if p.merges_done == 0]
    set_up = [p for p in before if p.merges_target]
    assert set_up, "set-up should report progress too"
    assert all(p.pair is None and p.total_tokens == tok.training.initial_tokens for p in set_up)
    # Until the trainer has counted the tokens, it reports all zero, as while splitting.
    assert all(p == bpe.Progress(0, 0, None, 0, 0) for p in before if not p.merges_target)
    assert seen.index(before[-1]) < min(i for i, p in enumerate(seen) if p.merges_done)


def test_progress_is_called_and_ends_with_the_final_state(monkeypatch):
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)
    seen: list[bpe.Progress] = []
    text = "the cat sat on the mat " * 50
    tok = bpe.train(text, vocab_size=270, mode="naive", trainer="efficient", progress=seen.append)
    done = [p.merges_done for p in seen]
    assert done == sorted(done) and done[-1] == len(tok.merges) == 14
    last = seen[-1]
    assert last.merges_target == 14
    assert last.pair == tok.merges[-1][:2]
    assert last.count == tok.training.merge_counts[-1]
    assert last.total_tokens == tok.training.tokens_after[-1]


def test_progress_without_monkeypatching_still_reports_the_end():
    seen: list[bpe.Progress] = []
    tok = bpe.train("abcabcabd", vocab_size=258, mode="naive", progress=seen.append)
    assert seen and seen[-1].merges_done == len(tok.merges) == 2


# ----- counting chunks fast ---------------------------------------------------------------------
def plain_chunk_counts(text: str, pattern: str) -> list[tuple[str, int]]:
    counts = Counter(m.group() for m in compile_pattern(pattern).finditer(text))
    return list(counts.items())


@settings(max_examples=80, deadline=None)
@given(text=st.one_of(TEXTS, RUNS), pattern=st.sampled_from([GPT4_PATTERN, GPT2_PATTERN]))
def test_property_chunk_counts_match_one_piece(text, pattern):
    text = text * 3
    assert list(count_chunks(text, pattern).items()) == plain_chunk_counts(text, pattern)
    # Tiny blocks, so the cuts land at every safe cut there is.
    in_blocks = chunk_counts._count_in_blocks(text, block_chars=1)
    assert list(in_blocks.items()) == plain_chunk_counts(text, GPT4_PATTERN)


def test_chunk_counts_with_a_helper_process_match_one_piece(monkeypatch):
    monkeypatch.setattr(chunk_counts, "PARALLEL_MIN_CHARS", 10)
    text = "The cat sat.\n  Then it ran!\n\n\nDone 12345 times\r\nEnd " * 50
    assert list(count_chunks(text, GPT4_PATTERN).items()) == plain_chunk_counts(text, GPT4_PATTERN)


@pytest.mark.corpora
@pytest.mark.parametrize("name", CORPORA)
def test_corpus_slice_chunk_counts_match_one_piece(name, monkeypatch):
    monkeypatch.setattr(chunk_counts, "PARALLEL_MIN_CHARS", 1000)
    monkeypatch.setattr(chunk_counts, "_BLOCK_CHARS", 4096)
    text = corpus_slice(name)
    assert list(count_chunks(text, GPT4_PATTERN).items()) == plain_chunk_counts(text, GPT4_PATTERN)


@settings(max_examples=300, deadline=None)
@given(text=st.text(st.sampled_from(list("ab é中'sS \n\t\r.,1-\u00a0\u3000")), max_size=60))
def test_property_every_safe_cut_keeps_the_gpt4_matches(text):
    # Dense in what the cuts rely on: letters next to spaces, contractions (`'s`), line feeds
    # before and after whitespace, non-ASCII spaces; a block per safe cut.
    in_blocks = chunk_counts._count_in_blocks(text, block_chars=1)
    assert list(in_blocks.items()) == plain_chunk_counts(text, GPT4_PATTERN)


@pytest.mark.parametrize("mode", ["chunked", "words"])
def test_progress_is_reported_while_the_text_is_split(monkeypatch, mode):
    # Small blocks stand in for a large corpus: splitting asks between blocks.
    monkeypatch.setattr(chunk_counts, "_BLOCK_CHARS", 64)
    monkeypatch.setattr(bpe.training, "_WORD_BLOCK_CHARS", 64)
    seen: list[bpe.Progress] = []
    text = "the cat sat on the mat\n" * 200
    bpe.train(text, vocab_size=300, mode=mode, trainer="efficient", progress=seen.append)
    splitting = [p for p in seen if p.merges_target == 0]
    assert splitting and all(p == bpe.Progress(0, 0, None, 0, 0) for p in splitting)
    first_real = min(i for i, p in enumerate(seen) if p.merges_target)
    assert all(i < first_real for i, p in enumerate(seen) if p.merges_target == 0)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=40).map(lambda b: b.replace(b"\xff", b"")))
def test_property_byte_pair_buckets_list_every_position_in_order(data):
    layout = b"\xff" + data + b"\xff"
    k = 257
    expected: dict[int, list[int]] = {}
    for p in range(len(layout) - 1):
        left, right = layout[p], layout[p + 1]
        if left != 0xFF and right != 0xFF:
            expected.setdefault(left * k + right, []).append(p)
    got = bpe.efficient._byte_pairs(layout, k, lambda: None)
    assert {key: list(where) for key, where in got.items()} == expected


def _gone(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")  # dead, waiting to be reaped


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux's /proc")
def test_the_chunk_count_helper_dies_with_its_parent():
    # A parent that starts the helper on a large text, and is then killed -9 (a web worker
    # killed mid-training). Once the helper has read the text (it asks for the signal before
    # reading), it is stopped (SIGSTOP), so it cannot end by itself however the pipes behave:
    # only the death signal its parent's death sends can end it.
    import signal
    import subprocess
    import sys
    import time

    script = (
        "import time, bpe.chunk_counts as c\n"
        "helper = c._Helper('The cat sat on the mat. ' * 800_000)\n"
        "helper.feeder.join()\n"
        "print(helper.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", script], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    helper = None
    try:
        assert parent.stdout is not None
        helper = int(parent.stdout.readline())  # the text is in its pipe: it asked already
        os.kill(helper, signal.SIGSTOP)
        parent.kill()
        parent.wait()
        for _ in range(300):  # up to 30 s, generous for a loaded machine
            if _gone(helper):
                break
            time.sleep(0.1)
        assert _gone(helper), "the helper outlived its parent"
    finally:
        parent.kill()
        parent.wait()
        if helper is not None and not _gone(helper):
            os.kill(helper, signal.SIGKILL)


@settings(max_examples=200, deadline=None)
@given(
    sequences=st.lists(st.lists(st.integers(0, 4), max_size=10), max_size=6),
    merges=st.integers(0, 8),
)
def test_property_live_pairs_are_every_live_pair_in_order(sequences, merges):
    # A state part way through training: merged tokens leave dead positions and end marks.
    def tick() -> None:
        pass

    corpus = bpe.efficient._Corpus([(ids, 1) for ids in sequences], 5 + merges, 1, tick)
    for new_id in range(5, 5 + merges):
        best = corpus.pop_best()
        if best is None:
            break
        corpus.merge(best[0], best[1], new_id, tick)
    tok, length, k = corpus.tok, corpus.length, corpus.k
    expected: dict[int, list[int]] = {}
    for p in range(len(tok) - 1):
        if tok[p] >= 0 and tok[p + length[tok[p]]] >= 0:  # a token, and one after it
            expected.setdefault(tok[p] * k + tok[p + length[tok[p]]], []).append(p)
    got = bpe.efficient._live_pairs(tok, length, k, tick)
    assert {key: list(where) for key, where in got.items()} == expected
