"""Byte-pair encoding: train tokenisers three ways, encode and decode exactly, save and export.

The library depends on nothing but the `regex` module; it knows nothing of the web app.
"""

from bpe.formats import TokenizerFileError, from_dict, load, save, to_dict
from bpe.model import END_OF_WORD, MODES, UNKNOWN, Tokenizer, TrainingStats
from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN, resolve_pattern, split_chunks
from bpe.training import DEFAULT_TRAINER, TRAINERS, train
from bpe.training_types import MergeRecord, Progress, TrainingCancelled

__all__ = [
    "DEFAULT_TRAINER",
    "END_OF_WORD",
    "GPT2_PATTERN",
    "GPT4_PATTERN",
    "MODES",
    "TRAINERS",
    "UNKNOWN",
    "MergeRecord",
    "Progress",
    "Tokenizer",
    "TokenizerFileError",
    "TrainingCancelled",
    "TrainingStats",
    "from_dict",
    "load",
    "resolve_pattern",
    "save",
    "split_chunks",
    "to_dict",
    "train",
]
