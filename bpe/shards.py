"""Counting a corpus's pre-tokens as a map over shards and a sum, in any number of processes.

Training in `chunked` and `words` mode needs the corpus only through the counts of its distinct
pre-tokens (the split pattern's chunks, or whitespace-separated words). So a text, or a stream
of files read a block at a time, is cut into shards where no pre-token can straddle the cut
(`ShardRule`), each shard is counted on its own (in a pool of `jobs` processes), and the counts
are added up in shard order: the sum is the unsharded count, in the same first-seen order, so
training on it learns the same merges. Why each cut is safe is argued in docs/algorithms.md
("Sharded counting"); a pattern with no argued rule is never cut (one shard), which is equal by
construction.
"""

from __future__ import annotations

import codecs
import multiprocessing
import os
import re
import sys
from array import array
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import add
from pathlib import Path
from typing import Any

import regex

from bpe.chunk_counts import GPT4_SAFE_CUT, count_chunks, die_with_parent
from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN
from bpe.training_types import StopFn, TrainingCancelled

# A shard is cut at the first safe place after this many characters. The sum is the one serial
# step (loading each shard's distinct chunks and adding them): on the 57 MB corpus 1 MB shards
# gave 881,114 entries to add (0.8 s of 3.7 s, then), 4 MB ones 525,150 (0.45 s).
SHARD_CHARS = 1 << 22
READ_BYTES = 1 << 20  # files are read this much at a time
_WAIT_STEP = 0.02  # seconds between stop checks while waiting for a shard's count
# Where each pattern may be cut (the match's end is the cut), docs/algorithms.md says why.
_GPT2_SAFE_CUT = regex.compile(r"(?<=\p{L})(?=\P{L})")  # a letter, then anything else
# Before whitespace: the standard `re` module's \s is exactly str.isspace, what str.split cuts at.
_WORDS_SAFE_CUT = re.compile(r"(?=\s)")
# fork where there is one: spawn and forkserver re-run the caller's main module in each worker,
# so a script calling `train(..., jobs=2)` without an `if __name__ == "__main__"` guard would
# start workers without end. The workers only count strings, taking no lock a fork could copy.
_START_METHOD = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
ShardProgressFn = Callable[[int, "int | None"], None]  # (shards counted, total or None)
# A pool worker answers with its shard's pre-tokens joined by this character and their counts in
# an array, unless a pre-token holds it (then a dict): loading the two in the one process that
# adds everything up costs less than loading a pickled dict (english_large, 4 MB shards, in one
# process under load: 0.20 against 0.33 s, the sum included), and making them a third of
# pickling the dict (0.05 against 0.14 s).
_JOIN = "\0"
_Answer = tuple[str, "array[int]"] | dict[str, int]
# Counts a text's pre-tokens somewhere else (`bpe.train(shard_counter=...)`): given the text,
# the rule, the stop check and a callback for the characters counted so far, it cuts the text
# (`cut_text`), counts the shards wherever it likes and returns their counts added up in shard
# order (`add_counts`).
ShardCounter = Callable[[str, "ShardRule", "StopFn | None", Callable[[int], None]], Counter[str]]


@dataclass(frozen=True)
class ShardRule:
    """What is counted (`chunked` with a pattern, or `words`) and where text may be cut."""

    mode: str  # "chunked" or "words"
    pattern: str | None = None  # the split regex, chunked mode only

    @property
    def safe_cut(self) -> re.Pattern[str] | regex.Pattern[str] | None:
        """Zero or more places to cut, as a regex whose match ends are safe cuts; None: never
        cut (any pattern we hold no argument for)."""
        if self.mode == "words":
            return _WORDS_SAFE_CUT
        if self.pattern == GPT4_PATTERN:
            return GPT4_SAFE_CUT
        if self.pattern == GPT2_PATTERN:
            return _GPT2_SAFE_CUT
        return None

    def count(self, text: str) -> Counter[str]:
        """The pre-tokens of one shard, counted in first-seen order (empty chunks left out:
        training skips them)."""
        if self.mode == "words":
            return Counter(text.split())
        counts = count_chunks(text, self.pattern or "")
        counts.pop("", None)
        return counts


