"""The `bpe` command line: train, encode, decode, export, import, evaluate and inspect tokenisers,
and count a conversation's tokens (`bpe chat`, `bpe.chat_cli`).

`bpe languages` counts tokenisers on a parallel text, language by language.

Every failure a user can cause (a bad argument, an unreadable file, a corrupt tokeniser)
ends with one line on stderr and a non-zero exit, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from bpe import chat_cli
from bpe.formats import TokenizerFileError, load, save
from bpe.model import MODES, Tokenizer
from bpe.training import DEFAULT_TRAINER, TRAINERS, train, train_files
from bpe.training_types import Progress

EXIT_FAILURE = 1


class CommandError(Exception):
    """A problem to report as one line on stderr."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run  # each subcommand sets its own
    try:
        return run(args)
    except CommandError as exc:
        print(f"bpe: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except (TokenizerFileError, ValueError) as exc:
        print(f"bpe: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except KeyboardInterrupt:
        print("bpe: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`bpe encode ... | head`): not an error worth a traceback.
        sys.stderr.close()
        return EXIT_FAILURE


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bpe", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = commands.add_parser("train", help="train a tokeniser on text files")
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files ('-' for stdin)")
    p.add_argument("--vocab-size", type=int, required=True, help="total ids, specials included")
    p.add_argument("--mode", choices=MODES, default="chunked")
    p.add_argument("--pattern", default="gpt4", help="chunked mode split: gpt4, gpt2 or a regex")
    p.add_argument("--trainer", choices=TRAINERS, default=DEFAULT_TRAINER)
    p.add_argument("--special", action="append", default=[], metavar="TOKEN")
    p.add_argument("--min-frequency", type=int, default=1)
    p.add_argument("-o", "--output", required=True, metavar="OUT.json")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    p.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="chunked and words mode: stream the files in blocks and count them in shards by N"
        " processes (0: every core), same merges (a custom --pattern is never cut: counted"
        " whole, in one process); naive mode trains on the whole text as one sequence, read"
        " into memory, in one process (N must be 1)",
    )
    p.set_defaults(run=run_train)

    p = commands.add_parser("encode", help="print one line of ids per input")
    p.add_argument("-t", "--tokenizer", required=True, metavar="TOK.json")
    p.add_argument("files", nargs="*", metavar="FILE", help="inputs; none or '-' reads stdin")
    p.add_argument(
        "--allow-special", action="store_true", help="recognise special tokens in the text"
    )
    p.set_defaults(run=run_encode)

    p = commands.add_parser("decode", help="print the text of ids, then a newline")
    p.add_argument("-t", "--tokenizer", required=True, metavar="TOK.json")
    p.add_argument("ids", nargs="*", metavar="ID", help="ids; none or '-' reads them from stdin")
    p.add_argument(
        "-n",
        "--no-newline",
        action="store_true",
        help="print exactly the decoded text, no final newline (for round trips)",
    )
    p.set_defaults(run=run_decode)

    p = commands.add_parser("export", help="write a HuggingFace or tiktoken file")
    p.add_argument("-t", "--tokenizer", required=True, metavar="TOK.json")
    p.add_argument("--format", choices=("hf", "tiktoken"), required=True)
    p.add_argument("-o", "--output", required=True, metavar="OUT")
    p.set_defaults(run=run_export)

    p = commands.add_parser(
        "import", help="read a tiktoken rank file or a HuggingFace tokenizer.json, keeping its ids"
    )
    p.add_argument(
        "file", metavar="FILE", help="NAME.tiktoken (+ NAME.tiktoken.json) or tokenizer.json"
    )
    p.add_argument(
        "--pattern",
        help="tiktoken files: gpt2, cl100k, o200k or a regex (else the sidecar's pat_str)",
    )
    p.add_argument("--sidecar", metavar="JSON", help="tiktoken files: the pattern/specials JSON")
    p.add_argument("-o", "--output", required=True, metavar="TOK.json")
    p.set_defaults(run=run_import)

    p = commands.add_parser("eval", help="compression figures of a tokeniser on text files")
    p.add_argument("-t", "--tokenizer", required=True, metavar="TOK.json")
    p.add_argument("files", nargs="+", metavar="FILE", help="UTF-8 text files ('-' for stdin)")
    p.add_argument("--json", action="store_true", help="print every figure as one JSON object")
    p.add_argument(
        "--show", type=int, default=20, metavar="N", help="never-used and longest tokens listed"
    )
    p.set_defaults(run=run_eval)

    p = commands.add_parser(
        "languages", help="tokens per language on a parallel text, and the premium against English"
    )
    p.add_argument(
        "tokenizers",
        nargs="+",
        metavar="TOKENIZER",
        help="saved tokenisers (TOK.json), tiktoken rank files or HuggingFace tokenizer.json files",
    )
    p.add_argument(
        "--udhr", required=True, metavar="DIR", help="CODE.txt files and index.json (make_udhr.sh)"
    )
    p.add_argument("--csv", action="store_true", help="one CSV row per language and tokeniser")
    p.add_argument("--json", action="store_true", help="the same records as one JSON object")
    p.set_defaults(run=run_languages)

    p = commands.add_parser("info", help="mode, pattern, vocab size, special tokens, top merges")
    p.add_argument("-t", "--tokenizer", required=True, metavar="TOK.json")
    p.add_argument("--merges", type=int, default=10, help="how many first merges to list")
    p.set_defaults(run=run_info)

    p = commands.add_parser(
        "vocab-diff", help="tokens two tokenisers share, and those only one has, per category"
    )
    p.add_argument("a", metavar="A.json")
    p.add_argument("b", metavar="B.json")
    p.add_argument("--json", action="store_true", help="counts and token lists as one JSON object")
    p.add_argument(
        "--show", type=int, default=10, metavar="N", help="tokens listed per side (longest first)"
    )
    p.set_defaults(run=run_vocab_diff)
    chat_cli.add_parser(commands)
    return parser


def read_text(name: str, *, keep_bom: bool = False) -> str:
    """A UTF-8 input file, or stdin for '-'; a one-line error for anything unreadable.

    Training drops a leading byte-order mark (it is a file marker, not corpus text); encoding
    keeps it (`keep_bom`), because a tokeniser must give back every character it was given.
    """
    try:
        raw = sys.stdin.buffer.read() if name == "-" else Path(name).read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read {name}: {exc.strerror}") from None
    try:
        return raw.decode("utf-8" if keep_bom else "utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CommandError(f"{name} is not UTF-8 (first bad byte at offset {exc.start})") from None


def run_train(args: argparse.Namespace) -> int:
    if args.jobs < 0:
        raise CommandError("--jobs must be 1 or more (0 for every core)")
    if args.jobs != 1:
        return _train_streamed(args)
    text = "".join(read_text(name) for name in args.files)
    reporter = _ProgressPrinter(enabled=not args.quiet, stream=sys.stderr)
    tok = train(
        text,
        vocab_size=args.vocab_size,
        mode=args.mode,
        pattern=args.pattern,
        trainer=args.trainer,
        special_tokens=args.special,
        min_frequency=args.min_frequency,
        progress=reporter,
    )
    reporter.finish(tok)
    _write(args.output, lambda path: save(tok, path))
    return 0


def _train_streamed(args: argparse.Namespace) -> int:
    """`bpe train --jobs N`: the files streamed and counted in shards (`bpe.train_files`)."""
    if args.mode not in ("chunked", "words"):
        raise CommandError(
            f"--jobs {args.jobs}: {args.mode} mode trains on the whole text as one sequence,"
            " in one process; leave out --jobs, or train in chunked or words mode"
        )
    reporter = _ProgressPrinter(enabled=not args.quiet, stream=sys.stderr)
    try:
        tok = train_files(
            args.files,
            vocab_size=args.vocab_size,
            mode=args.mode,
            pattern=args.pattern,
            trainer=args.trainer,
            special_tokens=args.special,
            min_frequency=args.min_frequency,
            progress=reporter,
            jobs=args.jobs or None,
        )
    except OSError as exc:
        raise CommandError(f"cannot read {exc.filename}: {exc.strerror}") from None
    reporter.finish(tok)
    _write(args.output, lambda path: save(tok, path))
    return 0


class _ProgressPrinter:
    """Prints training progress on stderr.

    On a terminal one line is redrawn in place (`\r`) a few times a second. Redirected to a
    file or a pipe, `\r` would pile every redraw into one endless log line, so it prints plain
    lines instead, and fewer of them (the first merge, then every 2 s).
    """

    def __init__(self, *, enabled: bool, stream: TextIO | None) -> None:
        self.stream = stream
        self.enabled = enabled and stream is not None
        self.live = stream is not None and enabled and _isatty(stream)
        self.interval = 0.25 if self.live else 2.0
        self.last = 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if not self.enabled or now - self.last < self.interval or not p.merges_target:
            return
        self.last = now
        line = (
            f"merges {p.merges_done:,}/{p.merges_target:,}  count {p.count or 0:,}"
            f"  tokens {p.total_tokens:,}"
        )
        if self.live:
            print(f"\r{line}\033[K", end="", file=self.stream, flush=True)
        else:
            print(line, file=self.stream, flush=True)

    def finish(self, tok: Tokenizer) -> None:
        if not self.enabled:
            return
        stats = tok.training
        seconds = f" in {stats.seconds:.2f} s" if stats and stats.seconds is not None else ""
        line = f"learned {len(tok.merges):,} merges{seconds}; vocab size {tok.vocab_size:,}"
        print(f"\r{line}\033[K" if self.live else line, file=self.stream)


def _isatty(stream: TextIO) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def _load(path: str) -> Tokenizer:
    return load(path)


def _load_any(path: str) -> Tokenizer:
    """A saved tokeniser, or a file `bpe import` reads (tiktoken, HF tokenizer.json)."""
    from bpe.importers import import_path

    try:
        return load(path)
    except TokenizerFileError:
        return import_path(path)


def _column_name(path: str, taken: Sequence[str]) -> str:
    """A tokeniser's column: its file's stem, or its folder's name for `tokenizer.json`."""
    file = Path(path)
    name = file.parent.name if file.stem == "tokenizer" and file.parent.name else file.stem
    name = name.removesuffix(".tiktoken")
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name} ({n})", n + 1
    return unique


def run_languages(args: argparse.Namespace) -> int:
    import csv

    from bpe.languages import CSV_COLUMNS, long_rows, measure, read_parallel_text

    languages = read_parallel_text(args.udhr)
    tokenizers: dict[str, Tokenizer] = {}
    for path in args.tokenizers:
        tokenizers[_column_name(path, list(tokenizers))] = _load_any(path)
    table = measure(tokenizers, languages)
    if args.json:
        print(json.dumps({"baseline": "eng", "languages": list(long_rows(table))}))
        return 0
    if args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(long_rows(table))
        return 0
    base = table.baseline
    names = table.names
    print("\t".join(["code", "script", "name", *(f"{n} tokens\t{n} premium" for n in names)]))
    for row in sorted(table.rows, key=lambda r: -(r.premium(names[0], base) or 0)):
        cells = [row.code, row.script or "-", row.name]
        for name in names:
            premium = row.premium(name, base)
            cells += [str(row.tokens[name]), "-" if premium is None else f"{premium:.3f}"]
        print("\t".join(cells))
    print(f"{len(table.rows)} languages, {table.seconds:.1f}s", file=sys.stderr)
    return 0


def _write(path: str, writer: Callable[[str], object]) -> None:
    try:
        writer(path)
    except OSError as exc:
        raise CommandError(f"cannot write {path}: {exc.strerror}") from None


def run_encode(args: argparse.Namespace) -> int:
    tok = _load(args.tokenizer)
    allowed = "all" if args.allow_special else ()
    names = args.files or ["-"]
    # All inputs at once, so encode_batch can spread them over every core.
    texts = [read_text(name, keep_bom=True) for name in names]
    for ids in tok.encode_batch(texts, allowed_special=allowed):
        sys.stdout.write(" ".join(map(str, ids)) + "\n")
    return 0


def run_decode(args: argparse.Namespace) -> int:
    tok = _load(args.tokenizer)
    words = args.ids if args.ids and args.ids != ["-"] else sys.stdin.read().split()
    try:
        ids = [int(word) for word in words]
    except ValueError:
        bad = next(w for w in words if not w.lstrip("-").isdigit())
        raise CommandError(f"{bad!r} is not a token id (ids are whole numbers)") from None
    # A final newline, as line-oriented tools print (`-n` for the exact text, e.g. to a file).
    text = tok.decode(ids) + ("" if args.no_newline else "\n")
    # UTF-8 whatever the locale, so `bpe encode f | bpe decode -n` gives f back byte for byte.
    sys.stdout.flush()
    sys.stdout.buffer.write(text.encode("utf-8"))
    sys.stdout.buffer.flush()
    return 0


def run_export(args: argparse.Namespace) -> int:
    from bpe.export_common import export_warnings
    from bpe.export_hf import write_hf
    from bpe.export_tiktoken import write_tiktoken

    tok = _load(args.tokenizer)
    # Warnings go to stderr before writing: the file is still useful, but the user should
    # know where the peer will encode differently from us.
    for line in export_warnings(tok, target=args.format):
        print(f"bpe: warning: {line}", file=sys.stderr)
    if args.format == "hf":
        _write(args.output, lambda path: write_hf(tok, path))
        print(f"bpe: wrote {args.output}", file=sys.stderr)
    else:
        written: list[Path] = []
        _write(args.output, lambda path: written.extend(write_tiktoken(tok, path)))
        ranks, sidecar = written
        print(
            f"bpe: wrote {ranks} (the ranks) and {sidecar} (split pattern and special"
            " tokens): tiktoken needs both",
            file=sys.stderr,
        )
    return 0


def run_info(args: argparse.Namespace) -> int:
    tok = _load(args.tokenizer)
    lines = [
        f"mode: {tok.mode}",
        f"pattern: {tok.pattern if tok.pattern is not None else '-'}",
        (
            f"vocab size: {tok.vocab_size:,} ({tok.base_size:,} base, {len(tok.merges):,} merges,"
            f" {len(tok.special_tokens):,} special)"
        ),
        "special tokens: "
        + (", ".join(f"{s!r}={i}" for s, i in tok.special_tokens.items()) or "-"),
    ]
    if tok.training is not None:
        t = tok.training
        final = t.tokens_after[-1] if t.tokens_after else t.initial_tokens
        lines.append(
            f"trained: {t.trainer} trainer, min frequency {t.min_frequency},"
            f" {t.initial_tokens:,} -> {final:,} tokens on its corpus"
        )
    lines.append(f"first {min(args.merges, len(tok.merges))} merges:")
    counts = tok.training.merge_counts if tok.training is not None else None
    for rank, (left, right, new) in enumerate(tok.merges[: args.merges]):
        count = f"  count {counts[rank]:,}" if counts else ""
        lines.append(
            f"  {rank:>5}  {tok.id_to_token(left)!r} + {tok.id_to_token(right)!r}"
            f" -> {new} {tok.id_to_token(new)!r}{count}"
        )
    print("\n".join(lines))
    return 0


SIDE_LABELS = {"both": "both", "only_a": "only A", "only_b": "only B"}


def run_vocab_diff(args: argparse.Namespace) -> int:
    from bpe.vocab_diff import SIDES, vocab_diff

    a, b = _load(args.a), _load(args.b)
    diff = vocab_diff(a, b)
    listed = {
        "both": [i for i, _ in diff.both],
        "only_a": diff.only_a,
        "only_b": diff.only_b,
    }
    owner = {"both": a, "only_a": a, "only_b": b}
    if args.json:
        print(
            json.dumps(
                {
                    "counts": {side: dict(sorted(diff.counts[side].items())) for side in SIDES},
                    "totals": {side: len(listed[side]) for side in SIDES},
                    "both": [
                        {"a_id": i, "b_id": j, "hex": a.display_bytes(i).hex()}
                        for i, j in diff.both
                    ],
                    "only_a": [{"id": i, "hex": a.display_bytes(i).hex()} for i in diff.only_a],
                    "only_b": [{"id": i, "hex": b.display_bytes(i).hex()} for i in diff.only_b],
                }
            )
        )
        return 0
    categories = sorted(set().union(*(diff.counts[side] for side in SIDES)))
    lines = [f"{'category':<14}{'both':>10}{'only A':>10}{'only B':>10}"]
    for category in categories:
        row = "".join(f"{diff.counts[side][category]:>10,}" for side in SIDES)
        lines.append(f"{category:<14}{row}")
    lines.append(f"{'all':<14}" + "".join(f"{len(listed[side]):>10,}" for side in SIDES))
    for side in SIDES:
        tok = owner[side]
        longest = sorted(listed[side], key=lambda i: (-len(tok.display_bytes(i)), i))[: args.show]
        if longest:
            shown = ", ".join(f"{i} {tok.id_to_token(i)!r}" for i in longest)
            lines.append(f"{SIDE_LABELS[side]}, longest first: {shown}")
    print("\n".join(lines))
    return 0


def run_import(args: argparse.Namespace) -> int:
    from bpe.importers import import_path

    tok = import_path(args.file, sidecar=args.sidecar, pattern=args.pattern)
    _write(args.output, lambda path: save(tok, path))
    source = tok.source
    name = source.name if source is not None and source.name else Path(args.file).name
    print(
        f"imported {name} ({tok.rule}): {tok.vocab_size:,} ids ({len(tok.ordinary_ids):,} ordinary,"
        f" {len(tok.special_tokens):,} special), {len(tok.merges):,} merges,"
        f" ids 0..{tok.id_limit - 1}",
        file=sys.stderr,
    )
    return 0


def run_eval(args: argparse.Namespace) -> int:
    from bpe.evaluate import evaluate

    tok = _load(args.tokenizer)
    texts = [read_text(name) for name in args.files]
    result = evaluate(tok, texts)
    if args.json:
        print(json.dumps(result.to_dict(), ensure_ascii=False))
        return 0

    def shown(token_id: int) -> str:
        return repr(tok.id_to_token(token_id))

    def ratio(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [
        f"text: {result.bytes:,} bytes, {result.characters:,} characters, {result.words:,} words",
        f"tokens: {result.tokens:,}",
        f"bytes per token: {ratio(result.bytes_per_token)}",
        f"characters per token: {ratio(result.chars_per_token)}",
        # Per word only where words are spaced; per character in Chinese, Thai, ... (bpe.scripts).
        f"{result.fertility[0].replace('/', ' per ')}: {ratio(result.fertility[1])}",
        f"vocabulary used: {result.used:,} of {result.vocab_size:,} ({result.vocab_share:.1%})",
        f"never used: {len(result.never_used):,} tokens"
        + (":" if result.never_used and args.show > 0 else ""),
    ]
    lines += [f"  {i:>7}  {shown(i)}" for i in result.never_used[: args.show]]
    if len(result.never_used) > args.show > 0:
        lines.append(f"  ... and {len(result.never_used) - args.show:,} more (--json lists all)")
    lines.append("longest tokens used:")
    lines += [f"  {i:>7}  {shown(i)}  x{count:,}" for i, count in result.longest[: args.show]]
    lines.append(f"time: {result.seconds:.2f}s")
    print("\n".join(lines))
    return 0
