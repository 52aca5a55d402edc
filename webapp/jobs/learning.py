"""What a running training shows of itself besides numbers (docs/training.md, "Watch it learn"):
the latest merges, how the vocabulary grew, and how well the merges so far compress a sample of
the corpus.

`LearningWatch` sits in the training's progress callback, wherever the job runs (a runner's
child process, a Celery worker), and its `snapshot()` is a small JSON text written to the job's
row with the rest of the progress, so the page reads it from the database like everything
else. What it costs the trainer is bounded: the sample is at most `SAMPLE_CHARS` characters,
each learned merge is applied to it only where its pair occurs (positions indexed by pair, as
the efficient trainer does), and the snapshot holds at most `RECENT` merges and `POINTS` points.

The snapshot (version 1):
    {"v": 1, "base": 256, "sample_bytes": 31990,
     "recent": [[new_id, left_id, left_hex, right_id, right_hex], ...],  # newest first
     "points": [[seconds, merges_done, sample_tokens], ...]}             # oldest first
"""

from __future__ import annotations

import json
from collections.abc import Sequence

import bpe
from bpe.modes import get_mode

SAMPLE_PIECES = 16  # stretches of the corpus, evenly spaced, make the sample
SAMPLE_CHARS = 16_384  # characters of the sample, all stretches together
RECENT = 10  # latest merges kept
POINTS = 120  # points of the curves kept: when full, every other one is dropped
_DEAD = -1  # an id slot merged into its left neighbour


def sample_stretches(text: str) -> list[str]:
    """Stretches of text, evenly spaced through it, each starting and ending at whitespace
    (so no word is cut), SAMPLE_CHARS characters in all; the whole text if it is that short."""
    if len(text) <= SAMPLE_CHARS:
        return [text] if text else []
    size = SAMPLE_CHARS // SAMPLE_PIECES
    stride = len(text) // SAMPLE_PIECES
    stretches = []
    for i in range(SAMPLE_PIECES):
        start, end = i * stride, i * stride + size
        begin = _after_space(text, start, end)
        stop = _last_space(text, begin, end)
        if stop > begin:
            stretches.append(text[begin:stop])
    return stretches


def _after_space(text: str, start: int, end: int) -> int:
    for at in range(start, end):
        if text[at].isspace():
            return at + 1
    return start


def _last_space(text: str, start: int, end: int) -> int:
    for at in range(end - 1, start, -1):
        if text[at].isspace():
            return at
    return end


class SampleTokens:
    """A sample's pieces as id sequences, with the learned merges applied one at a time.

    All pieces sit end to end in one id list with links to the neighbours (-1 ends a piece,
    so no merge crosses it); `where` indexes each adjacent pair's left positions. A merge
    visits only the places its pair occurs, left to right (so "aaa" takes one merge of
    "aa", as the trainers do), and fixes the pairs on either side of each."""

    def __init__(self, pieces: Sequence[Sequence[int]]) -> None:
        self.ids: list[int] = []
        self.next: list[int] = []
        self.prev: list[int] = []
        self.where: dict[tuple[int, int], set[int]] = {}
        for piece in pieces:
            base = len(self.ids)
            n = len(piece)
            self.ids.extend(piece)
            self.prev.extend([-1, *range(base, base + n - 1)][:n])
            self.next.extend([*range(base + 1, base + n), -1][:n])
            for j in range(n - 1):
                self.where.setdefault((piece[j], piece[j + 1]), set()).add(base + j)
        self.tokens = len(self.ids)

    def merge(self, left: int, right: int, new_id: int) -> None:
        spots = self.where.pop((left, right), None)
        if not spots:
            return
        ids, nxt, prv = self.ids, self.next, self.prev
        for i in sorted(spots):
            j = nxt[i]
            if j < 0 or ids[i] != left or ids[j] != right:
                continue  # taken by an overlapping occurrence just before ("aaa")
            p, q = prv[i], nxt[j]
            if p >= 0:
                self._drop((ids[p], left), p)
            if q >= 0:
                self._drop((right, ids[q]), j)
            ids[i], ids[j] = new_id, _DEAD
            nxt[i] = q
            if q >= 0:
                prv[q] = i
                self.where.setdefault((new_id, ids[q]), set()).add(i)
            if p >= 0:
                self.where.setdefault((ids[p], new_id), set()).add(p)
            self.tokens -= 1

    def _drop(self, pair: tuple[int, int], at: int) -> None:
        found = self.where.get(pair)
        if found is not None:
            found.discard(at)


