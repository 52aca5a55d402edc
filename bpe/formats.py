"""The project's own tokeniser file: versioned JSON that round-trips exactly.

Documented top-level keys (a public contract: keys may be added, never renamed):
- `format`: always "bpe-workbench.tokenizer"; `version`: 1.
- `mode`: "naive", "chunked" or "words".
- `pattern`: the split regex (chunked mode), otherwise null.
- `merges`: a list of [left_id, right_id, new_id] in learned order.
- `special_tokens`: {token: id}.
- `alphabet`: words mode's characters in id order, otherwise null.
- `training`: how it was trained (trainer, vocab_size, min_frequency, initial_tokens,
  merge_counts, tokens_after, seconds), or null.

Imported tokenisers (tiktoken or HF files, see `bpe.importers`) add these keys, and only they
have them; their ids are the file's own, so the id rules above do not apply to them:
- `rule`: "tiktoken", "hf" or "hf_pipeline", how encoding works;
- `tokens`: every ordinary token as [id, hex of its bytes], ids ascending (holes allowed);
- `merges`: [left_id, right_id, new_id] for display (HF: the file's, in rank order; tiktoken:
  derived); each new id's bytes are its parts' bytes joined;
- `special_tokens`: {token: id} with the file's ids;
- `pre_tokenizer`: HF only, {"splits": [{"pattern", "keep": "matches"|"all"|"gaps"}],
  "add_prefix_space", "use_regex"}; `ignore_merges`: HF's flag;
- `source`: {"format": "tiktoken"|"hf", "filename", "sha256", "name"};
- `hf_pipeline`: rule "hf_pipeline" only, HF's components (`bpe.hf.pipeline`): the file's
  own `normalizer`, `pre_tokenizer`, `decoder` and `post_processor` JSON, the `model`'s
  options, `added_tokens` with their flags and ids, `spelling` ("byte_level": tokens hold
  bytes; "text": the UTF-8 of HF's token text) and `model_extra` ({text: id} of model entries
  that are not ordinary tokens). These tokenisers need not have every single byte, and their
  merges' bytes need not join (a continuing-subword prefix is cut where parts join).
- `chat_template`: only when the model's `tokenizer_config.json` has one (any tokeniser may
  carry it): {"template": its Jinja text, "bos_token", "eos_token": their texts or null}, what
  `bpe.chat` renders a conversation with (docs/chat.md).

The same structure is kept in two parts where a file is not the store: `header_dict` (every key
but the lists with one entry per merge or token) and `bulk_parts` (`merges`, `tokens`,
training's `merge_counts` and `tokens_after`). The web app's database holds the header as one
JSON document and the bulk as rows; `from_parts` rebuilds a Tokenizer from them through the
same checks as `from_dict`, so a corrupt row is refused like a corrupt file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

from bpe.model import ImportSource, Mode, Tokenizer, TrainingStats
from bpe.modes import TrainingMode, get_mode, mode_names
from bpe.patterns import check_stored_pattern
from bpe.pretokenize import KEEPS, PreTokenizer, SplitStep
from bpe.rules import ImportedRule, get_rule, rule_names

FORMAT_NAME = "bpe-workbench.tokenizer"
FORMAT_VERSION = 1


class TokenizerFileError(ValueError):
    """A tokeniser file that is unreadable, foreign or inconsistent; the message says which."""


def to_dict(tok: Tokenizer) -> dict[str, Any]:
    """The whole file's JSON structure: the header and the lists that grow with the vocabulary."""
    return join_parts(header_dict(tok), **bulk_parts(tok))


