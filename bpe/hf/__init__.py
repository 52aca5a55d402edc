"""HuggingFace `tokenizers`' pipeline, one small object per component, built from the JSON of a
`tokenizer.json` (docs/imports.md lists what is supported).

A text goes: added tokens split off (`added_tokens`), the rest normalized (`normalizers`) and cut
into words (`pre_tokenizers`), each word encoded by the BPE model (`model`), the special tokens
of the post-processor put around the result on request (`post_processors`); ids come back to
text through the decoders (`decoders`). `pipeline.HfPipeline` holds one of each. A component
this package does not reproduce raises `Unsupported` naming it, never half-applied.

Nothing here imports the tokeniser: the package sits below `bpe.model`.
"""

from bpe.hf.errors import Unsupported

__all__ = ["Unsupported"]
