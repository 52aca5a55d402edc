"""Encoding many texts on every core: tiktoken's threads on the fast path, else processes.

Worker processes are started with `spawn` (the web process has threads, which `fork` would copy
mid-flight), each builds the tokeniser once from its constructor's fields (not its caches), and
they exit with the batch.
Starting them costs about a second, so small batches stay in this process.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from bpe.model import Engine, Tokenizer

# Below this many characters in all, worker processes cost more than they save.
PROCESS_MIN_CHARS = 4_000_000

_worker_tokenizer: Tokenizer | None = None


def encode_batch(
    tok: Tokenizer,
    texts: list[str],
    *,
    allowed_special: Literal["all"] | Iterable[str] = (),
    engine: Engine = "auto",
    workers: int | None = None,
) -> list[list[int]]:
    """The ids of each text, as `tok.encode` gives them, in order."""
    workers = max(1, workers or os.cpu_count() or 1)
    specials = tok._allowed_specials(allowed_special)
    if engine == "auto" and not specials and not tok.rule_object.imported:
        fast = tok.fast_path
        if fast is not None:
            found = fast.encode_batch(texts, workers)
            if found is not None:
                return found
    if workers < 2 or len(texts) < 2 or sum(map(len, texts)) < PROCESS_MIN_CHARS:
        return [tok.encode(t, allowed_special=allowed_special, engine=engine) for t in texts]
    # Contiguous groups, a few per worker, so one long text does not hold up the rest.
    size = max(1, len(texts) // (workers * 4))
    groups = [texts[i : i + size] for i in range(0, len(texts), size)]
    allowed = "all" if allowed_special == "all" else sorted(specials)
    with ProcessPoolExecutor(
        max_workers=workers,
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_start_worker,
        initargs=(type(tok), _fields(tok)),
    ) as pool:
        results = pool.map(_encode_group, groups, [allowed] * len(groups), [engine] * len(groups))
        return [ids for group in results for ids in group]


def _fields(tok: Tokenizer) -> dict[str, Any]:
    """What the tokeniser was built from: pickled to each worker without the tables and caches
    it has derived since."""
    return {f.name: getattr(tok, f.name) for f in dataclasses.fields(tok) if f.init}


def _start_worker(cls: type[Tokenizer], fields: dict[str, Any]) -> None:
    global _worker_tokenizer
    _worker_tokenizer = cls(**fields)


def _encode_group(
    texts: list[str], allowed: Literal["all"] | list[str], engine: Engine
) -> list[list[int]]:
    tok = _worker_tokenizer
    assert tok is not None, "the worker was started without a tokeniser"
    return [tok.encode(text, allowed_special=allowed, engine=engine) for text in texts]