def header_dict(tok: Tokenizer) -> dict[str, Any]:
    """`to_dict` without its bulk (see `bulk_parts`): what a database keeps as one document
    beside its merge and vocabulary rows. `from_parts` puts the two back together."""
    training = None
    if tok.training is not None:
        t = tok.training
        training = {
            "trainer": t.trainer,
            "vocab_size": t.vocab_size,
            "min_frequency": t.min_frequency,
            "initial_tokens": t.initial_tokens,
            "seconds": t.seconds,
        }
    data: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "mode": tok.mode,
        "pattern": tok.pattern,
        "special_tokens": dict(tok.special_tokens),
        "alphabet": list(tok.alphabet) if tok.alphabet is not None else None,
        "training": training,
    }
    if tok.tokens is not None:
        data.update(_imported_keys(tok))
    if tok.chat_template is not None:  # only then: files without one stay byte for byte
        data["chat_template"] = tok.chat_template.to_json()
    return data


def _imported_keys(tok: Tokenizer) -> dict[str, Any]:
    source = tok.source
    pipeline = {} if tok.hf_pipeline is None else {"hf_pipeline": tok.hf_pipeline.to_json()}
    return {
        **pipeline,
        "rule": tok.rule,
        "pre_tokenizer": tok.pre_tokenizer.to_dict() if tok.pre_tokenizer is not None else None,
        "ignore_merges": tok.ignore_merges,
        "source": None
        if source is None
        else {
            "format": source.format,
            "filename": source.filename,
            "sha256": source.sha256,
            "name": source.name,
        },
    }


# The file's keys in the order `dumps` writes them, which files saved before the header was
# split from the bulk keep (tests/saved_tokenizers): `join_parts` restores it.
FILE_KEYS = (
    "format",
    "version",
    "mode",
    "pattern",
    "merges",
    "special_tokens",
    "alphabet",
    "training",
    "rule",
    "tokens",
    "pre_tokenizer",
    "ignore_merges",
    "source",
    "hf_pipeline",
    "chat_template",
)
TRAINING_KEYS = (
    "trainer",
    "vocab_size",
    "min_frequency",
    "initial_tokens",
    "merge_counts",
    "tokens_after",
    "seconds",
)


def bulk_parts(tok: Tokenizer) -> dict[str, Any]:
    """The lists of the file with one entry per merge or token, as `join_parts` takes them:
    `merges`, `tokens` (imported only, else None), `merge_counts` and `tokens_after`
    (training's, else None)."""
    training = tok.training
    return {
        "merges": [[left, right, new] for left, right, new in tok.merges],
        "tokens": None
        if tok.tokens is None
        else [[i, data.hex()] for i, data in sorted(tok.tokens.items())],
        "merge_counts": None if training is None else list(training.merge_counts),
        "tokens_after": None if training is None else list(training.tokens_after),
    }


def join_parts(
    header: dict[str, Any],
    *,
    merges: list[Any],
    tokens: list[Any] | None = None,
    merge_counts: list[Any] | None = None,
    tokens_after: list[Any] | None = None,
) -> dict[str, Any]:
    """The file's structure from a header and its bulk, keys in the file's order (keys the
    header has beyond FILE_KEYS come last). The bulk is not checked here: `from_dict` does."""
    data = {**header, "merges": merges}
    if tokens is not None:
        data["tokens"] = tokens
    training = header.get("training")
    if isinstance(training, dict):
        whole = {**training, "merge_counts": merge_counts, "tokens_after": tokens_after}
        data["training"] = _in_order(whole, TRAINING_KEYS)
    return _in_order(data, FILE_KEYS)


