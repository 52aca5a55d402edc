"""HF decoders: each rewrites the list of token strings on its way back to text; the strings
left at the end are joined.

Supported: ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, BPEDecoder and Sequence.
With no decoder `tokenizers` joins the tokens with spaces.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from bpe.byte_level import unicode_to_bytes
from bpe.hf.errors import Malformed, Unsupported, pattern_regex, type_of
from bpe.patterns import compile_pattern

DecodeChain = Callable[[list[str]], list[str]]

_BYTE_TOKEN = compile_pattern(r"<0x(\+?[0-9A-Fa-f]{1,2})>")


def _byte_level(tokens: list[str]) -> list[str]:
    table = unicode_to_bytes()
    data = bytearray()
    for token in tokens:
        try:
            data.extend(table[c] for c in token)
        except KeyError:
            data.extend(token.encode("utf-8"))  # a token outside the alphabet stands for itself
    return [data.decode("utf-8", errors="replace")]


def _byte_of(token: str) -> int | None:
    # `tokenizers` reads exactly six characters `<0xNN>` with Rust's radix-16 parse.
    if len(token) != 6:
        return None
    match = _BYTE_TOKEN.fullmatch(token)
    return int(match.group(1), 16) if match else None


def _byte_fallback(tokens: list[str]) -> list[str]:
    out: list[str] = []
    pending = bytearray()

    def flush() -> None:
        if not pending:
            return
        try:
            out.append(pending.decode("utf-8"))
        except UnicodeDecodeError:
            out.extend("\ufffd" for _ in pending)  # one per byte, as `tokenizers` gives
        pending.clear()

    for token in tokens:
        byte = _byte_of(token)
        if byte is not None:
            pending.append(byte)
            continue
        flush()
        out.append(token)
    flush()
    return out


def _fuse(tokens: list[str]) -> list[str]:
    return ["".join(tokens)]


@dataclass(frozen=True)
class _Metaspace:
    replacement: str
    prepends: bool  # prepend_scheme is not "never": the first token's marks are dropped

    def __call__(self, tokens: list[str]) -> list[str]:
        out = []
        for k, token in enumerate(tokens):
            space = "" if k == 0 and self.prepends else " "
            out.append(token.replace(self.replacement, space))
        return out


@dataclass(frozen=True)
class _Strip:
    content: str
    start: int
    stop: int

    def __call__(self, tokens: list[str]) -> list[str]:
        out = []
        for token in tokens:
            begin = 0
            while begin < min(self.start, len(token)) and token[begin] == self.content:
                begin += 1
            end = len(token)
            while len(token) - end < self.stop and end > begin and token[end - 1] == self.content:
                end -= 1
            out.append(token[begin:end])
        return out


@dataclass(frozen=True)
class _Replace:
    pattern: str
    content: str

    def __call__(self, tokens: list[str]) -> list[str]:
        compiled = compile_pattern(self.pattern)
        return [compiled.sub(lambda _m: self.content, t) for t in tokens]


@dataclass(frozen=True)
class _BpeSuffix:
    suffix: str

    def __call__(self, tokens: list[str]) -> list[str]:
        last = len(tokens) - 1
        return [t.replace(self.suffix, "" if k == last else " ") for k, t in enumerate(tokens)]


@dataclass(frozen=True)
class _Sequence:
    steps: tuple[DecodeChain, ...]

    def __call__(self, tokens: list[str]) -> list[str]:
        for step in self.steps:
            tokens = step(tokens)
        return tokens


def _join_with_spaces(tokens: list[str]) -> list[str]:
    return [" ".join(tokens)]


def build_decoder(raw: Any) -> DecodeChain:
    """The decoder a file's `decoder` JSON describes (None: tokens joined by spaces)."""
    if raw is None:
        return _join_with_spaces
    kind = type_of(raw)
    if kind == "ByteLevel":
        return _byte_level
    if kind == "ByteFallback":
        return _byte_fallback
    if kind == "Fuse":
        return _fuse
    if kind == "Metaspace":
        scheme = raw.get("prepend_scheme")
        if scheme is None:
            scheme = "always" if raw.get("add_prefix_space", True) else "never"
        return _Metaspace(str(raw.get("replacement", "\u2581")), scheme != "never")
    if kind == "Strip":
        content = raw.get("content", " ")
        if not isinstance(content, str) or len(content) != 1:
            raise Malformed("a Strip decoder's content must be one character")
        return _Strip(content, int(raw.get("start", 0)), int(raw.get("stop", 0)))
    if kind == "Replace":
        regex_text = pattern_regex(raw.get("pattern"), "a Replace decoder")
        return _Replace(regex_text, str(raw.get("content", "")))
    if kind == "BPEDecoder":
        return _BpeSuffix(str(raw.get("suffix", "</w>")))
    if kind == "Sequence":
        return _Sequence(tuple(build_decoder(step) for step in raw.get("decoders") or []))
    raise Unsupported(
        f"the {kind} decoder",
        "imports take ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip, BPEDecoder and "
        "Sequence",
    )
