"""Byte-pair encoding: train tokenisers three ways, encode and decode exactly, save and export.

The library depends on nothing but the `regex` module; it knows nothing of the web app.

Where things live, lowest first (a module imports from its own row and those above it; the import
graph has no cycle, tests/test_layout_bpe.py):
- algorithms on plain ids and bytes: `patterns` (split regexes), `reference` (the literal
  trainer and encoder, the oracles), `encoder`, `cuts`, `stitch` (fast encoding by our rule),
  `rank_rule` and `hf_rule` (the imported files' rules), `efficient` (the incremental trainer),
  `pretokenize`, `byte_level`, `training_types`, `pacing`, `chunk_counts`, `shards` (counting
  in shards by a process pool), `scripts` (the Unicode script of a text and whether it spaces
  its words), and `hf` (HF `tokenizers`' pipeline components, one module per family, for HF
  imports);
- `batch`, `stepwise`, `tiktoken_path`: views and paths that take a tokeniser as an argument
  (they name `Tokenizer` in annotations only);
- `modes`: naive, chunked, words, each one module registered in `bpe.modes`; `rules`: merges,
  tiktoken, hf, hf_pipeline, registered in `bpe.rules` (likewise stateless, handed the tokeniser);
- `model`: the `Tokenizer`, which holds the state and asks its mode and rule;
- `training` (`train`, `train_files`), `formats` (the JSON file), `evaluate`, `languages` (a
  parallel text counted per language, docs/languages.md), `token_info`, the imports and
  exports, and `cli` on top.

Encoding has two engines with the same ids: `engine="pure"` (this package's Python encoder) and
the default, which hands a text to tiktoken (`tiktoken_path`) where that is proven to give our
ids. The fast path does not apply, and the pure encoder runs, for: texts under 2,000 characters;
mostly multi-byte naive text (Chinese, Japanese, Cyrillic...: one long piece to tiktoken, whose
loop is quadratic in a piece's length); custom split patterns and characters tiktoken's regex
engine may classify otherwise (the pieces could differ); merge lists where tiktoken's rule could
give other ids (hand-made ones only); words mode; and imported tokenisers, which keep their
file's rule (docs/algorithms.md, "Fast encoding paths").
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
