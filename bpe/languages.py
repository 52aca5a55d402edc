"""Which languages pay more: one parallel text in many languages, counted by tokenisers.

The parallel text is the Universal Declaration of Human Rights, the same preamble and 30
articles in every language, as a folder of `CODE.txt` files (title, headings and paragraphs,
one a line) and an `index.json` (`code`, `name`, `bcp47`, `iso6393`, `direction`, `stage`;
stage 4-5 is a complete text) (docs/languages.md says how to get it). For each language and
tokeniser:

- tokens: `tok.encode(text)`, ordinary text (special tokens are not recognised), as
  tiktoken's `encode_ordinary` and HF `tokenizers`' `encode(text, add_special_tokens=False)`;
- bytes per token (UTF-8 bytes of the text / tokens);
- the premium: tokens in the language / tokens of the same text in English (`eng`), the
  "tokenization premium" of Petrov et al. (NeurIPS 2023). 1.0 is English's price; 3.0 means the
  same declaration costs three times the tokens, so three times the money and a third of the
  context window;
- tokens per word where the language separates words with spaces, else tokens per character
  (`bpe.scripts`), each labelled as what it is.

>>> import bpe
>>> tok = bpe.Tokenizer(mode="naive", merges=[(104, 105, 256)])
>>> texts = [Language("eng", "English", "hi hi"), Language("xyz", "Other", "hé hé")]
>>> table = measure({"toy": tok}, texts)
>>> [(row.code, row.tokens["toy"], row.premium("toy", table.baseline)) for row in table.rows]
[('eng', 3, 1.0), ('xyz', 7, 2.3333333333333335)]
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bpe.scripts import Writing, writing

if TYPE_CHECKING:
    from bpe.model import Tokenizer

BASELINE = "eng"  # the code whose token count is the premium's denominator
COMPLETE_STAGE = 4  # the Unicode UDHR project's stages 4 and 5: the whole text
MAX_TEXT_BYTES = 1_000_000  # a declaration is 5-60 kB; anything larger is not one
_CODE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{0,63}")


class ParallelTextError(ValueError):
    """A folder that is not a parallel text as `read_parallel_text` reads it; says what is wrong."""


class LanguagesCancelled(Exception):
    """`should_stop()` returned True."""


@dataclass(frozen=True)
class Language:
    code: str  # the file's code: "eng", "cmn_hans", "arb"
    name: str
    text: str
    bcp47: str = ""
    iso6393: str = ""
    direction: str = "ltr"  # ltr, rtl or ttb
    stage: int = 5

    @property
    def complete(self) -> bool:
        return self.stage >= COMPLETE_STAGE


def parse_index(raw: bytes, *, source: str = "index.json") -> list[dict[str, Any]]:
    """The index's entries, each checked: a code that is a safe file name, a name, a stage."""
    try:
        entries = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ParallelTextError(f"{source} is not JSON ({exc})") from None
    if not isinstance(entries, list):
        raise ParallelTextError(f"{source} must be a list of languages, one object each")
    checked = []
    for n, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ParallelTextError(f"{source}: entry {n} is not an object")
        code, name, stage = entry.get("code"), entry.get("name"), entry.get("stage", 0)
        if not isinstance(code, str) or not _CODE.fullmatch(code):
            raise ParallelTextError(
                f"{source}: entry {n} has code {code!r}; a code is letters, digits, _ and -"
            )
        if name is None:
            name = code  # the package leaves a few unnamed (kek, lns, quc)
        if not isinstance(name, str) or not isinstance(stage, int) or isinstance(stage, bool):
            raise ParallelTextError(f"{source}: entry {code} needs a name (text), a stage (int)")
        checked.append(
            {
                "code": code,
                "name": name[:200],
                "bcp47": str(entry.get("bcp47") or "")[:64],
                "iso6393": str(entry.get("iso6393") or "")[:16],
                "direction": str(entry.get("direction") or "ltr")[:8],
                "stage": stage,
            }
        )
    return checked


def read_parallel_text(directory: Path | str, *, complete_only: bool = True) -> list[Language]:
    """The languages of a folder of `CODE.txt` files and their `index.json`, in the index's
    order; only complete texts (stage 4-5) unless `complete_only=False`."""
    folder = Path(directory)
    try:
        raw = (folder / "index.json").read_bytes()
    except OSError as exc:
        raise ParallelTextError(
            f"cannot read {folder / 'index.json'} ({exc.strerror}): give the folder that "
            "make_udhr.sh wrote (CODE.txt files and index.json)"
        ) from None
    languages = []
    for entry in parse_index(raw, source=str(folder / "index.json")):
        if complete_only and entry["stage"] < COMPLETE_STAGE:
            continue
        path = folder / f"{entry['code']}.txt"
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise ParallelTextError(f"cannot read {path} ({exc.strerror})") from None
        languages.append(Language(text=decode_text(data, source=str(path)), **entry))
    if not languages:
        raise ParallelTextError(f"{folder}: the index lists no complete text (stage 4-5)")
    return languages


