"""Byte-pair encoding: train tokenisers three ways, encode and decode exactly, save and export.

The library depends on nothing but the `regex` module; it knows nothing of the web app.

Where things live, lowest first (a module imports from its own row and those above it; the import
graph has no cycle, tests/test_layout_bpe.py):
- algorithms on plain ids and bytes: `patterns` (split regexes), `reference` (the literal
  trainer and encoder, the oracles), `encoder`, `cuts`, `stitch` (fast encoding by our rule),
  `rank_rule` and `hf_rule` (the imported files' rules), `efficient` (the incremental trainer),
  `pretokenize`, `byte_level`, `training_types`, `pacing`, `chunk_counts`, `shards` (counting
  in shards by a process pool), and `hf` (HF
  `tokenizers`' pipeline components, one module per family, for HF imports);
- `batch`, `stepwise`, `tiktoken_path`: views and paths that take a tokeniser as an argument
  (they name `Tokenizer` in annotations only);
- `modes`: naive, chunked, words, each one module registered in `bpe.modes`; `rules`: merges,
  tiktoken, hf, hf_pipeline, registered in `bpe.rules` (likewise stateless, handed the tokeniser);
- `model`: the `Tokenizer`, which holds the state and asks its mode and rule;
- `training` (`train`, `train_files`), `formats` (the JSON file), `evaluate`, `token_info`,
  the imports and exports, and `cli` on top.
"""

from bpe.formats import TokenizerFileError, from_dict, load, save, to_dict
from bpe.model import END_OF_WORD, MODES, UNKNOWN, Tokenizer, TrainingStats
from bpe.patterns import (
    GPT2_PATTERN,
    GPT4_PATTERN,
    PatternError,
    PatternRefused,
    PatternTimeout,
    resolve_pattern,
    split_chunks,
)
from bpe.training import DEFAULT_TRAINER, TRAINERS, train, train_files
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
    "PatternError",
    "PatternRefused",
    "PatternTimeout",
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
    "train_files",
]
