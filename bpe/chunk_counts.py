"""Counting a text's distinct chunks fast, for `chunked` training.

What it adds over a plain `Counter(m.group() for m in finditer(text))`, with the same result:
- `split_chunks` in blocks of at most half a megabyte, each sized to ~15 ms of matching so the
  stop check is asked often enough: no match objects, no list of every chunk of a large text in
  memory at once, and a block that is all or mostly ASCII is split by the standard `re`
  module's twin of the pattern, about twice as fast as `regex`;
- for a large text, the second half is counted by a second Python process while this one
  counts the first (the machine has cores to spare while training is single-threaded).

Texts are cut only where the pattern cannot cut differently: after a line feed that is followed
by a character other than whitespace, or between a letter and a space. For the GPT-4 pattern no
chunk holds a line feed followed by such a character, and every line feed ends a match; a chunk
holding a letter never goes on past a space after it (only `\\p{L}+` takes letters), and a
chunk ending in a letter never looked past it. So the matches of the pieces are the matches of
the whole (the pattern looks behind nothing). The letter-space cuts matter for text whose
lines are indented or megabytes long, where line feeds alone leave pieces far too long to keep
the stop check timely. Other patterns (GPT-2's `\\s+(?!\\S)` looks past a cut, for one) are
counted in one piece, in this process.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import os
import pickle
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import regex

from bpe.pacing import slices
from bpe.patterns import (
    GPT4_PATTERN,
    compile_pattern,
    findall_bounded,
    finditer_bounded,
    split_chunks,
)
from bpe.training_types import StopFn, TrainingCancelled

# Below this many characters a second process costs more than it saves: it takes ~0.17 s to
# start (interpreter and `import bpe`), and with the `re` twin half of english_small (6.5 MB)
# counts in ~0.25 s, so the helper saved nothing quiet and lost 0.15-0.35 s under load (on
# english_small and 4 MB of Chinese alike); on english_large (57 MB) it saves seconds.
PARALLEL_MIN_CHARS = 10_000_000
# Blocks are sized from the time the last one took (CJK text matches ~5x slower than English),
# up to this many characters.
_BLOCK_CHARS = 1 << 19
_FEED_CHARS = 1 << 20  # the helper's half is encoded and written this much at a time
GPT4_SAFE_CUT = regex.compile(r"\n(?=\S)|(?<=\p{L})(?= )")
# While waiting for the helper's answer, the stop check is asked this often (seconds).
_WAIT_STEP = 0.02
# The helper answers in pickled dicts of at most this many chunks, so that loading and adding
# them can be interleaved with the stop check.
_PIECE_CHUNKS = 1 << 13


def count_chunks(
    text: str,
    pattern: str,
    *,
    should_stop: StopFn | None = None,
    advanced: Callable[[int], None] | None = None,
) -> Counter[str]:
    """Each distinct chunk of text -> how often it occurs, in first-seen order (empty ones
    included, as the pattern yields them). With the GPT-4 pattern, should_stop is asked
    between blocks and TrainingCancelled(0) raised if it says so, and `advanced` is told how
    many of the text's characters are split after each block (another pattern is split in
    one piece: told once, at the end)."""
    split = _Advance(advanced, len(text))
    if pattern != GPT4_PATTERN:  # under the split time limit, unless a built-in pattern
        if compile_pattern(pattern).groups:  # findall would give groups, not whole matches
            counts = Counter(m.group() for m in finditer_bounded(pattern, text))
        else:
            counts = Counter(findall_bounded(pattern, text))
        split.to(len(text))
        return counts
    if len(text) < PARALLEL_MIN_CHARS or (os.cpu_count() or 1) < 2:
        return _count_in_blocks(text, should_stop=should_stop, advanced=split.to)
    cut = _safe_cut(text, len(text) // 2)
    if cut is None:
        return _count_in_blocks(text, should_stop=should_stop, advanced=split.to)
    helper = _Helper(text, cut)
    # The helper counts the second half alongside, at about the same pace: this half's
    # progress stands for both.
    split.scale = len(text) / cut
    try:
        _check(should_stop)
        counts = _count_in_blocks(text, should_stop=should_stop, end=cut, advanced=split.to)
        for piece in helper.result(should_stop):
            counts.update(piece)
            _check(should_stop)
    except BaseException:
        helper.stop()
        raise
    if not helper.ok:  # the helper could not run: count here, slower but the same
        split.scale = 1.0
        counts.update(_count_in_blocks(text, should_stop=should_stop, start=cut, advanced=split.to))
    return counts


class _Advance:
    """Tells a splitter's `advanced` callback how far it has got (if there is one)."""

    def __init__(self, advanced: Callable[[int], None] | None, total: int) -> None:
        self.advanced, self.total, self.scale = advanced, total, 1.0

    def to(self, done: int) -> None:
        if self.advanced is not None:
            self.advanced(min(self.total, int(done * self.scale)))


