"""Import a HuggingFace `tokenizer.json` whose model is BPE, keeping its ids.

Two ways in, chosen by the file:
- byte-level BPE that sees the raw text (GPT-2, Llama 3, gpt-oss): `model` BPE over GPT-2's
  byte-level alphabet with all 256 bytes, no normalizer, the pre-tokenizer `ByteLevel` alone or
  after `Split` steps (Isolated, Removed), the `ByteLevel` decoder, no post-processor or
  `ByteLevel`, special added tokens without flags. These encode by rule `hf` (`bpe.hf_rule`),
  with their fast paths;
- everything else `tokenizers` does for BPE, through its whole pipeline (`bpe.hf`, rule
  `hf_pipeline`): Qwen 3, DeepSeek-V3, Llama 2 and files like them. Supported there:
  normalizers NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents, Prepend, Replace, Sequence;
  pre-tokenizers ByteLevel, Split (every behavior, invert), Metaspace, Whitespace,
  WhitespaceSplit, Punctuation, Digits, CharDelimiterSplit, Sequence; the BPE model's merges
  (either file form), byte_fallback, unk_token, fuse_unk, continuing_subword_prefix,
  end_of_word_suffix, ignore_merges; added tokens, special or not, with single_word, lstrip,
  rstrip and normalized; decoders ByteLevel, Metaspace, Replace, ByteFallback, Fuse, Strip,
  BPEDecoder, Sequence; post-processors TemplateProcessing, BertProcessing, RobertaProcessing,
  ByteLevel, Sequence (applied by `encode(..., add_special_tokens=True)`).

Anything else is refused with an `UnsupportedTokenizer` error naming the part: WordPiece,
Unigram and WordLevel models, Precompiled, NMT and Bert normalizers, other pre-tokenizers,
decoders and post-processors, BPE dropout, truncation, padding.
"""

from __future__ import annotations

import hashlib
from typing import Any

from bpe.byte_level import byte_level_bytes
from bpe.formats import TokenizerFileError, parse_json
from bpe.hf.errors import Malformed, Unsupported
from bpe.hf.pipeline import from_file, number_added_tokens
from bpe.model import ImportSource, Tokenizer
from bpe.patterns import BUILT_IN_PATTERNS, check_pattern
from bpe.pretokenize import BYTE_LEVEL_PATTERN, PreTokenizer, SplitStep


class UnsupportedTokenizer(TokenizerFileError):
    """A tokenizer.json using a part this importer does not reproduce; the message names it."""


def from_hf_json(raw: bytes | str, *, filename: str) -> Tokenizer:
    """A Tokenizer from the text of a `tokenizer.json`."""
    return from_hf_data(parse_json(raw, source=filename), raw, filename=filename)


def from_hf_data(data: Any, raw: bytes | str, *, filename: str) -> Tokenizer:
    """`from_hf_json` for a caller that has parsed `raw` already (a 27 MB file takes ~0.5 s
    to parse)."""
    if not isinstance(data, dict) or not isinstance(data.get("model"), dict):
        raise TokenizerFileError(f'{filename} is not a tokenizer.json (no "model" object)')
    raw_bytes = raw.encode("utf-8") if isinstance(raw, str) else raw
    sha256 = hashlib.sha256(raw_bytes).hexdigest()
    try:
        return _build(data, filename, sha256)
    except UnsupportedTokenizer:
        pass  # not plain byte-level BPE: the whole pipeline may still reproduce it
    try:
        return _build_pipeline(data, filename, sha256)
    except Unsupported as exc:
        raise _refuse(filename, exc.part, exc.why) from None
    except Malformed as exc:
        raise TokenizerFileError(f"{filename}: {exc}") from None


def _build_pipeline(data: dict[str, Any], filename: str, sha256: str) -> Tokenizer:
    parts = from_file(data)
    chain = data.get("pre_tokenizer")
    return Tokenizer(
        mode="naive" if chain is None else "chunked",
        merges=parts.merges,
        special_tokens=parts.added,
        pattern=_first_split_regex(chain),
        rule="hf_pipeline",
        tokens=parts.tokens,
        ignore_merges=parts.pipeline.options.ignore_merges,
        source=ImportSource(format="hf", filename=filename, sha256=sha256, name=None),
        hf_pipeline=parts.pipeline,
    )


def _first_split_regex(raw: Any) -> str | None:
    """The first Split step's regex, shown as the tokeniser's pattern (display only)."""
    if not isinstance(raw, dict):
        return None
    steps = raw.get("pretokenizers") if _type_of(raw) == "Sequence" else [raw]
    for step in steps or []:
        pattern = step.get("pattern") if _type_of(step) == "Split" else None
        if _type_of(step) == "Sequence":
            pattern = {"Regex": _first_split_regex(step)}
        if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
            return str(pattern["Regex"])
    return None