def _in_order(data: dict[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    ordered = {key: data[key] for key in keys if key in data}
    ordered.update((key, value) for key, value in data.items() if key not in ordered)
    return ordered


def is_imported_header(header: Any) -> bool:
    """Whether a header (or a whole file's structure) is an imported tokeniser's, whose
    ordinary tokens are part of its bulk: the test `from_dict` makes."""
    return isinstance(header, dict) and ("rule" in header or "tokens" in header)


def from_parts(
    header: Any,
    *,
    merges: list[Any],
    tokens: list[Any] | None = None,
    merge_counts: list[Any] | None = None,
    tokens_after: list[Any] | None = None,
    source: str = "the tokeniser file",
) -> Tokenizer:
    """A Tokenizer from `header_dict`'s header and its bulk, through `from_dict`'s checks, so a
    corrupt header or bulk is refused as a corrupt file is. Entries may be tuples, and `tokens`
    (id, bytes) pairs instead of [id, hex] (as a database's rows hold them)."""
    if not isinstance(header, dict):
        return from_dict(header, source=source)  # refused there, as the file would be
    data = join_parts(
        header,
        merges=merges,
        tokens=tokens,
        merge_counts=merge_counts,
        tokens_after=tokens_after,
    )
    return from_dict(data, source=source)


def dumps(tok: Tokenizer) -> str:
    return json.dumps(to_dict(tok), ensure_ascii=False, separators=(",", ":"))


def save(tok: Tokenizer, path: str | os.PathLike[str]) -> None:
    """Write the tokeniser's JSON file (through a temporary file, so a crash leaves no half)."""
    target = Path(path)
    temporary = target.with_name(target.name + ".tmp")
    temporary.write_text(dumps(tok), encoding="utf-8")
    os.replace(temporary, target)


def load(path: str | os.PathLike[str]) -> Tokenizer:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise TokenizerFileError(f"cannot read {path}: {exc.strerror}") from None
    return loads(raw, source=str(path))


def loads(raw: str | bytes, *, source: str = "the tokeniser file") -> Tokenizer:
    return from_dict(parse_json(raw, source=source), source=source)


def parse_json(raw: str | bytes, *, source: str) -> Any:
    """JSON text -> data, every failure a TokenizerFileError that names the source."""
    try:
        return json.loads(raw)
    except UnicodeDecodeError:
        raise TokenizerFileError(f"{source} is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise TokenizerFileError(
            f"{source} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg})"
        ) from None
    except RecursionError:
        raise TokenizerFileError(f"{source} is nested too deeply") from None


def from_dict(data: Any, *, source: str = "the tokeniser file") -> Tokenizer:
    """Build a Tokenizer from the JSON structure, checking every field it relies on."""
    tok = _from_dict(data, source=source)
    raw = data.get("chat_template")
    if raw is not None:
        # Loaded here, not with `bpe`: only imported tokenisers carry a chat template.
        from bpe.chat_types import ChatError, ChatTemplate

        try:
            tok.chat_template = ChatTemplate.from_json(raw)
        except ChatError as exc:
            raise TokenizerFileError(f"{source}: {exc}") from None
    return tok


def _from_dict(data: Any, *, source: str) -> Tokenizer:
    def fail(problem: str) -> TokenizerFileError:
        return TokenizerFileError(f"{source}: {problem}")

    if not isinstance(data, dict):
        raise fail("expected a JSON object at the top level")
    if data.get("format") != FORMAT_NAME:
        if "model" in data and "pre_tokenizer" in data:
            raise fail("this is a HuggingFace tokenizer.json, not a BPE Workbench tokeniser")
        raise fail(f'not a BPE Workbench tokeniser (no "format": "{FORMAT_NAME}")')
    if data.get("version") != FORMAT_VERSION:
        raise fail(f"unsupported version {data.get('version')!r}; this library reads version 1")
    names = mode_names()
    mode = data.get("mode")
    if mode not in names:
        raise fail(f"mode must be one of {', '.join(names)}, not {mode!r}")
    training_mode = get_mode(mode)
    if "rule" in data or "tokens" in data:
        return _imported_from_dict(data, training_mode, fail)

    pattern = data.get("pattern")
    if training_mode.uses_pattern:
        if not isinstance(pattern, str) or not pattern:
            raise fail(f"a {mode} tokeniser needs its split pattern (a string)")
        try:
            check_stored_pattern(pattern)
        except ValueError as exc:
            raise fail(str(exc)) from None
    elif pattern is not None:
        raise fail(f"pattern must be null in {mode} mode")

    alphabet = data.get("alphabet")
    if training_mode.uses_alphabet:
        if not isinstance(alphabet, list) or not all(
            isinstance(c, str) and len(c) == 1 for c in alphabet
        ):
            raise fail(f"a {mode} tokeniser needs its alphabet (a list of single characters)")
        if len(set(alphabet)) != len(alphabet):
            raise fail("the alphabet repeats a character")
    elif alphabet is not None:
        raise fail(f"alphabet must be null in {mode} mode")
    base = training_mode.base_size(len(alphabet or []))

    merges = _check_merges(data.get("merges"), base, fail)
    specials = _check_specials(data.get("special_tokens"), base + len(merges), training_mode, fail)
    training = _check_training(data.get("training"), len(merges), fail)
    return Tokenizer(
        mode=mode,
        merges=merges,
        special_tokens=specials,
        pattern=pattern,
        alphabet=alphabet,
        training=training,
    )


# Builds the error that names the file and the problem (see load's `fail`).
_Fail = Callable[[str], TokenizerFileError]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _three_ints(entry: Any) -> bool:
    # Plain ints by their exact type first, unrolled: a stored tokeniser's merges (200,000 for
    # an imported o200k_base) are checked like a file's on every load.
    left, right, new = entry
    return (type(left) is int and type(right) is int and type(new) is int) or all(
        map(_is_int, entry)
    )


# A JSON list, or the tuple a database row gives (from_parts).
_SEQUENCE = (list, tuple)


def _check_merges(raw: Any, base: int, fail: _Fail) -> list[tuple[int, int, int]]:
    if not isinstance(raw, list):
        raise fail("merges must be a list of [left_id, right_id, new_id]")
    merges: list[tuple[int, int, int]] = []
    for k, entry in enumerate(raw):
        if not (isinstance(entry, _SEQUENCE) and len(entry) == 3 and _three_ints(entry)):
            raise fail(f"merge {k} is not [left_id, right_id, new_id] integers: {entry!r}")
        left, right, new = entry
        if new != base + k:
            raise fail(f"merge {k} should create id {base + k}, not {new}")
        if not (0 <= left < new and 0 <= right < new):
            raise fail(f"merge {k} uses an id that does not exist yet: {entry!r}")
        merges.append((left, right, new))
    if len({(m[0], m[1]) for m in merges}) != len(merges):
        raise fail("the same pair is merged twice")
    return merges


def _check_specials(raw: Any, first_id: int, mode: TrainingMode, fail: _Fail) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise fail("special_tokens must be an object {token: id}")
    specials: dict[str, int] = {}
    for i, (token, token_id) in enumerate(raw.items()):
        if not token or not _is_int(token_id):
            raise fail(f"special token {token!r} needs a non-empty name and an integer id")
        if token_id != first_id + i:
            raise fail(
                f"special token {token!r} has id {token_id}; special tokens take the ids right"
                f" after the last merge, so it should be {first_id + i}"
            )
        specials[token] = token_id
    for required in mode.required_special_tokens:
        if required not in specials:
            raise fail(f"a {mode.name} tokeniser needs the {required!r} special token")
    for reserved in mode.reserved_tokens:
        if reserved in specials:
            raise fail(f"{reserved!r} cannot be a special token in {mode.name} mode")
    return specials


def _check_training(raw: Any, merge_count: int, fail: _Fail) -> TrainingStats | None:
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise fail("training must be an object or null")
    try:
        stats = TrainingStats(
            trainer=str(raw["trainer"]),
            vocab_size=int(raw["vocab_size"]),
            min_frequency=int(raw["min_frequency"]),
            initial_tokens=int(raw["initial_tokens"]),
            merge_counts=[int(x) for x in raw["merge_counts"]],
            tokens_after=[int(x) for x in raw["tokens_after"]],
            seconds=None if raw.get("seconds") is None else float(raw["seconds"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise fail(f"training is incomplete or malformed ({exc!r})") from None
    if len(stats.merge_counts) != merge_count or len(stats.tokens_after) != merge_count:
        raise fail("training.merge_counts and training.tokens_after need one entry per merge")
    return stats


# ----- imported tokenisers -------------------------------------------------------------------
def _imported_from_dict(data: dict[str, Any], mode: TrainingMode, fail: _Fail) -> Tokenizer:
    rule = data.get("rule")
    imported_rules = [name for name in rule_names() if isinstance(get_rule(name), ImportedRule)]
    if rule not in imported_rules:
        names = " or ".join(f'"{name}"' for name in imported_rules)
        raise fail(f"an imported tokeniser's rule must be {names}, not {rule!r}")
    if not mode.byte_level:
        byte_level = [name for name in mode_names() if get_mode(name).byte_level]
        raise fail(f"imported tokenisers are byte-level: mode must be {' or '.join(byte_level)}")
    pattern = data.get("pattern")
    if pattern is not None:
        if not isinstance(pattern, str):
            raise fail("pattern must be a string or null")
        try:
            check_stored_pattern(pattern)
        except ValueError as exc:
            raise fail(str(exc)) from None
    elif mode.uses_pattern and get_rule(rule).cuts_by_pattern:
        raise fail(f"a {mode.name} tiktoken import needs its split pattern")
    whole_pipeline = data.get("hf_pipeline") is not None
    tokens = _check_tokens(data.get("tokens"), fail, every_byte=not whole_pipeline)
    specials = _check_imported_specials(data.get("special_tokens"), tokens, fail)
    merges = _check_imported_merges(data.get("merges"), tokens, fail, joined=not whole_pipeline)
    pipeline = None
    if whole_pipeline:
        # Loaded here, not with `bpe`: only HF imports need the pipeline (docs/imports.md).
        from bpe.hf.errors import Malformed, Unsupported
        from bpe.hf.pipeline import HfPipeline

        try:
            pipeline = HfPipeline.from_saved(data["hf_pipeline"], tokens, merges)
        except (Malformed, Unsupported, ValueError, TypeError) as exc:
            raise fail(f"hf_pipeline: {exc}") from None
    return Tokenizer(
        mode=cast(Mode, mode.name),  # any registered mode's name, as `mode_names` checked
        merges=merges,
        special_tokens=specials,
        pattern=pattern,
        training=_check_training(data.get("training"), len(merges), fail),
        rule=rule,
        tokens=tokens,
        pre_tokenizer=_check_pre_tokenizer(data.get("pre_tokenizer"), fail),
        ignore_merges=bool(data.get("ignore_merges", False)),
        source=_check_source(data.get("source"), fail),
        hf_pipeline=pipeline,
    )


def _check_tokens(raw: Any, fail: _Fail, *, every_byte: bool = True) -> dict[int, bytes]:
    if not isinstance(raw, list):
        raise fail("tokens must be a list of [id, hex bytes]")
    tokens: dict[int, bytes] = {}
    for k, entry in enumerate(raw):
        # Unpacked once, a plain int by its exact type first: a stored import's 200,000 tokens
        # are checked like a file's on every load.
        token_id: Any = None
        text: Any = None
        if isinstance(entry, _SEQUENCE) and len(entry) == 2:
            token_id, text = entry
        if not (
            (type(token_id) is int or _is_int(token_id))
            and token_id >= 0
            and isinstance(text, (str, bytes))
        ):
            raise fail(f"token entry {k} is not [id, hex bytes]: {entry!r:.80}")
        try:
            # bytes from a database's rows (from_parts), hex from a file
            data = text if isinstance(text, bytes) else bytes.fromhex(text)
        except ValueError:
            raise fail(f"token {token_id} has bytes that are not hex: {text!r:.80}") from None
        if not data:
            raise fail(f"token {token_id} is empty")
        if token_id in tokens:
            raise fail(f"token id {token_id} appears twice")
        tokens[token_id] = data
    present = set(tokens.values())
    if len(present) != len(tokens):
        raise fail("two token ids have the same bytes")
    # HF pipeline imports need no single-byte tokens (Llama 2 falls back to `<0xNN>` ones).
    missing = [b for b in range(256) if bytes([b]) not in present] if every_byte else []
    if missing:
        raise fail(f"{len(missing)} single bytes have no token (e.g. 0x{missing[0]:02x})")
    return tokens


def _check_imported_specials(raw: Any, tokens: dict[int, bytes], fail: _Fail) -> dict[str, int]:
    if not isinstance(raw, dict):
        raise fail("special_tokens must be an object {token: id}")
    specials: dict[str, int] = {}
    for token, token_id in raw.items():
        if not token or not _is_int(token_id) or token_id < 0:
            raise fail(f"special token {token!r} needs a non-empty name and an id >= 0")
        if token_id in tokens and tokens[token_id] != token.encode("utf-8"):
            raise fail(f"special token {token!r} has id {token_id}, which is another token's")
        specials[token] = token_id
    if len(set(specials.values())) != len(specials):
        raise fail("two special tokens have the same id")
    return specials


def _check_imported_merges(
    raw: Any, tokens: dict[int, bytes], fail: _Fail, *, joined: bool = True
) -> list[tuple[int, int, int]]:
    """The merges as id triples; with `joined`, each one's bytes the join of its parts' (HF
    pipeline imports are exempt: a continuing-subword prefix is cut where two parts join)."""
    if not isinstance(raw, list):
        raise fail("merges must be a list of [left_id, right_id, new_id]")
    merges: list[tuple[int, int, int]] = []
    for k, entry in enumerate(raw):
        if not (isinstance(entry, _SEQUENCE) and len(entry) == 3 and _three_ints(entry)):
            raise fail(f"merge {k} is not [left_id, right_id, new_id] integers: {entry!r:.80}")
        left, right, new = entry
        if left not in tokens or right not in tokens or new not in tokens:
            raise fail(f"merge {k} uses an id that is not a token: {entry!r}")
        if joined and tokens[left] + tokens[right] != tokens[new]:
            raise fail(f"merge {k}: the bytes of {left} and {right} do not make token {new}")
        merges.append((left, right, new))
    return merges


def _check_pre_tokenizer(raw: Any, fail: _Fail) -> PreTokenizer | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or not isinstance(raw.get("splits", []), list):
        raise fail("pre_tokenizer must be an object with a list of splits, or null")
    steps = []
    for step in raw.get("splits", []):
        if not (
            isinstance(step, dict)
            and isinstance(step.get("pattern"), str)
            and step.get("keep") in KEEPS
        ):
            raise fail(f"a pre_tokenizer split needs a pattern and keep in {KEEPS}: {step!r:.80}")
        try:
            check_stored_pattern(step["pattern"])
        except ValueError as exc:
            raise fail(str(exc)) from None
        steps.append(SplitStep(step["pattern"], step["keep"]))
    return PreTokenizer(
        splits=tuple(steps),
        add_prefix_space=bool(raw.get("add_prefix_space", False)),
        use_regex=bool(raw.get("use_regex", False)),
    )


def _check_source(raw: Any, fail: _Fail) -> ImportSource | None:
    if raw is None:
        return None
    if not isinstance(raw, dict) or raw.get("format") not in ("tiktoken", "hf"):
        raise fail('source must be null or an object with "format": "tiktoken" or "hf"')
    name = raw.get("name")
    return ImportSource(
        format=raw["format"],
        filename=str(raw.get("filename") or ""),
        sha256=str(raw.get("sha256") or ""),
        name=None if name is None else str(name),
    )
