"""The stages before the merges of an import run through HF's whole pipeline (rule
`hf_pipeline`, docs/imports.md), for "why this split?": where one token of a text comes from.

`tokenizers` cuts the text around the added tokens matched in the raw text, normalizes each
stretch between them, cuts out the added tokens matched in the normalized text, splits what is
left into words with the pre-tokenizer, and encodes each word with the BPE model.
`bpe.Tokenizer.pipeline_trace` keeps each of those steps; this module finds the step that holds
the clicked token and what the panel shows of its neighbours, windowed so a long text shows a
bounded panel. The merges of the word are replayed by `webapp.rendering.segmentation`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import bpe
from bpe.hf.pipeline import StretchTrace, WordTrace

STAGE_MAX_CHARS = 400  # of a stretch's text (before and after normalizing) shown in the panel
STAGE_MAX_PARTS = 24  # of the neighbouring stretches, segments or words listed


@dataclass(frozen=True)
class Part:
    """One piece of a stage's output: a stretch, a segment or a word; `token` for an added
    token cut out whole, `current` for the one the clicked token is in."""

    text: str
    token: bool
    current: bool


@dataclass(frozen=True)
class Parts:
    """A window of a stage's pieces around the current one, and how many were left out."""

    parts: list[Part]
    before: int
    after: int
    total: int


@dataclass(frozen=True)
class PipelineStages:
    normalizer: str | None  # the normalizer's components, as named in the file
    pre_tokenizer: str | None
    stretches: Parts  # the text cut around the added tokens matched before normalizing
    raw: str  # the current stretch, then what the normalizer made of it (both cut)
    normalized: str
    raw_cut: int  # characters of the stretch left out of `raw`, and of `normalized`
    normalized_cut: int
    segments: Parts  # the normalized stretch cut around the added tokens matched in it
    words: Parts  # the current segment's words
    added: bool  # the clicked token is an added token, matched whole
    added_where: str  # "raw" (before normalizing) or "normalized"


@dataclass(frozen=True)
class Located:
    """The word holding the clicked token, the index of its first token in the text's
    encoding, and the stages that led to it."""

    word: WordTrace
    first: int
    stages: PipelineStages


def locate(
    tok: bpe.Tokenizer,
    text: str,
    token_index: int,
    *,
    allowed_special: str | Sequence[str] = (),
    merge_limit: int | None = None,
) -> Located | None:
    """The word of `tok.encode(text, ...)`'s token `token_index`, None if there is none."""
    if token_index < 0:
        return None
    trace = tok.pipeline_trace(text, allowed_special=allowed_special, merge_limit=merge_limit)
    first = 0
    for s, stretch in enumerate(trace):
        for g, segment in enumerate(stretch.segments):
            for w, word in enumerate(segment.words):
                if token_index >= first + len(word.ids):
                    first += len(word.ids)
                    continue
                return Located(word, first, _stages(tok, trace, s, g, w))
    return None


def _stages(
    tok: bpe.Tokenizer, trace: list[StretchTrace], s: int, g: int, w: int
) -> PipelineStages:
    stretch = trace[s]
    segment = stretch.segments[g]
    word = segment.words[w]
    pipeline = tok.hf_pipeline
    components = pipeline.components if pipeline is not None else {}
    raw, raw_cut = _cut(stretch.raw)
    normalized, normalized_cut = _cut(stretch.normalized)
    return PipelineStages(
        normalizer=component_label(components.get("normalizer")),
        pre_tokenizer=component_label(components.get("pre_tokenizer")),
        stretches=_window([(t.raw, t.token_id is not None) for t in trace], s),
        raw=raw,
        normalized=normalized,
        raw_cut=raw_cut,
        normalized_cut=normalized_cut,
        segments=_window([(t.text, t.token_id is not None) for t in stretch.segments], g),
        words=_window([(t.text, t.added_id is not None) for t in segment.words], w),
        added=word.added_id is not None,
        added_where="raw" if stretch.token_id is not None else "normalized",
    )


def _cut(text: str) -> tuple[str, int]:
    if len(text) <= STAGE_MAX_CHARS:
        return text, 0
    return text[:STAGE_MAX_CHARS], len(text) - STAGE_MAX_CHARS


def _window(items: list[tuple[str, bool]], current: int) -> Parts:
    """At most STAGE_MAX_PARTS of the items, the current one among them; long texts cut."""
    lo = max(0, min(current - STAGE_MAX_PARTS // 2, len(items) - STAGE_MAX_PARTS))
    hi = min(len(items), lo + STAGE_MAX_PARTS)
    parts = [
        Part(_cut(text)[0], token, index == current)
        for index, (text, token) in enumerate(items[lo:hi], start=lo)
    ]
    return Parts(parts, before=lo, after=len(items) - hi, total=len(items))


def component_label(raw: Any) -> str | None:
    """A component's type as the file names it, a Sequence's steps in brackets.

    >>> component_label({"type": "Sequence", "normalizers": [{"type": "Prepend"}, {"type": "NFC"}]})
    'Sequence [Prepend, NFC]'
    >>> component_label({"type": "Sequence", "normalizers": []})
    'Sequence []'
    >>> component_label(None) is None
    True
    """
    if not isinstance(raw, dict):
        return None
    kind = str(raw.get("type", "?"))
    steps = raw.get("normalizers", raw.get("pretokenizers"))  # an empty Sequence is "[]"
    if kind == "Sequence" and isinstance(steps, list):
        return f"Sequence [{', '.join(component_label(step) or '?' for step in steps)}]"
    return kind


@dataclass(frozen=True)
class PipelineLabels:
    """What an import run through HF's whole pipeline does before its merges, for its header:
    a single regex would misname it (Llama 2 has none, DeepSeek-V3 several)."""

    normalizer: str | None
    pre_tokenizer: str | None


def pipeline_labels(row: Any) -> PipelineLabels | None:
    """The labels of a stored tokeniser's normalizer and pre-tokenizer, read from its saved
    header (`hf_pipeline`, docs/imports.md); None for any other tokeniser."""
    if row.encode_rule != "hf_pipeline" or not row.document:
        return None
    components = json.loads(row.document).get("hf_pipeline") or {}
    return PipelineLabels(
        normalizer=component_label(components.get("normalizer")),
        pre_tokenizer=component_label(components.get("pre_tokenizer")),
    )