def _refuse(filename: str, part: str, why: str) -> UnsupportedTokenizer:
    return UnsupportedTokenizer(f"{filename}: {part} is not supported: {why}")


def _build(data: dict[str, Any], filename: str, sha256: str) -> Tokenizer:
    for part in ("truncation", "padding"):
        if data.get(part) is not None:
            raise _refuse(filename, part, "it changes the ids of a text; set it to null")
    normalizer = data.get("normalizer")
    if normalizer is not None:
        raise _refuse(
            filename,
            f"the normalizer ({_type_of(normalizer)})",
            "imports take byte-level BPE that sees the raw text",
        )
    model = _check_model(data["model"], filename)
    pre_tokenizer = _pre_tokenizer(data.get("pre_tokenizer"), filename)
    _check_decoder(data.get("decoder"), filename)
    _check_post_processor(data.get("post_processor"), filename)

    vocab = model["vocab"]  # str -> id
    added = _added_tokens(data.get("added_tokens") or [], vocab, filename)
    tokens: dict[int, bytes] = {}
    for text, token_id in vocab.items():
        decoded = byte_level_bytes(text)
        if decoded is None:
            if text in added:
                continue  # an added token the model also lists, e.g. "<s>": special only
            raise _refuse(
                filename,
                f"the vocabulary entry {text!r:.40}",
                "it is not spelled in the byte-level alphabet, so it stands for no bytes",
            )
        if text in added and decoded != text.encode("utf-8"):
            raise _refuse(
                filename,
                f"the added token {text!r:.40}",
                f"it is also the model's token for the bytes {decoded!r:.40}",
            )
        tokens[token_id] = decoded
    present = set(tokens.values())
    missing = [b for b in range(256) if bytes([b]) not in present]
    if missing:
        raise _refuse(
            filename,
            "a vocabulary without every single byte",
            f"{len(missing)} bytes have no token (e.g. 0x{missing[0]:02x}); byte-level BPE needs "
            "all 256",
        )
    merges = _merges(model["merges"], vocab, tokens, filename)
    uses_split = bool(pre_tokenizer.splits) or pre_tokenizer.use_regex
    display_pattern = None
    if pre_tokenizer.splits:
        display_pattern = pre_tokenizer.splits[0].pattern
    elif pre_tokenizer.use_regex:
        display_pattern = BYTE_LEVEL_PATTERN
    return Tokenizer(
        mode="chunked" if uses_split else "naive",
        merges=merges,
        special_tokens=added,
        pattern=display_pattern,
        rule="hf",
        tokens=tokens,
        pre_tokenizer=pre_tokenizer,
        ignore_merges=bool(model.get("ignore_merges", False)),
        source=ImportSource(format="hf", filename=filename, sha256=sha256, name=None),
    )


def _type_of(part: Any) -> str:
    return str(part.get("type", "untyped")) if isinstance(part, dict) else type(part).__name__


def _check_model(model: dict[str, Any], filename: str) -> dict[str, Any]:
    kind = model.get("type", "BPE" if "merges" in model else None)
    if kind != "BPE":
        raise _refuse(filename, f"a {kind or 'untyped'} model", "imports take BPE models only")
    if model.get("byte_fallback"):
        raise _refuse(
            filename, "byte_fallback", "it is SentencePiece-style BPE, not byte-level BPE"
        )
    if model.get("dropout") not in (None, 0, 0.0):
        raise _refuse(filename, "BPE dropout", "it makes encoding random")
    for key in ("continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise _refuse(filename, key, "byte-level BPE marks no word boundaries in tokens")
    vocab = model.get("vocab")
    if not isinstance(vocab, dict) or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in vocab.values()
    ):
        raise TokenizerFileError(f"{filename}: model.vocab must be an object {{token: id >= 0}}")
    if len(set(vocab.values())) != len(vocab):
        raise TokenizerFileError(f"{filename}: two vocabulary entries share an id")
    if not isinstance(model.get("merges", []), list):
        raise TokenizerFileError(f"{filename}: model.merges must be a list")
    return {**model, "merges": model.get("merges", [])}


