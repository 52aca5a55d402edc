"""The rule of HF imports that need `tokenizers`' whole pipeline (`bpe.hf`): a normalizer,
pre-tokenizers other than Split and ByteLevel, SentencePiece-style vocabularies, added tokens
with flags. The tokeniser's `hf_pipeline` does all the work; this rule hands text to it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Literal

from bpe.modes.base import PieceEncoder
from bpe.rules.base import BytesEncoder, ImportedRule

if TYPE_CHECKING:
    from bpe.hf.pipeline import HfPipeline
    from bpe.model import Engine, Tokenizer


def pipeline_of(tok: Tokenizer) -> HfPipeline:
    if tok.hf_pipeline is None:
        raise ValueError("an hf_pipeline tokeniser needs its pipeline (Tokenizer.hf_pipeline)")
    return tok.hf_pipeline


class HfPipelineRule(ImportedRule):
    name = "hf_pipeline"
    # The file's own pipeline is written back (`HfPipeline.to_file`), whatever cuts its text.
    export_targets = frozenset({"hf"})
    exports_own_pipeline = True

    def encode_ordinary(self, tok: Tokenizer, text: str, engine: Engine) -> list[int]:
        pipeline = pipeline_of(tok)
        return pipeline.encode(text, skip=pipeline.skipped(()))

    def piece_encoder(self, tok: Tokenizer) -> PieceEncoder:
        pipeline = pipeline_of(tok)

        def encode(_tok: Tokenizer, piece: str) -> list[int]:
            return pipeline.encode_piece(piece)

        return encode

    def encode_new_piece(self, tok: Tokenizer, data: bytes) -> list[int]:
        return pipeline_of(tok).encode_piece(data.decode("utf-8"))

    def limited_encoder(self, tok: Tokenizer, merge_limit: int) -> BytesEncoder:
        model = pipeline_of(tok).model
        table = limited_table(tok, merge_limit)

        def encode(data: bytes) -> list[int]:
            return model.tokenize_with(data.decode("utf-8"), table, ignore_merges=False)

        return encode

    def encode_limited(
        self,
        tok: Tokenizer,
        text: str,
        merge_limit: int,
        allowed_special: Literal["all"] | Iterable[str],
    ) -> list[int]:
        pipeline = pipeline_of(tok)
        allowed = tok._allowed_specials(allowed_special).values()
        return pipeline.encode(
            text, skip=pipeline.skipped(allowed), merges=limited_table(tok, merge_limit)
        )


def limited_table(tok: Tokenizer, merge_limit: int) -> dict[tuple[int, int], tuple[int, int]]:
    return {
        (left, right): (rank, new)
        for rank, (left, right, new) in enumerate(tok.merges[: max(merge_limit, 0)])
    }


HF_PIPELINE = HfPipelineRule()
