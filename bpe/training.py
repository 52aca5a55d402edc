"""`train()`: turn text into the weighted id sequences a mode calls for, then run a trainer.

Each mode (`bpe.modes`) only decides what the sequences are, with the `Splitter` this module
hands it; the trainers never know which mode they serve:
- `naive`: the whole text's UTF-8 bytes, one sequence, weight 1 (merges may cross anything);
- `chunked`: each distinct chunk of the split pattern, weighted by how often it occurs;
- `words`: each distinct whitespace-separated word as characters plus `</w>`, weighted likewise.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from pathlib import Path
from typing import Any, cast

from bpe.chunk_counts import count_chunks
from bpe.model import Mode, Tokenizer, TrainingStats
from bpe.modes import TrainingMode, get_mode
from bpe.pacing import Clock, collector_paused, release, slices
from bpe.patterns import resolve_pattern
from bpe.reference import train_reference
from bpe.shards import (
    ShardCounter,
    ShardProgressFn,
    ShardRule,
    balanced_shard_chars,
    count_shards,
    cut_text,
    pool_min_chars,
    rule_for,
    stream_shards,
)
from bpe.training_types import MergeRecord, ProgressFn, StopFn, TrainingCancelled

TRAINERS = ("reference", "efficient")
_WORD_BLOCK_CHARS = 1 << 19  # the most text split into words between two stop checks
_PIECE_BATCH = 1 << 14  # pieces counted between two stop checks (`Splitter.counted`)
# The standard `re` module's \s is exactly str.isspace, which is what str.split() cuts at.
_WHITESPACE = re.compile(r"\s")
DEFAULT_TRAINER = "efficient"


def train(
    text: str,
    *,
    vocab_size: int,
    mode: str = "chunked",
    pattern: str = "gpt4",
    trainer: str = DEFAULT_TRAINER,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 1,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    jobs: int | None = 1,
    shard_counter: ShardCounter | None = None,
) -> Tokenizer:
    """Train a tokeniser on text.

    vocab_size counts everything: the base ids (256 bytes, or in words mode the alphabet and
    `</w>`), the merges and the special tokens. Training stops early when no pair is left or
    the best pair occurs fewer than min_frequency times. `pattern` (a name, `gpt4` or `gpt2`,
    or a regex) is used in chunked mode only. Raises TrainingCancelled if should_stop() says so.

    >>> tok = train("aaabdaaabac", vocab_size=259, mode="naive", trainer="reference")
    >>> tok.merges
    [(97, 97, 256), (97, 98, 257), (256, 257, 258)]

    In chunked and words mode, jobs > 1 (or None: every core) counts the text's pre-tokens in
    shards by that many processes (`bpe.shards`), with the same merges; naive mode ignores it.
    `shard_counter(text, rule, should_stop, advanced)` counts them instead: it cuts the text
    where the rule allows (`bpe.shards.cut_text`), counts the shards wherever it likes (other
    machines, say), calls advanced(characters counted) as it goes, and returns their counts
    added up in shard order (`bpe.shards.add_counts`).
    """
    return _train(
        text,
        lambda clock: Splitter(clock, jobs=jobs, shard_counter=shard_counter),
        vocab_size=vocab_size,
        mode=mode,
        pattern=pattern,
        trainer=trainer,
        special_tokens=special_tokens,
        min_frequency=min_frequency,
        progress=progress,
        should_stop=should_stop,
    )


def train_files(
    paths: Sequence[str | Path],
    *,
    vocab_size: int,
    mode: str = "chunked",
    pattern: str = "gpt4",
    trainer: str = DEFAULT_TRAINER,
    special_tokens: Sequence[str] = (),
    min_frequency: int = 1,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    jobs: int | None = None,
    shard_progress: ShardProgressFn | None = None,
) -> Tokenizer:
    """`train` on the files' texts one after another ('-' is stdin), read a block at a time
    and counted in shards by `jobs` processes (every core if None): no process holds the
    corpus, and the merges are those of `train` on the joined text. Chunked and words mode
    only: naive mode trains on one sequence of the whole text (use `train`). shard_progress
    gets (shards counted, total), total None until the last shard is counted."""
    rule_for(mode, None)  # refuses naive mode (and modes of its own), saying why
    return _train(
        "",
        lambda clock: _StreamSplitter(clock, paths, jobs=jobs, shard_progress=shard_progress),
        vocab_size=vocab_size,
        mode=mode,
        pattern=pattern,
        trainer=trainer,
        special_tokens=special_tokens,
        min_frequency=min_frequency,
        progress=progress,
        should_stop=should_stop,
    )


def _train(
    text: str,
    make_splitter: Callable[[Clock], Splitter],
    *,
    vocab_size: int,
    mode: str,
    pattern: str,
    trainer: str,
    special_tokens: Sequence[str],
    min_frequency: int,
    progress: ProgressFn | None,
    should_stop: StopFn | None,
) -> Tokenizer:
    started = time.perf_counter()
    training_mode = get_mode(mode)  # a ValueError naming the modes if it is none of them
    if trainer not in TRAINERS:
        raise ValueError(f"unknown trainer {trainer!r}; choose one of {', '.join(TRAINERS)}")
    if min_frequency < 1:
        raise ValueError("min_frequency must be at least 1")
    specials = _check_specials(special_tokens, training_mode)
    split_regex = resolve_pattern(pattern) if training_mode.uses_pattern else None

    # Splitting a large text takes seconds before the trainer starts; report that time too
    # (all zero: nothing is known yet). A short text is split before any check falls due.
    splitting = Clock(0, [], progress, should_stop)
    splitting.defer()
    with collector_paused():
        sequences, alphabet = training_mode.training_input(
            text, split_regex, make_splitter(splitting)
        )
        base = training_mode.base_size(len(alphabet or []))
        _check_room(training_mode, vocab_size, specials, len(alphabet or []))
        max_merges = vocab_size - base - len(specials)
        noted = _Noted(progress, should_stop)
        records = run_trainer(
            trainer,
            sequences,
            first_id=base,
            max_merges=max_merges,
            min_frequency=min_frequency,
            progress=noted.progress,
            should_stop=noted.should_stop,
        )
        # The sequences of a large corpus take 100-300 ms to weigh and to free, after the
        # trainer's last check: a slice at a time, asking, so a stop asked for meanwhile still
        # wins and a cancelled job never turns up as a result.
        ending = Clock(max_merges, records, progress, should_stop)
        ending.defer(since=noted.last)
        initial_tokens = _weighed(sequences, ending.tick)
        release(sequences, ending.tick)
        if should_stop is not None and should_stop():
            raise TrainingCancelled(len(records))
    merges = [(r.left, r.right, r.new_id) for r in records]
    next_id = base + len(merges)
    stats = TrainingStats(
        trainer=trainer,
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        initial_tokens=initial_tokens,
        merge_counts=[r.count for r in records],
        tokens_after=[r.tokens_after for r in records],
    )
    tok = Tokenizer(
        # Mode names the built-in modes only; a registered mode's name is as good at run time.
        mode=cast(Mode, training_mode.name),
        merges=merges,
        special_tokens={s: next_id + i for i, s in enumerate(specials)},
        pattern=split_regex,
        alphabet=alphabet,
        training=stats,
    )
    stats.seconds = time.perf_counter() - started
    return tok


def smallest_vocab_size(
    mode: str, special_tokens: Sequence[str] = (), *, alphabet_size: int | None = None
) -> tuple[int, int]:
    """(base ids, special tokens) that training in this mode needs before any merge: the 256
    bytes, or in words mode the alphabet (the text's distinct characters outside whitespace,
    which `alphabet_size` gives) and `</w>`; `<unk>` counts as a special token in words mode.

    >>> smallest_vocab_size("words", ["<eot>"], alphabet_size=7)
    (8, 2)
    """
    training_mode = get_mode(mode)
    if training_mode.uses_alphabet and alphabet_size is None:
        raise ValueError(f"{mode} mode's smallest vocab size depends on the text's alphabet")
    base = training_mode.base_size(alphabet_size or 0)
    return base, len(_check_specials(special_tokens, training_mode))


def check_vocab_fits(
    mode: str,
    vocab_size: int,
    special_tokens: Sequence[str] = (),
    *,
    alphabet_size: int | None = None,
) -> None:
    r"""Refuse, in the words `train` would use, a vocab size too small for this mode, these
    special tokens and (words mode) an alphabet of `alphabet_size` characters.

    >>> try:
    ...     check_vocab_fits("words", 8, alphabet_size=7)
    ... except ValueError as exc:
    ...     print(str(exc).replace(" + ", "\n+ "))
    vocab_size must be at least 9 here: 8 base ids (the text's 7 distinct characters and </w>)
    + the special token <unk> (words mode's own)
    """
    training_mode = get_mode(mode)
    if training_mode.uses_alphabet and alphabet_size is None:
        raise ValueError(f"{mode} mode's smallest vocab size depends on the text's alphabet")
    specials = _check_specials(special_tokens, training_mode)
    _check_room(training_mode, vocab_size, specials, alphabet_size or 0)


def _check_room(
    mode: TrainingMode, vocab_size: int, specials: Sequence[str], alphabet_size: int
) -> None:
    """The one refusal of a too small vocab size: what the base ids are (the mode says) and
    which special tokens, by name, so the sum reads like the corpus page's minimum."""
    base = mode.base_size(alphabet_size)
    if vocab_size >= base + len(specials):
        return
    what = mode.base_description(alphabet_size)
    if specials:
        names = ", ".join(
            f"{s} ({mode.name} mode's own)" if s in mode.required_special_tokens else s
            for s in specials
        )
        noun = "the special token" if len(specials) == 1 else f"{len(specials)} special tokens:"
        what += f" + {noun} {names}"
    raise ValueError(f"vocab_size must be at least {base + len(specials):,} here: {what}")


def run_trainer(
    trainer: str,
    sequences: Sequence[tuple[Sequence[int], int]],
    *,
    first_id: int,
    max_merges: int,
    min_frequency: int = 1,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
) -> list[MergeRecord]:
    """Dispatch to a trainer by name; both take and return the same shapes."""
    if trainer == "reference":
        learn = train_reference
    else:
        from bpe.efficient import train_efficient as learn
    return learn(
        sequences,
        first_id=first_id,
        max_merges=max_merges,
        min_frequency=min_frequency,
        progress=progress,
        should_stop=should_stop,
    )


class Splitter:
    """What a mode cuts its training text with (`TrainingMode.training_input`): `train`'s stop
    checks and progress reports come between slices, since splitting a large text takes
    seconds before the trainer starts."""

    def __init__(
        self, clock: Clock, *, jobs: int | None = 1, shard_counter: ShardCounter | None = None
    ) -> None:
        self.clock = clock
        self.jobs = jobs  # more than 1 (or None, every core): count shards in a process pool
        self.shard_counter = shard_counter  # counts the shards elsewhere (see `train`)
        self.sharded = jobs != 1 or shard_counter is not None

    def whole_text(self, text: str) -> list[tuple[bytes, int]]:
        """The text's UTF-8 bytes as one sequence of weight 1."""
        return [(_utf8(text, self.clock), 1)]

    def chunks(self, text: str, pattern: str) -> list[tuple[bytes, int]]:
        """`chunk_sequences`: each distinct chunk of the split pattern, counted."""
        stop = self.clock.stop_fn()
        if not self._in_shards(text):
            return chunk_sequences(
                text, pattern, should_stop=stop, advanced=self.clock.splitting(len(text))
            )
        return chunk_sequences_of(self._sharded(text, ShardRule("chunked", pattern)), stop)

    def words(self, text: str) -> tuple[list[str], list[tuple[list[int], int]]]:
        """`word_sequences`: the alphabet and each distinct word's ids, counted."""
        stop = self.clock.stop_fn()
        if not self._in_shards(text):
            return word_sequences(text, should_stop=stop, advanced=self.clock.splitting(len(text)))
        return word_sequences_of(self._sharded(text, ShardRule("words")), stop)

    def _in_shards(self, text: str) -> bool:
        """Whether the text is counted in shards: always by a shard_counter of the caller's,
        by the pool only from `pool_min_chars` on (the same counts either way)."""
        if self.shard_counter is not None:
            return True
        return self.sharded and len(text) >= pool_min_chars()

    def _sharded(self, text: str, rule: ShardRule) -> Counter[str]:
        stop = self.clock.stop_fn()
        if self.shard_counter is not None:
            return self.shard_counter(text, rule, stop, self.clock.splitting(len(text)))
        shards = cut_text(text, rule, shard_chars=balanced_shard_chars(len(text), self.jobs))
        return count_shards(shards, rule, jobs=self.jobs, total=len(shards), should_stop=stop)

    def counted(self, pieces: Iterable[str]) -> list[tuple[bytes, int]]:
        """Each distinct non-empty piece's UTF-8 bytes with how often it occurs (first-seen
        order), the clock ticking between batches: what a new byte-level mode trains on."""
        counts: Counter[str] = Counter()
        remaining = iter(pieces)
        while batch := list(islice(remaining, _PIECE_BATCH)):
            counts.update(batch)
            self.clock.tick()
        return [(piece.encode("utf-8"), n) for piece, n in counts.items() if piece]


class _StreamSplitter(Splitter):
    """A Splitter that counts files streamed in shards (`train_files`), not the text given."""

    def __init__(
        self,
        clock: Clock,
        paths: Sequence[str | Path],
        *,
        jobs: int | None,
        shard_progress: ShardProgressFn | None,
    ) -> None:
        super().__init__(clock, jobs=jobs)
        self.paths = paths
        self.shard_progress = shard_progress

    def chunks(self, text: str, pattern: str) -> list[tuple[bytes, int]]:
        counts = self._streamed(ShardRule("chunked", pattern))
        return chunk_sequences_of(counts, self.clock.stop_fn())

    def words(self, text: str) -> tuple[list[str], list[tuple[list[int], int]]]:
        return word_sequences_of(self._streamed(ShardRule("words")), self.clock.stop_fn())

    def _streamed(self, rule: ShardRule) -> Counter[str]:
        return count_shards(
            stream_shards(self.paths, rule),
            rule,
            jobs=self.jobs,
            should_stop=self.clock.stop_fn(),
            progress=self.shard_progress,
        )


def chunk_sequences(
    text: str,
    pattern: str,
    *,
    should_stop: StopFn | None = None,
    advanced: Callable[[int], None] | None = None,
) -> list[tuple[bytes, int]]:
    """Distinct chunks as bytes (byte ids), each with how often it occurs (first-seen order);
    `advanced(characters split so far)` as `count_chunks` calls it."""
    counts = count_chunks(text, pattern, should_stop=should_stop, advanced=advanced)
    return chunk_sequences_of(counts, should_stop)


def chunk_sequences_of(
    counts: Counter[str], should_stop: StopFn | None = None
) -> list[tuple[bytes, int]]:
    """`chunk_sequences` from chunks already counted (sharded counting, `bpe.shards`)."""
    tick = _stop_tick(should_stop)
    sequences: list[tuple[bytes, int]] = []
    # A large corpus has a million distinct chunks: encoding them all, and freeing them, are
    # long steps.
    items = iter(counts.items())
    for start, stop in slices(len(counts), tick):
        sequences += [
            (chunk.encode("utf-8"), n) for chunk, n in islice(items, stop - start) if chunk
        ]
    release(counts, tick)
    return sequences


def word_sequences(
    text: str,
    *,
    should_stop: StopFn | None = None,
    advanced: Callable[[int], None] | None = None,
) -> tuple[list[str], list[tuple[list[int], int]]]:
    """The alphabet (sorted by code point) and each distinct word as char ids plus `</w>`.

    Words are counted a block at a time, blocks cut at whitespace so no word is split, and
    should_stop is asked between blocks (and between slices of the later steps): splitting a
    large corpus takes far longer than the 100 ms within which a cancel must be honoured.
    `advanced`, if given, is told how many characters are split after each block.
    """
    tick = _stop_tick(should_stop)

    def at_space(at: int) -> int:
        space = _WHITESPACE.search(text, at)
        return len(text) if space is None else space.start()

    counts: Counter[str] = Counter()
    for start, stop in slices(len(text), tick, most=_WORD_BLOCK_CHARS, cut=at_space):
        counts.update(text[start:stop].split())
        if advanced is not None:
            advanced(stop)
    return word_sequences_of(counts, should_stop)


def word_sequences_of(
    counts: Counter[str], should_stop: StopFn | None = None
) -> tuple[list[str], list[tuple[list[int], int]]]:
    """`word_sequences` from words already counted (sharded counting, `bpe.shards`)."""
    tick = _stop_tick(should_stop)
    seen: set[str] = set()
    words = iter(counts)
    for start, stop in slices(len(counts), tick):
        seen.update(*islice(words, stop - start))
    alphabet = sorted(seen)
    to_id = {c: i for i, c in enumerate(alphabet)}.__getitem__
    end_of_word = [len(alphabet)]
    sequences: list[tuple[list[int], int]] = []
    items = iter(counts.items())
    for start, stop in slices(len(counts), tick):
        part = islice(items, stop - start)
        sequences += [(list(map(to_id, word)) + end_of_word, n) for word, n in part]
    release(counts, tick)
    return alphabet, sequences


class _Noted:
    """The callbacks, noting when either was last called (when the next check falls due)."""

    def __init__(self, progress: ProgressFn | None, should_stop: StopFn | None) -> None:
        self.last = time.perf_counter()
        self.progress = None if progress is None else self._noting(progress)
        self.should_stop = None if should_stop is None else self._noting(should_stop)

    def _noting(self, callback: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            self.last = time.perf_counter()
            return callback(*args)

        return call


def _stop_tick(should_stop: StopFn | None) -> Callable[[], None]:
    """should_stop as a tick for `slices`: raises TrainingCancelled(0) when it says so."""

    def tick() -> None:
        if should_stop is not None and should_stop():
            raise TrainingCancelled(0)

    return tick


_CHECK_BEFORE_JOIN = 1 << 22  # characters: the join of a shorter text takes a few ms


def _utf8(text: str, clock: Clock) -> bytes:
    """text.encode("utf-8"), a slice at a time: 50 MB encoded in one call took ~100 ms."""
    parts = [text[start:stop].encode("utf-8") for start, stop in slices(len(text), clock.tick)]
    if len(text) >= _CHECK_BEFORE_JOIN:
        # Joining 57 MB of parts is one C call of 45-65 ms, and the trainer's first check
        # comes after it: checking here, whether due or not, keeps that gap within 100 ms.
        clock.check()
    return b"".join(parts)


def _weighed(sequences: Sequence[tuple[Sequence[int], int]], tick: Callable[[], None]) -> int:
    """How many tokens the sequences hold, their weights counted."""
    total = 0
    for start, stop in slices(len(sequences), tick):
        total += sum(len(ids) * weight for ids, weight in sequences[start:stop])
    return total


def _check_specials(special_tokens: Iterable[str], mode: TrainingMode) -> list[str]:
    specials: list[str] = []
    for token in special_tokens:
        if not isinstance(token, str) or not token:
            raise ValueError("special tokens must be non-empty strings")
        if token in specials:
            raise ValueError(f"special token {token!r} is given twice")
        if token in mode.reserved_tokens:
            raise ValueError(f"{token!r} is {mode.reserved_tokens[token]} in {mode.name} mode")
        specials.append(token)
    # Words mode maps characters it never saw in training to <unk>, so it always has one.
    for required in reversed(mode.required_special_tokens):
        if required not in specials:
            specials.insert(0, required)
    return specials
