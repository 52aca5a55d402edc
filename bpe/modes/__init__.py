"""The training modes, registered in one place: naive, chunked and words.

A mode is a pre-split of text plus an alphabet of base symbols (`bpe.modes.base.TrainingMode`
says what each must provide). The trainer, the tokeniser, its file format and the stepwise
views all find a mode here by its name, so none of them branches on which mode it is.

To add a mode, write one module and register it:

1. Subclass `ByteLevelMode` (bytes as the base symbols, as naive and chunked) or
   `TrainingMode` (your own alphabet, as words), with `name`, `label`, `description` and at
   least `split(text, pattern)`; override `encode_ordinary`, `training_input` or `spans` only
   where the defaults (every piece through the chunk cache, pieces counted, pieces found in
   order) are too slow or do not fit, and `split_pattern` if one regex cuts the same pieces
   (then the exports can carry the mode). tests/test_modes.py holds such a mode: "lines".
2. Call `register_mode(YourMode())`: for a built-in mode at the bottom of this file, for a mode
   of your own before its first use. `bpe.train(text, mode=name, ...)`, `Tokenizer(mode=name)`,
   `bpe.formats` and the scrubber then take it like any other.

What the modules here may import: of `bpe`, only the algorithms on plain ids and text (the
encoder, the split patterns). Never `bpe.model`, the trainer or the formats, which all build on
this package; they hand a mode the tokeniser (or the trainer's `Splitter`) as an argument.
"""

from __future__ import annotations

from bpe.modes.base import TrainingMode
from bpe.modes.byte_symbols import ByteLevelMode
from bpe.modes.chunked import CHUNKED
from bpe.modes.naive import NAIVE
from bpe.modes.words import END_OF_WORD, UNKNOWN, WORDS

__all__ = [
    "END_OF_WORD",
    "UNKNOWN",
    "ByteLevelMode",
    "TrainingMode",
    "get_mode",
    "mode_names",
    "register_mode",
    "unregister_mode",
]

_registry: dict[str, TrainingMode] = {}  # name -> mode, in registration order


def register_mode(mode: TrainingMode) -> TrainingMode:
    """Make `mode` known by its name; returns it. Refuses a name already taken."""
    if not mode.name:
        raise ValueError(f"{type(mode).__name__} has no name: set the class attribute `name`")
    if mode.name in _registry:
        raise ValueError(f"a mode named {mode.name!r} is already registered")
    _registry[mode.name] = mode
    return mode


def unregister_mode(name: str) -> None:
    """Forget a mode registered with `register_mode` (tests register toy modes for a while)."""
    if name in _BUILT_IN:
        raise ValueError(f"{name!r} is a built-in mode and stays registered")
    _registry.pop(name, None)


def get_mode(name: str) -> TrainingMode:
    """The mode registered under `name`; a ValueError naming the known ones otherwise."""
    try:
        return _registry[name]
    except KeyError:
        raise ValueError(f"unknown mode {name!r}; choose one of {', '.join(_registry)}") from None


def mode_names() -> tuple[str, ...]:
    """Every registered mode's name, the built-in ones first."""
    return tuple(_registry)


_BUILT_IN = tuple(register_mode(mode).name for mode in (NAIVE, CHUNKED, WORDS))
