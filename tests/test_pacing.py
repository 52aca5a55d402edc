"""Training stays interruptible in every phase: splitting, set-up, merges and tear-down.

The bar itself (no gap over 100 ms between two stop checks on the large corpora) is measured by
benchmarks/stop_latency.py, not here: a shared machine makes timed assertions flaky. These tests
check the structure that bar rests on. With slices forced down to one item each, and a check due
at every tick, the number of stop checks a phase makes grows with the size of the work it does,
which it cannot if that phase does its work in one unsliced step; and a stop answered at any
one of those checks cancels the whole training.
"""

from __future__ import annotations

import gc
import sys
import threading
from array import array
from collections import Counter
from itertools import product

import pytest

import bpe
import bpe.efficient
import bpe.pacing
from bpe import chunk_counts
from bpe.pacing import collector_paused, release, slices
from bpe.patterns import GPT4_PATTERN, compile_pattern
from bpe.reference import train_reference

# 512 distinct words, each twice, 16 to a line (~4 KB): chunked and words mode keep one sequence
# per distinct chunk or word, so every mode has thousands of items of work in each phase.
DISTINCT = ["".join(letters) for letters in product("abcdefgh", repeat=3)]
LINES = [" ".join(DISTINCT[i : i + 16]) for i in range(0, len(DISTINCT), 16)]
TEXT = "\n".join(LINES * 2) + "\n"

# Functions that do the slow steps, outermost first, and the phase each belongs to. A check is
# put down to the innermost of them on the stack at the moment it is asked.
PHASES = {
    "_utf8": "encode the text",
    "_count_in_blocks": "count chunks",
    "chunk_sequences": "chunks to sequences",
    "word_sequences": "words to sequences",
    "_order": "order the sequences",
    "_id_layout": "lay out the ids",
    "_byte_layout": "lay out the bytes",
    "_byte_pairs": "bucket the pairs",
    "_live_pairs": "bucket the pairs",
    "_tear_down": "tear down the trainer",
    "_weighed": "weigh the sequences",
}
CHUNKS = chunk_counts.count_chunks(TEXT, GPT4_PATTERN)
# Bytes and a barrier for each chunk that holds a pair (lone bytes are left out).
CHUNK_LAYOUT = sum(len(chunk.encode()) + 1 for chunk in CHUNKS if len(chunk.encode()) > 1)
WORD_LAYOUT = sum(len(word) + 2 for word in DISTINCT)  # characters, `</w>` and a barrier
# How many checks each phase must at least make on TEXT, by mode, with one-item slices: one per
# item of each of its slow steps (the trainer's tear-down empties the token list at least, one
# slot per position of the layout).
EXPECTED = {
    "naive": {
        "encode the text": len(TEXT),
        "lay out the bytes": len(TEXT),  # one sequence, copied a byte at a time here
        "bucket the pairs": len(TEXT),
        "tear down the trainer": len(TEXT),
    },
    "chunked": {
        "count chunks": len(TEXT.split()),  # a block per safe cut: one before each space
        "chunks to sequences": 2 * len(CHUNKS),  # each encoded, then its string freed
        "bucket the pairs": CHUNK_LAYOUT,
        "tear down the trainer": CHUNK_LAYOUT,
        "weigh the sequences": len(CHUNKS),
        "free the sequences": len(CHUNKS),
    },
    "words": {
        # counted a word at a time, then each distinct word's characters, ids and freeing
        "words to sequences": len(TEXT.split()) + 3 * len(DISTINCT),
        "bucket the pairs": WORD_LAYOUT,
        "tear down the trainer": WORD_LAYOUT,
        "weigh the sequences": len(DISTINCT),
        "free the sequences": len(DISTINCT),
    },
}


@pytest.fixture
def one_item_slices(monkeypatch):
    """Every slice one item long and a check due at every tick."""
    monkeypatch.setattr(bpe.pacing, "_FIRST_SLICE", 1)
    monkeypatch.setattr(bpe.pacing, "_SMALLEST_SLICE", 1)
    monkeypatch.setattr(bpe.pacing, "_SLICE_SECONDS", 0.0)
    monkeypatch.setattr(bpe.pacing, "_REPORT_EVERY", 0.0)
    monkeypatch.setattr(bpe.efficient, "_COPY_BYTES", 1)


def phase_now() -> str:
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_name
        if name == "release" and frame.f_back and frame.f_back.f_code.co_name == "_train":
            return "free the sequences"
        phase = PHASES.get(name)
        if phase is not None:
            return phase
        frame = frame.f_back
    return "other"


def vocab_for(mode: str) -> int:
    return (len(set("".join(TEXT.split()))) + 2 if mode == "words" else 256) + 40


@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
def test_every_slow_phase_asks_the_stop_check_as_often_as_its_work_grows(one_item_slices, mode):
    asked: Counter[str] = Counter()

    def should_stop() -> bool:
        asked[phase_now()] += 1
        return False

    bpe.train(TEXT, vocab_size=vocab_for(mode), mode=mode, should_stop=should_stop)
    for phase, least in EXPECTED[mode].items():
        assert asked[phase] >= least, (phase, dict(asked))