def rule_for(mode: str, pattern: str | None) -> ShardRule:
    """The rule for a training mode; naive mode is one sequence of the whole text, never cut."""
    if mode == "words":
        return ShardRule("words")
    if mode == "chunked":
        return ShardRule("chunked", pattern)
    if mode == "naive":
        raise ValueError(
            "naive mode trains on the whole text as one sequence, so it cannot be streamed"
            " or sharded: read the text and call train(), or train in chunked or words mode"
        )
    raise ValueError(f"{mode} mode cannot be counted in shards: only chunked and words mode can")


def cut_text(text: str, rule: ShardRule, *, shard_chars: int | None = None) -> list[str]:
    """text cut into shards of about shard_chars (SHARD_CHARS if None) at the rule's safe cuts;
    joined, they are the text.

    >>> cut_text("one two three", ShardRule("words"), shard_chars=4)
    ['one two', ' three']

    The text is `_cuts`' one block, cut by offsets, so the shards are its only copies.
    """
    return list(_cuts(iter([text]), rule, shard_chars or SHARD_CHARS))


def pool_min_chars() -> int:
    """A text in memory shorter than this many characters is counted in one process whatever
    `jobs` asks (`bpe.train`; streamed files are always sharded): the pool forks, sends each
    shard out and takes its distinct pre-tokens back to add up, which on 4 MB of Chinese
    (1.4M characters, whose chunks are mostly distinct sentences, so the answer is nearly the
    text again) cost more than the 0.13 s that counting it in one process takes: training it
    with jobs=2 took 4.84 s against 4.45 s (BENCHMARKS.md, "Training within 1.3x of rustbpe").
    Half a shard, so that a test shrinking SHARD_CHARS shrinks this too."""
    return SHARD_CHARS // 2


