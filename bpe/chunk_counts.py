"""Counting a text's distinct chunks fast, for `chunked` training.

What it adds over a plain `Counter(m.group() for m in finditer(text))`, with the same result:
- `findall` in blocks of about a megabyte: no match objects, and no list of every chunk of a
  large text in memory at once;
- for a large text, the second half is counted by a second Python process while this one
  counts the first (the machine has cores to spare while training is single-threaded).

Texts are cut only where the pattern cannot cut differently: after a line feed that is followed
by a character other than whitespace. For the GPT-4 pattern no chunk holds a line feed followed
by such a character, and every line feed ends a match, so the matches of the pieces are the
matches of the whole. Other patterns (GPT-2's `\\s+(?!\\S)` looks past a cut, for one) are
counted in one piece, in this process.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import regex

from bpe.patterns import GPT4_PATTERN, compile_pattern
from bpe.training_types import StopFn, TrainingCancelled

# Below this many characters a second process costs more than it saves.
PARALLEL_MIN_CHARS = 1_500_000
_BLOCK_CHARS = 1 << 19  # up to about 80 ms of matching (CJK text is the slowest)
_SAFE_CUT = regex.compile(r"\n(?=\S)")


def count_chunks(text: str, pattern: str, *, should_stop: StopFn | None = None) -> Counter[str]:
    """Each distinct chunk of text -> how often it occurs, in first-seen order (empty ones
    included, as the pattern yields them). With the GPT-4 pattern, should_stop is asked
    between blocks and TrainingCancelled(0) raised if it says so."""
    compiled = compile_pattern(pattern)
    if pattern != GPT4_PATTERN:
        if compiled.groups:  # findall would give groups, not whole matches
            return Counter(m.group() for m in compiled.finditer(text))
        return Counter(compiled.findall(text))
    if len(text) < PARALLEL_MIN_CHARS or (os.cpu_count() or 1) < 2:
        return _count_in_blocks(text, should_stop=should_stop)
    cut = _safe_cut(text, len(text) // 2)
    if cut is None:
        return _count_in_blocks(text, should_stop=should_stop)
    helper = _Helper(text[cut:])
    try:
        counts = _count_in_blocks(text[:cut], should_stop=should_stop)
    except BaseException:
        helper.stop()
        raise
    second = helper.result()
    if second is None:  # the helper could not run: count here, slower but the same
        second = _count_in_blocks(text[cut:], should_stop=should_stop)
    counts.update(second)
    return counts


def _safe_cut(text: str, near: int) -> int | None:
    """The first safe cut at or after near, or None."""
    found = _SAFE_CUT.search(text, near)
    return None if found is None else found.end()


def _count_in_blocks(
    text: str, block_chars: int | None = None, should_stop: StopFn | None = None
) -> Counter[str]:
    """GPT-4 pattern chunks counted a block at a time, blocks cut only at safe cuts."""
    block = block_chars or _BLOCK_CHARS
    findall = compile_pattern(GPT4_PATTERN).findall
    counts: Counter[str] = Counter()
    start = 0
    while start < len(text):
        end = _safe_cut(text, start + block) if start + block < len(text) else None
        end = len(text) if end is None or end <= start else end
        counts.update(findall(text, start, end))
        start = end
        if start < len(text) and should_stop is not None and should_stop():
            raise TrainingCancelled(0)  # asked between blocks only: a short text never asks
    return counts


class _Helper:
    """A second process counting part of the text: `python -m bpe.chunk_counts`, fed the text
    on stdin, answering with a pickled dict on stdout."""

    def __init__(self, text: str) -> None:
        env = dict(os.environ)
        package_root = str(Path(__file__).resolve().parent.parent)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [package_root, env.get("PYTHONPATH")]))
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                [sys.executable, "-m", "bpe.chunk_counts"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=env,
            )
        except OSError:
            self.proc = None
            return
        # Feed it from a thread: the pipe fills long before the helper has started reading.
        self.feeder = threading.Thread(target=self._feed, args=(text.encode("utf-8"),))
        self.feeder.start()

    def _feed(self, data: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(data)
            self.proc.stdin.close()
        except OSError:
            pass

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait()
            self.feeder.join()

    def result(self) -> dict[str, int] | None:
        if self.proc is None:
            return None
        assert self.proc.stdout is not None
        output = self.proc.stdout.read()
        self.feeder.join()
        if self.proc.wait() != 0:
            return None
        try:
            return pickle.loads(output)
        except Exception:  # noqa: BLE001 - any broken answer means: count it here instead
            return None


def _helper_main() -> None:
    text = sys.stdin.buffer.read().decode("utf-8")
    sys.stdout.buffer.write(pickle.dumps(dict(_count_in_blocks(text)), protocol=5))


if __name__ == "__main__":
    _helper_main()
