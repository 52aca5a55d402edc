"""A training job's settings: the train form (or JSON) parsed and checked once, into a value.

The value is what the job row stores (as JSON), what a runner hands to `bpe.train`, and what
the job pages show; nothing downstream re-reads the form.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

import bpe
from bpe.modes import get_mode, mode_names
from bpe.training import check_vocab_fits, smallest_vocab_size
from webapp.refusals import UserError

MAX_VOCAB_SIZE = 200_000
MAX_SPECIAL_TOKENS = 100


@dataclass(frozen=True)
class JobSettings:
    mode: str = "chunked"
    pattern: str | None = "gpt4"  # None unless mode is chunked
    trainer: str = bpe.DEFAULT_TRAINER
    vocab_size: int = 1000
    min_frequency: int = 1
    special_tokens: tuple[str, ...] = field(default_factory=tuple)

    @classmethod
    def from_form(cls, form: Mapping[str, Any]) -> JobSettings:
        """Check a train form (or JSON object); UserError (422) says how to fix a field."""
        mode = str(form.get("mode") or "chunked")
        if mode not in mode_names():  # every registered mode, not a fixed list
            raise UserError(f"Mode must be one of {', '.join(mode_names())}.")
        how = get_mode(mode)
        trainer = str(form.get("trainer") or bpe.DEFAULT_TRAINER)
        if trainer not in bpe.TRAINERS:
            raise UserError(f"Trainer must be one of {', '.join(bpe.TRAINERS)}.")
        vocab_size = _int_field(form, "vocab_size", 1000, low=1, high=MAX_VOCAB_SIZE)
        min_frequency = _int_field(form, "min_frequency", 1, low=1, high=10**9)
        pattern = None
        if how.uses_pattern:
            pattern = str(form.get("pattern") or "gpt4").strip()
            if pattern == "custom":
                pattern = str(form.get("custom_pattern") or "").strip()
            try:
                bpe.resolve_pattern(pattern)
            except ValueError as exc:
                raise UserError(f"The split pattern does not work: {exc}") from None
        specials = _special_tokens(form.get("special_tokens"))
        for token in specials:
            if token in how.reserved_tokens:
                raise UserError(
                    f"{token} is {how.reserved_tokens[token]} in {mode} mode; it cannot"
                    " also be a special token."
                )
        if how.byte_level and vocab_size < 256 + len(specials):
            raise UserError(
                f"Vocab size must be at least {256 + len(specials)}: 256 byte tokens"
                f" + {len(specials)} special tokens."
            )
        return cls(mode, pattern, trainer, vocab_size, min_frequency, specials)

    @classmethod
    def from_json(cls, text: str) -> JobSettings:
        """The settings as a job row stores them (written by `to_json`)."""
        return cls.coerce(json.loads(text))

    @classmethod
    def coerce(cls, value: JobSettings | Mapping[str, Any]) -> JobSettings:
        """Settings given either as the value or as the stored dict (tests, older rows)."""
        if isinstance(value, JobSettings):
            return value
        return cls(
            mode=value["mode"],
            pattern=value.get("pattern"),
            trainer=value.get("trainer", bpe.DEFAULT_TRAINER),
            vocab_size=int(value["vocab_size"]),
            min_frequency=int(value.get("min_frequency", 1)),
            special_tokens=tuple(value.get("special_tokens") or ()),
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["special_tokens"] = list(self.special_tokens)
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False)

    def split_regex(self) -> str | None:
        """The regex chunked training splits by (None in a mode without one): the learning
        watch and the counting tasks cut the text exactly as the training does."""
        if not get_mode(self.mode).uses_pattern:
            return None
        return bpe.resolve_pattern(self.pattern or "gpt4")

    def train_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for `bpe.train` (everything but the text)."""
        kwargs: dict[str, Any] = {
            "vocab_size": self.vocab_size,
            "mode": self.mode,
            "trainer": self.trainer,
            "special_tokens": list(self.special_tokens),
            "min_frequency": self.min_frequency,
        }
        if get_mode(self.mode).uses_pattern:
            kwargs["pattern"] = self.pattern
        return kwargs


def smallest_vocab(settings: JobSettings, word_alphabet_size: int | None) -> int | None:
    """The least vocab size these settings train with on a corpus (None: its alphabet is not
    counted, so words mode's floor is not known before the trainer splits the text)."""
    if get_mode(settings.mode).uses_alphabet and word_alphabet_size is None:
        return None
    base, specials = smallest_vocab_size(
        settings.mode, settings.special_tokens, alphabet_size=word_alphabet_size
    )
    return base + specials


def check_fits_corpus(settings: JobSettings, word_alphabet_size: int | None) -> None:
    """Refuse (422), in the trainer's own words, settings the trainer would refuse on this
    corpus, so a job bound to fail is never queued."""
    if get_mode(settings.mode).uses_alphabet and word_alphabet_size is None:
        return  # not counted: the job's trainer says it (see CorpusStats)
    try:
        check_vocab_fits(
            settings.mode,
            settings.vocab_size,
            settings.special_tokens,
            alphabet_size=word_alphabet_size,
        )
    except ValueError as exc:
        raise UserError(str(exc)) from None


def parse_settings(form: Mapping[str, Any]) -> JobSettings:
    return JobSettings.from_form(form)


def _special_tokens(raw: Any) -> tuple[str, ...]:
    specials = raw or []
    if isinstance(specials, str):
        specials = [s.strip() for s in specials.replace(",", "\n").splitlines()]
    specials = [s for s in specials if isinstance(s, str) and s]
    if len(specials) > MAX_SPECIAL_TOKENS:
        raise UserError(f"At most {MAX_SPECIAL_TOKENS} special tokens, please.")
    if len(set(specials)) != len(specials):
        raise UserError("A special token is listed twice.")
    return tuple(specials)


def _int_field(form: Mapping[str, Any], name: str, default: int, *, low: int, high: int) -> int:
    raw = form.get(name)
    label = name.replace("_", " ").capitalize()
    if raw is None or raw == "":
        return default
    try:
        value = int(str(raw).strip())
    except ValueError:
        raise UserError(f"{label} must be a whole number.") from None
    if not low <= value <= high:
        raise UserError(f"{label} must be between {low} and {high}.")
    return value