def balanced_shard_chars(length: int, jobs: int | None) -> int:
    """The shard size for a text of `length` characters held in memory and counted by `jobs`
    processes (every core if None): SHARD_CHARS, or less, so that a text shorter than jobs x
    SHARD_CHARS still gives each process one shard of about the same size. With SHARD_CHARS
    alone, english_small (6.5 MB) in two processes was a 4 MB and a 2.5 MB shard, and the
    count waited on the larger one.

    >>> balanced_shard_chars(6_500_000, 2), balanced_shard_chars(60_000_000, 2) == SHARD_CHARS
    (3250000, True)
    """
    workers = (os.cpu_count() or 1) if jobs is None else max(jobs, 1)
    return max(1, min(SHARD_CHARS, -(-length // workers)))


def stream_shards(
    paths: Sequence[str | Path],
    rule: ShardRule,
    *,
    shard_chars: int | None = None,
    read_bytes: int | None = None,
) -> Iterator[str]:
    """The files, one text after another (each UTF-8, a leading byte-order mark dropped, as
    `bpe train` reads them; '-' is stdin), cut into shards without ever holding more than a
    shard and a block (unless the rule finds no cut: then the text waits for the next one)."""
    return _cuts(_blocks(paths, read_bytes or READ_BYTES), rule, shard_chars or SHARD_CHARS)


def _blocks(paths: Sequence[str | Path], read_bytes: int) -> Iterator[str]:
    for path in paths:
        decoder = codecs.getincrementaldecoder("utf-8-sig")()
        offset = 0
        with _open(path) as stream:
            while True:
                raw = stream.read(read_bytes)
                held = len(decoder.getstate()[0])  # bytes of a character the last block cut
                try:
                    text = decoder.decode(raw, final=not raw)
                except UnicodeDecodeError as exc:
                    at = offset - held + exc.start
                    raise ValueError(
                        f"{path} is not UTF-8 (first bad byte at offset {at})"
                    ) from None
                yield text
                offset += len(raw)
                if not raw:
                    break


def _open(path: str | Path) -> Any:
    if str(path) == "-":
        return open(sys.stdin.fileno(), "rb", closefd=False)
    return open(path, "rb")


def _cuts(blocks: Iterator[str], rule: ShardRule, shard_chars: int) -> Iterator[str]:
    """Texts given in blocks, cut at the rule's first safe cut after shard_chars."""
    safe = rule.safe_cut
    buffer, searched = "", shard_chars  # searched: where the next search may start, at most
    for block in blocks:
        buffer += block
        # Cut by offsets into the buffer and drop what was cut once per block: keeping the
        # rest as a new string after each cut copied the 57 MB corpus, one block, 14 times
        # over (0.6 s). Searching the buffer from start + shard_chars sees what searching the
        # rest alone would: every rule looks one character behind the cut at most.
        start = 0
        while safe is not None and len(buffer) - start > shard_chars:
            # Every rule looks at the character after the cut, so a cut is never the buffer's
            # end, and one found stays safe whatever the next block holds.
            found = safe.search(buffer, max(start + shard_chars, searched - 1))
            if found is None or found.end() <= start:
                searched = len(buffer)
                break
            yield buffer[start : found.end()]
            start = found.end()
            searched = start + shard_chars
        buffer, searched = buffer[start:], searched - start
    if buffer:
        yield buffer


def count_shards(
    shards: Iterable[str],
    rule: ShardRule,
    *,
    jobs: int | None = None,
    total: int | None = None,
    should_stop: StopFn | None = None,
    progress: ShardProgressFn | None = None,
) -> Counter[str]:
    """The pre-tokens of every shard, counted by `jobs` processes (the machine's cores if
    None) and added up in shard order, so the sum is in the unsharded first-seen order.

    should_stop is asked between shards and while waiting (TrainingCancelled(0), the pool
    ended); progress gets (shards counted, total), total None while a stream is unfinished.
    At most 2 x jobs shards are in flight, so a stream is never held whole.
    """
    workers = (os.cpu_count() or 1) if jobs is None else jobs
    if workers < 1:
        raise ValueError("jobs must be at least 1 (or None for every core)")
    counts: Counter[str] = Counter()
    done = 0

    def add(piece: _Answer) -> None:
        nonlocal done
        if isinstance(piece, tuple):
            keys, values = piece
            _add_into(counts, keys.split(_JOIN), values)
        else:
            _add_into(counts, piece, piece.values())
        done += 1
        if progress is not None:
            progress(done, total)
        _check(should_stop)

    _check(should_stop)
    if workers == 1 or rule.safe_cut is None:  # never cut: one shard, not worth a copy
        for shard in shards:
            add(rule.count(shard))
    else:
        _count_in_pool(shards, rule, workers, add, should_stop)
    if progress is not None:
        progress(done, done)
    return counts


def add_counts(pieces: Iterable[dict[str, int]]) -> Counter[str]:
    """Shards' counts added up in the order given: in shard order, the sum keeps the unsharded
    first-seen order of the pre-tokens, which training's tie-breaks depend on."""
    counts: Counter[str] = Counter()
    for piece in pieces:
        _add_into(counts, piece, piece.values())
    return counts


def _add_into(counts: Counter[str], keys: Iterable[str], values: Iterable[int]) -> None:
    """counts.update(dict(zip(keys, values))) (distinct keys) in C: a key already counted keeps
    its place, a new one goes last, in the order given. The one serial step of sharded counting
    adds every shard's distinct pre-tokens (525,150 on english_large in 4 MB shards)."""
    get = counts.get
    dict.update(counts, zip(keys, map(add, values, map(get, keys, repeat(0))), strict=True))


def _count_in_pool(
    shards: Iterable[str],
    rule: ShardRule,
    workers: int,
    add: Callable[[_Answer], None],
    should_stop: StopFn | None,
) -> None:
    # The workers die with this process, however it ends (a killed job must not leave them).
    context = multiprocessing.get_context(_START_METHOD)
    pool = context.Pool(workers, initializer=die_with_parent, initargs=(os.getpid(),))
    try:
        pending: deque[Any] = deque()
        for shard in shards:
            pending.append(pool.apply_async(_count_one, (rule, shard)))
            while len(pending) >= 2 * workers:
                add(_wait(pending.popleft(), should_stop))
        while pending:
            add(_wait(pending.popleft(), should_stop))
        pool.close()
    finally:
        pool.terminate()  # a cancel or an error ends the workers now; after close, a no-op
        pool.join()


def _count_one(rule: ShardRule, shard: str) -> _Answer:
    counts = rule.count(shard)
    keys = _JOIN.join(counts)
    if keys.count(_JOIN) != len(counts) - 1:  # a pre-token holds it (or there are none)
        return dict(counts)
    return keys, array("Q", counts.values())


def _wait(result: Any, should_stop: StopFn | None) -> _Answer:
    while not result.ready():
        result.wait(_WAIT_STEP)
        _check(should_stop)
    piece: _Answer = result.get()  # re-raises a worker's error here
    return piece


def _check(should_stop: StopFn | None) -> None:
    if should_stop is not None and should_stop():
        raise TrainingCancelled(0)