def _pre_tokenizer(raw: Any, filename: str) -> PreTokenizer:
    if raw is None:
        raise _refuse(
            filename, "no pre-tokenizer", "byte-level BPE needs a ByteLevel pre-tokenizer"
        )
    steps = raw.get("pretokenizers") if _type_of(raw) == "Sequence" else [raw]
    if not isinstance(steps, list) or not steps:
        raise TokenizerFileError(f"{filename}: the pre-tokenizer Sequence lists no steps")
    splits: list[SplitStep] = []
    for k, step in enumerate(steps):
        kind = _type_of(step)
        last = k == len(steps) - 1
        if kind == "ByteLevel" and last:
            return PreTokenizer(
                splits=tuple(splits),
                add_prefix_space=bool(step.get("add_prefix_space", False)),
                use_regex=bool(step.get("use_regex", True)),
            )
        if kind == "Split" and not last:
            splits.append(_split_step(step, filename))
            continue
        if kind in ("ByteLevel", "Split"):
            raise _refuse(
                filename,
                f"a {kind} pre-tokenizer at step {k + 1} of {len(steps)}",
                "imports take Split steps followed by one ByteLevel, last",
            )
        raise _refuse(
            filename,
            f"the {kind} pre-tokenizer",
            "imports take ByteLevel, alone or after Split steps",
        )
    raise AssertionError("unreachable: the last step returns or raises")


def _split_step(step: dict[str, Any], filename: str) -> SplitStep:
    pattern = step.get("pattern")
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        regex_text = pattern["Regex"]
    elif isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        import regex

        regex_text = regex.escape(pattern["String"])
    else:
        raise TokenizerFileError(f"{filename}: a Split step needs a Regex or String pattern")
    try:  # a regex from a stranger's file: checked as every pattern entering the site is
        if regex_text not in BUILT_IN_PATTERNS:
            check_pattern(regex_text)
    except ValueError as exc:
        raise _refuse(filename, f"the Split regex {regex_text!r:.60}", str(exc)) from None
    behavior = step.get("behavior")
    invert = bool(step.get("invert", False))
    if behavior == "Isolated":
        return SplitStep(regex_text, "all")
    if behavior == "Removed":
        return SplitStep(regex_text, "matches" if invert else "gaps")
    raise _refuse(filename, f"the Split behavior {behavior!r}", "imports take Isolated and Removed")


def _check_decoder(raw: Any, filename: str) -> None:
    if _type_of(raw) != "ByteLevel":
        raise _refuse(
            filename,
            "no decoder" if raw is None else f"the {_type_of(raw)} decoder",
            "byte-level BPE decodes with the ByteLevel decoder",
        )


def _check_post_processor(raw: Any, filename: str) -> None:
    if raw is not None and _type_of(raw) != "ByteLevel":
        raise _refuse(
            filename,
            f"the {_type_of(raw)} post-processor",
            "it adds tokens around every text; imports take none or ByteLevel",
        )


def _added_tokens(raw: Any, vocab: dict[str, int], filename: str) -> dict[str, int]:
    """content -> id, numbered as `tokenizers` numbers them (`bpe.hf.pipeline`); tokens that
    always match (not special) or match by other rules (flags) need the whole pipeline."""
    try:
        numbered = number_added_tokens(raw, vocab)
    except Unsupported as exc:
        raise _refuse(filename, exc.part, exc.why) from None
    except Malformed as exc:
        raise TokenizerFileError(f"{filename}: {exc}") from None
    for token in numbered:
        flags = [f for f in ("lstrip", "rstrip", "single_word") if getattr(token, f)]
        if flags or not token.special:
            raise _refuse(
                filename,
                f"{(flags or ['special: false'])[0]} on the added token {token.content!r:.40}",
                "it changes where it matches",
            )
    return {token.content: token.id for token in numbered}


def _merges(
    raw: list[Any], vocab: dict[str, int], tokens: dict[int, bytes], filename: str
) -> list[tuple[int, int, int]]:
    merges: list[tuple[int, int, int]] = []
    get = vocab.get
    # Written out, without generators or temporary lists: this runs once per merge (446,189
    # for gpt-oss), and those were most of its import's time.
    for k, entry in enumerate(raw):
        if isinstance(entry, str):
            pair = entry.split(" ")
        elif isinstance(entry, list):
            pair = entry
        else:
            pair = []
        if len(pair) != 2 or not (isinstance(pair[0], str) and isinstance(pair[1], str)):
            raise TokenizerFileError(f"{filename}: merge {k} is not a pair: {entry!r:.60}")
        left, right = pair
        left_id, right_id, new_id = get(left), get(right), get(left + right)
        if left_id is None or right_id is None or new_id is None:
            raise TokenizerFileError(
                f"{filename}: merge {k} ({left!r:.30}, {right!r:.30}) uses or makes a token that "
                "is not in the vocabulary"
            )
        if left_id not in tokens or right_id not in tokens or new_id not in tokens:
            raise _refuse(
                filename, f"merge {k} ({left!r:.30}, {right!r:.30})", "it involves an added token"
            )
        merges.append((left_id, right_id, new_id))
    return merges