def _check(should_stop: StopFn | None) -> None:
    if should_stop is not None and should_stop():
        raise TrainingCancelled(0)


def _safe_cut(text: str, near: int) -> int | None:
    """The first safe cut at or after near, or None."""
    found = GPT4_SAFE_CUT.search(text, near)
    return None if found is None else found.end()


def _count_in_blocks(
    text: str,
    block_chars: int | None = None,
    should_stop: StopFn | None = None,
    *,
    start: int = 0,
    end: int | None = None,
    advanced: Callable[[int], None] | None = None,
) -> Counter[str]:
    """GPT-4 pattern chunks of text[start:end] counted a block at a time, blocks cut only at
    safe cuts (start and end must be safe cuts too), should_stop asked between blocks and
    `advanced` told the end of each block counted."""
    counts: Counter[str] = Counter()
    stop = len(text) if end is None else end

    def cut(at: int) -> int:
        found = _safe_cut(text, start + at)
        return stop - start if found is None else found - start

    for first, last in slices(
        stop - start, lambda: _check(should_stop), most=block_chars or _BLOCK_CHARS, cut=cut
    ):
        counts.update(split_chunks(text[start + first : start + last], GPT4_PATTERN))
        if advanced is not None:
            advanced(start + last)
    return counts


class _Helper:
    """A second process counting part of the text: `python -m bpe.chunk_counts`, fed the text
    on stdin, answering with pickled dicts on stdout."""

    def __init__(self, text: str, start: int = 0) -> None:
        self.ok = False  # set once its whole answer has been given
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "bpe.chunk_counts", str(os.getpid())],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            self.proc = None
            return
        # Feed it from a thread: the pipe fills long before the helper has started reading.
        self.feeder = threading.Thread(target=self._feed, args=(text, start))
        self.feeder.start()
        # Read its answer from a thread too, so the wait for it can ask the stop check.
        self.output = b""
        self.reader = threading.Thread(target=self._read)
        self.reader.start()

    def _feed(self, text: str, start: int) -> None:
        """text[start:], encoded and written a piece at a time: encoding holds the interpreter,
        and half of a large text encoded at once kept the stop check waiting ~50 ms."""
        assert self.proc is not None and self.proc.stdin is not None
        try:
            for piece in range(start, len(text), _FEED_CHARS):
                self.proc.stdin.write(text[piece : piece + _FEED_CHARS].encode("utf-8"))
            self.proc.stdin.close()
        except OSError:
            pass

    def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        self.output = self.proc.stdout.read()

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.feeder.join()
            self.reader.join()

    def result(self, should_stop: StopFn | None = None) -> Iterator[dict[str, int]]:
        """The helper's counts, in pieces, in first-seen order, asking should_stop while
        waiting; nothing if it failed (`ok` stays False: the caller counts the text itself)."""
        if self.proc is None:
            return
        while self.reader.is_alive():
            self.reader.join(_WAIT_STEP)
            _check(should_stop)
        self.feeder.join()
        if self.proc.wait() != 0:
            return
        # Load every piece before giving any, so that a broken answer adds nothing.
        stream, pieces = io.BytesIO(self.output), []
        try:
            while stream.tell() < len(self.output):
                pieces.append(pickle.load(stream))
                _check(should_stop)
        except TrainingCancelled:
            raise
        except Exception:  # noqa: BLE001 - any broken answer means: count it here instead
            return
        self.output = b""
        yield from pieces
        self.ok = True


_PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def die_with_parent(parent_pid: int) -> None:
    """Ask Linux to SIGKILL this process when its parent dies (a killed web worker must not
    leave its helper counting), and exit if the parent is already gone. Elsewhere the helper
    ends once the closed pipes tell it."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):  # no libc to ask: pipes end it
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # it died before the request was in place
        os._exit(1)


def _helper_main() -> None:
    if len(sys.argv) > 1:
        die_with_parent(int(sys.argv[1]))
    text = sys.stdin.buffer.read().decode("utf-8")
    counts = list(_count_in_blocks(text).items())
    for start in range(0, len(counts), _PIECE_CHUNKS):
        piece = dict(counts[start : start + _PIECE_CHUNKS])
        sys.stdout.buffer.write(pickle.dumps(piece, protocol=5))


if __name__ == "__main__":
    _helper_main()