@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
def test_progress_is_reported_through_every_phase_too(one_item_slices, mode):
    reported: Counter[str] = Counter()

    def progress(_: bpe.Progress) -> None:
        reported[phase_now()] += 1

    bpe.train(TEXT, vocab_size=vocab_for(mode), mode=mode, progress=progress)
    for phase, least in EXPECTED[mode].items():
        assert reported[phase] >= least, (phase, dict(reported))


@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
def test_a_stop_at_any_check_cancels_the_training(one_item_slices, mode):
    calls = 0

    def count() -> bool:
        nonlocal calls
        calls += 1
        return False

    bpe.train(TEXT, vocab_size=vocab_for(mode), mode=mode, should_stop=count)
    total = calls
    assert total > 1000
    # Every check would take too long on a 2 KB text: 60 spread over the run, and the last.
    for n in sorted({*range(1, total + 1, total // 60), total}):
        asked = 0

        def stop_at_n() -> bool:
            nonlocal asked
            asked += 1
            return asked >= n  # noqa: B023 - each run uses its own n

        with pytest.raises(bpe.TrainingCancelled):
            bpe.train(TEXT, vocab_size=vocab_for(mode), mode=mode, should_stop=stop_at_n)
        assert asked == n, "the training went on after a stop was asked for"


def test_the_chunk_counter_helper_process_is_waited_for_with_checks(one_item_slices, monkeypatch):
    monkeypatch.setattr(chunk_counts, "PARALLEL_MIN_CHARS", 100)
    seen = Counter()

    def should_stop() -> bool:
        seen[phase_now()] += 1
        return False

    text = TEXT * 10
    counts = chunk_counts.count_chunks(text, GPT4_PATTERN, should_stop=should_stop)
    assert list(counts.items()) == list(
        Counter(compile_pattern(GPT4_PATTERN).findall(text)).items()
    )
    assert seen["count chunks"] >= 200  # this process's half, a safe cut at a time


def test_a_byte_layout_copied_in_pieces_still_finds_a_0xff_inside_a_sequence(one_item_slices):
    sequences = [(b"ab\xffab", 2), (b"abab\xffb", 1)]  # not UTF-8: laid out as ids instead
    assert bpe.efficient._byte_layout([ids for ids, _ in sequences], lambda: None) is None
    kwargs = {"first_id": 256, "max_merges": 3}
    assert bpe.efficient.train_efficient(sequences, **kwargs) == train_reference(
        sequences, **kwargs
    )


# ----- the pieces ---------------------------------------------------------------------------
def test_slices_cover_the_range_and_tick_after_each(one_item_slices):
    ticks = []
    got = []
    for start, stop in slices(10, lambda: ticks.append(len(got))):
        got.append((start, stop))
    assert got == [(i, i + 1) for i in range(10)]
    assert ticks == list(range(1, 11))  # after each slice's work, none before the first


def test_slices_end_only_where_cut_allows_and_at_most_most_items():
    text = "ab cdef g hijklmno p"

    def at_space(at: int) -> int:
        found = text.find(" ", at)
        return len(text) if found < 0 else found

    got = list(slices(len(text), lambda: None, most=3, cut=at_space))
    assert "".join(text[a:b] for a, b in got) == text
    assert all(b == len(text) or text[b] == " " for _, b in got)


@pytest.mark.parametrize(
    "items",
    [list(range(1000)), {i: str(i) for i in range(1000)}, array("i", range(1000))],
    ids=["list", "dict", "array"],
)
def test_release_empties_a_container_checking_between_slices(one_item_slices, items):
    ticks = []
    release(items, lambda: ticks.append(len(items)))
    assert len(items) == 0
    assert ticks == list(range(999, -1, -1))  # one item freed per slice


def test_the_collector_is_paused_while_training_and_restored_after():
    seen = []
    assert gc.isenabled()
    bpe.train(TEXT, vocab_size=300, mode="naive", should_stop=lambda: seen.append(gc.isenabled()))
    assert seen and not any(seen)
    assert gc.isenabled()
    with pytest.raises(bpe.TrainingCancelled):
        bpe.train(TEXT, vocab_size=300, mode="naive", should_stop=lambda: True)
    assert gc.isenabled()


def test_the_collector_is_paused_until_the_last_of_two_threads_ends():
    first_in, second_done = threading.Event(), threading.Event()
    states = []

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_done.wait(30)
            states.append(gc.isenabled())  # the other training ended: still paused for this one

    thread = threading.Thread(target=first)
    thread.start()
    try:
        assert first_in.wait(30)
        with collector_paused():
            assert not gc.isenabled()
        second_done.set()
    finally:
        second_done.set()
        thread.join(30)
    assert states == [False]
    assert gc.isenabled()


def test_a_collector_disabled_before_training_stays_disabled():
    gc.disable()
    try:
        bpe.train(TEXT, vocab_size=300, mode="naive")
        assert not gc.isenabled()
    finally:
        gc.enable()