class LearningWatch:
    """Follows a training's progress reports and keeps what its page draws (see the module)."""

    def __init__(
        self,
        mode: str,
        text: str,
        *,
        pattern: str | None,
        alphabet: Sequence[str] | None,
    ) -> None:
        stretches = sample_stretches(text)
        self.sample_bytes = sum(len(s.encode("utf-8")) for s in stretches)
        pieces, self.base = _pieces(mode, stretches, pattern, alphabet)
        self.sample = SampleTokens(pieces)
        self.names: dict[int, bytes] = {}  # id -> bytes, every id the recent merges name
        self.recent: list[tuple[int, int, int]] = []  # (new, left, right), newest first
        self.points: list[tuple[float, int, int]] = []
        self.merges_done = 0

    def observe(self, progress: bpe.Progress, seconds: float, known: dict[int, bytes]) -> None:
        """One report: its learned merges applied to the sample, and a point of the curves.
        `known` is id -> bytes of every token so far (webapp.jobs.task.PairNamer's)."""
        if not progress.merges_done:
            if not self.points:
                self.points.append((seconds, 0, self.sample.tokens))
            return
        if progress.merges_done == self.merges_done:
            return
        learned = progress.learned
        if not learned and progress.pair is not None:  # a trainer that lists none: the last
            learned = ((*progress.pair, self.base + progress.merges_done - 1),)
        for left, right, new_id in learned:
            self.sample.merge(left, right, new_id)
        self.merges_done = progress.merges_done
        for left, right, new_id in learned[-RECENT:]:
            self.recent.insert(0, (new_id, left, right))
        del self.recent[RECENT:]
        self.names = {i: known[i] for merge in self.recent for i in merge[1:] if i in known}
        self.points.append((seconds, progress.merges_done, self.sample.tokens))
        if len(self.points) > POINTS:  # keep the first and the latest, every other between
            self.points = [*self.points[:-1:2], self.points[-1]]

    def snapshot(self) -> str:
        recent = [
            [new, left, _hex(self.names.get(left)), right, _hex(self.names.get(right))]
            for new, left, right in self.recent
        ]
        points = [[round(s, 2), m, t] for s, m, t in self.points]
        return json.dumps(
            {
                "v": 1,
                "base": self.base,
                "sample_bytes": self.sample_bytes,
                "recent": recent,
                "points": points,
            },
            separators=(",", ":"),
        )


def _hex(data: bytes | None) -> str | None:
    return None if data is None else data.hex()


def _pieces(
    mode: str, stretches: list[str], pattern: str | None, alphabet: Sequence[str] | None
) -> tuple[list[list[int]], int]:
    """The sample as the mode trains on it: id sequences no merge crosses, and the first
    merge's id. Naive: each stretch's bytes; chunked: each chunk's bytes; words: each word's
    character ids and `</w>`."""
    how = get_mode(mode)
    if how.uses_alphabet:
        letters = list(alphabet or [])
        to_id = {c: i for i, c in enumerate(letters)}
        end = len(letters)
        words = [w for s in stretches for w in s.split()]
        pieces = [[to_id[c] for c in w if c in to_id] + [end] for w in words]
        return pieces, how.base_size(len(letters))
    if how.uses_pattern:
        chunks = [c for s in stretches for c in how.split(s, pattern)]
        return [list(c.encode("utf-8")) for c in chunks], how.base_size(0)
    return [list(s.encode("utf-8")) for s in stretches], how.base_size(0)