def decode_text(data: bytes, *, source: str) -> str:
    if len(data) > MAX_TEXT_BYTES:
        raise ParallelTextError(f"{source} is larger than {MAX_TEXT_BYTES:,} bytes")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ParallelTextError(f"{source} is not UTF-8 (byte {exc.start})") from None


@dataclass
class LanguageRow:
    """One language's figures: its own, then each tokeniser's token count."""

    code: str
    name: str
    script: str | None
    spaced: bool  # words separated by spaces: tokens per word means something
    bytes: int
    characters: int
    words: int  # whitespace-separated
    tokens: dict[str, int] = field(default_factory=dict)  # tokeniser name -> tokens

    def bytes_per_token(self, name: str) -> float | None:
        n = self.tokens.get(name)
        return self.bytes / n if n else None

    def premium(self, name: str, baseline: LanguageRow | None) -> float | None:
        """Tokens here / tokens for the baseline language (English) by the same tokeniser."""
        n = self.tokens.get(name)
        base = baseline.tokens.get(name) if baseline is not None else None
        return n / base if n is not None and base else None

    def fertility(self, name: str) -> tuple[str, float | None]:
        """("tokens/word", value) where words are spaced, else ("tokens/char", value)."""
        n = self.tokens.get(name)
        if self.spaced:
            return "tokens/word", (n / self.words if n is not None and self.words else None)
        return "tokens/char", (n / self.characters if n is not None and self.characters else None)


@dataclass
class LanguageTable:
    names: list[str]  # the tokenisers, in the order asked
    rows: list[LanguageRow]
    seconds: float = 0.0

    @property
    def baseline(self) -> LanguageRow | None:
        return next((row for row in self.rows if row.code == BASELINE), None)


def describe(language: Language) -> LanguageRow:
    """A language's own figures (no tokens yet)."""
    how: Writing = writing(language.text)
    return LanguageRow(
        code=language.code,
        name=language.name,
        script=how.script,
        spaced=how.spaced,
        bytes=len(language.text.encode("utf-8", errors="surrogatepass")),
        characters=len(language.text),
        words=len(language.text.split()),
    )


def count_tokens(tok: Tokenizer, text: str) -> int:
    """Tokens of `text` as ordinary text: special tokens are not recognised."""
    return len(tok.encode(text))


def measure(
    tokenizers: Mapping[str, Tokenizer],
    languages: Sequence[Language],
    *,
    progress: Callable[[int, int], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> LanguageTable:
    """Every language counted by every tokeniser; `progress(done, total)` after each count
    (total: languages x tokenisers), `should_stop()` polled there (True raises
    LanguagesCancelled)."""
    started = time.perf_counter()
    rows = [describe(language) for language in languages]
    total, done = len(rows) * len(tokenizers), 0
    for name, tok in tokenizers.items():
        for row, language in zip(rows, languages, strict=True):
            row.tokens[name] = count_tokens(tok, language.text)
            done += 1
            if progress is not None:
                progress(done, total)
            if should_stop is not None and should_stop():
                raise LanguagesCancelled("stopped on request")
    return LanguageTable(list(tokenizers), rows, time.perf_counter() - started)


def extremes(
    table: LanguageTable, name: str, *, count: int = 5
) -> tuple[list[LanguageRow], list[LanguageRow]]:
    """The `count` languages with the highest premium (worst) and the lowest (best) for one
    tokeniser; ties by code."""
    base = table.baseline
    priced = [row for row in table.rows if row.premium(name, base) is not None]
    ranked = sorted(priced, key=lambda row: (row.premium(name, base), row.code))
    return ranked[::-1][:count], ranked[:count]


CSV_COLUMNS = (
    "code",
    "name",
    "script",
    "spaced",
    "bytes",
    "characters",
    "words",
    "tokenizer",
    "tokens",
    "bytes_per_token",
    "premium",
    "fertility_unit",
    "fertility",
)


def long_rows(table: LanguageTable) -> Iterable[dict[str, Any]]:
    """One record per (language, tokeniser), the CSV's and the JSON's shape."""
    base = table.baseline
    for row in table.rows:
        for name in table.names:
            if name not in row.tokens:
                continue
            unit, value = row.fertility(name)
            yield {
                "code": row.code,
                "name": row.name,
                "script": row.script,
                "spaced": row.spaced,
                "bytes": row.bytes,
                "characters": row.characters,
                "words": row.words,
                "tokenizer": name,
                "tokens": row.tokens[name],
                "bytes_per_token": row.bytes_per_token(name),
                "premium": row.premium(name, base),
                "fertility_unit": unit,
                "fertility": value,
            }
