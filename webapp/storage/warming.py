"""Loading tokenisers before anyone asks: one thread per process that loads, in turn, the
tokenisers it is handed into `storage/convert.py`'s cache.

A stored GPT-4o or gpt-oss takes 1-2 s to load from its 400,000 rows, and the home page counts
its text in every model the site offers: a process that had to load them all inside one
request answered its first visitor after ~10 s. The home page now counts only what is loaded
and hands the rest to this thread (`rendering/model_counts.py`), and the README's server hands
it the site's models as it starts (`webapp/__init__.py`). The thread is a daemon: it holds
nothing but the cache, so it ends with its process.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterable

from webapp.storage.convert import load_tokenizer_by_id, loaded_tokenizer
from webapp.storage.db import Database

log = logging.getLogger(__name__)

Key = tuple[int, str]  # a tokeniser's id and slug, as convert's cache knows it


class Warmer:
    """Loads the tokenisers it is given, one at a time, oldest request first; each only once
    however often it is asked for while it waits."""

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[tuple[Database, Key]] = queue.SimpleQueue()
        self._waiting: set[Key] = set()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def warm(self, database: Database, keys: Iterable[Key]) -> None:
        """Queue those not loaded yet nor waiting already."""
        with self._lock:
            for key in keys:
                if key in self._waiting or loaded_tokenizer(*key) is not None:
                    continue
                self._waiting.add(key)
                self._queue.put((database, key))
            if self._waiting and (self._thread is None or not self._thread.is_alive()):
                self._thread = threading.Thread(target=self._run, name="bpe-warm", daemon=True)
                self._thread.start()

    def waiting(self) -> int:
        """How many are queued or loading now."""
        with self._lock:
            return len(self._waiting)

    def _run(self) -> None:
        while True:
            database, key = self._queue.get()
            try:
                with database.read_scope() as session:
                    load_tokenizer_by_id(session, *key)
            except Exception:  # a damaged or deleted row: the page that wants it will say so
                log.exception("could not load tokeniser %s in the background", key[1])
            finally:
                with self._lock:
                    self._waiting.discard(key)


WARMER = Warmer()  # the process's one
