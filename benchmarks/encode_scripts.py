"""Encode speed across the world's scripts, the corpora and the imported models, against HF
`tokenizers` (one thread) and tiktoken, same process, the same ids checked from every encoder.

    TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 \\
    .venv/bin/python benchmarks/encode_scripts.py [--parts scripts corpora models]
        [--groups LATIN CJK ...] [--modes naive chunked] [--repeat 3]

Three parts:
1. `scripts`: the Universal Declaration of Human Rights in ~530 languages (`BPE_UDHR_DIR`,
   default `udhr/` in the checkout: CODE.txt and index.json), complete texts only (stage 4-5).
   Each language goes to the script most of its letters are written in (the first word of the
   letters' Unicode names: LATIN, CYRILLIC, CJK, HIRAGANA, ...); the group `WORLD` holds every
   language. For each group and byte-level mode, a vocabulary of `--vocab` (pairs seen at
   least twice) is trained on the first half of each of its texts (at most `--train-chars`
   of them, joined), and the second halves, joined, are encoded cold.
2. `corpora`: each corpus of `corpora-data/` as benchmarks/encode_vs_peers.py does it (vocab
   10,000 trained on the first `--mb` MB, the next `--mb` MB encoded).
3. `models`: the three tiktoken reference files and the HF `tokenizer.json` files of
   `model-tokenizers/`, on `--size` characters of English, code and Chinese. The peer of a HF
   file is `tokenizers` on that file; of a rank file, tiktoken on it, and `tokenizers` on the
   HF file this script writes from its ranks (the merges derived from them, `ignore_merges`).

Timed, cold (our caches and HF's word cache emptied outside the timing), interleaved, best of
`--repeat` rounds (more, up to 50, while the encoders have had under 0.2 s each), CPU time of
this process:
- ours pure: `tok.encode(text, engine="pure")`; ours default: `tok.encode(text)`, which hands
  the text to tiktoken where that is proven to give our ids (`bpe.tiktoken_path`; the `fast`
  column says whether it did: `tt`, or `pure` when the default took the pure path);
- HF: our HF export (or the model file) loaded by `tokenizers`, `encode(text).ids`;
- tiktoken: our tiktoken export (or the rank file), `encode_ordinary(text)`.
Any encoder giving other ids than the pure path stops the run.
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import sys
import tempfile
import time
import unicodedata
from collections.abc import Callable
from pathlib import Path

os.environ.setdefault("RAYON_NUM_THREADS", "1")  # before tokenizers is imported
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from encode_vs_peers import all_cold, peers_installed, two_windows

import bpe
from bpe.modes.base import MULTIBYTE_SHARE
from bpe.rules.merges import FAST_PATH_MIN_CHARS
from bpe.tiktoken_path import needs_pure_path

MODES = ["naive", "chunked"]
PARTS = ["scripts", "corpora", "models"]
CORPORA = ["english_small", "english_large", "chinese_modern", "code"]
HF_MODELS = ["llama3", "gptoss", "qwen3", "deepseek_v3", "llama2"]
RANK_FILES = ["gpt2", "cl100k_base", "o200k_base"]
MODEL_TEXTS = {"english": "english_small", "code": "code", "chinese": "chinese_modern"}
WORLD = "WORLD"
MIN_SECONDS = 0.2  # each encoder's time per row, at least, when --repeat rounds take less
MAX_ROUNDS = 50
MB = 1_000_000


def udhr_dir() -> Path:
    return Path(os.environ.get("BPE_UDHR_DIR", REPO / "udhr"))


def data_dir(name: str) -> Path:
    return REPO / name


def script_of(text: str) -> str:
    """The script most of the text's letters belong to, by the first word of their names."""
    counts = collections.Counter(
        unicodedata.name(char, "?").split()[0] for char in text if char.isalpha()
    )
    return counts.most_common(1)[0][0] if counts else "?"


def script_groups(folder: Path) -> dict[str, tuple[str, str]]:
    """script -> (training text, text to encode): the first and second halves (in lines) of
    each complete translation in that script, joined; `WORLD` holds them all."""
    halves: dict[str, tuple[list[str], list[str]]] = collections.defaultdict(lambda: ([], []))
    for entry in json.loads((folder / "index.json").read_text(encoding="utf-8")):
        if entry.get("stage", 0) < 4:
            continue
        path = folder / f"{entry['code']}.txt"
        if not path.exists():
            continue
        lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        first, second = "".join(lines[: len(lines) // 2]), "".join(lines[len(lines) // 2 :])
        for group in (script_of(first + second), WORLD):
            halves[group][0].append(first)
            halves[group][1].append(second)
    return {group: ("".join(a), "".join(b)) for group, (a, b) in halves.items()}


def best_times(
    runs: dict[str, Callable[[], list[int]]],
    repeat: int,
    clock: Callable[[], float],
    before: Callable[[], None],
) -> tuple[dict[str, float], dict[str, list[int]]]:
    seconds: dict[str, float] = {}
    ids: dict[str, list[int]] = {}
    spent = 0.0
    rounds = 0
    # Interleaved, so load changes hit every encoder alike. Texts of a few ms get more rounds
    # (up to MIN_SECONDS of each encoder's time): best of 3 left their rows to one collector
    # pause or cache miss, and two runs of the same code read 1.0x and 1.5x.
    while rounds < repeat or (spent < MIN_SECONDS * len(runs) and rounds < MAX_ROUNDS):
        rounds += 1
        for name, fn in runs.items():
            before()
            started = clock()
            result = fn()
            took = clock() - started
            spent += took
            seconds[name] = min(seconds.get(name, took), took)
            ids[name] = result
    return seconds, ids


def check_same(ids: dict[str, list[int]], what: str, reference: str = "pure") -> None:
    for name, result in ids.items():
        if result != ids[reference]:
            raise SystemExit(f"{what}: {name} gives other ids than {reference}")


def default_takes_fast_path(tok: bpe.Tokenizer, text: str) -> bool:
    """Whether `tok.encode(text)` hands this text to tiktoken (bpe.rules.merges)."""
    multibyte = len(text.encode("utf-8")) > MULTIBYTE_SHARE * len(text)
    return (
        len(text) >= FAST_PATH_MIN_CHARS
        and tok.fast_path is not None
        and tok.mode_object.fast_path_suits(multibyte)
        and not needs_pure_path(text)
    )


def trained_case(
    train_text: str, text: str, mode: str, args: argparse.Namespace, clock, min_frequency: int
) -> dict[str, float | str]:
    """Train on train_text, then time ours pure and default, HF and tiktoken on text."""
    import tiktoken  # noqa: F401  (the fast path needs it)
    import tokenizers

    from bpe.export_hf import write_hf
    from bpe.export_tiktoken import load_tiktoken, write_tiktoken

    tok = bpe.train(
        train_text, vocab_size=args.vocab, mode=mode, pattern="gpt4", min_frequency=min_frequency
    )
    with tempfile.TemporaryDirectory() as tmp:
        write_hf(tok, Path(tmp) / "tokenizer.json")
        hf = tokenizers.Tokenizer.from_file(str(Path(tmp) / "tokenizer.json"))
        write_tiktoken(tok, Path(tmp) / "tok.tiktoken")
        enc = load_tiktoken(Path(tmp) / "tok.tiktoken")
    tok._cuts, tok._characters, tok._whole_tokens  # noqa: B018  built once per tokeniser
    runs = {
        "pure": lambda: tok.encode(text, engine="pure"),
        "default": lambda: tok.encode(text),
        "hf": lambda: hf.encode(text).ids,
        "tiktoken": lambda: enc.encode_ordinary(text),
    }
    seconds, ids = best_times(runs, args.repeat, clock, all_cold(tok, hf))
    check_same(ids, f"{mode}")
    return {
        **seconds,
        "kb": len(text.encode()) / 1000,
        "merges": len(tok.merges),
        "fast": "tt" if default_takes_fast_path(tok, text) else "pure",
    }


def print_header(first: str) -> None:
    header = (
        f"{first:<16}{'mode':<8}{'kB':>7}{'merges':>7}{'pure ms':>9}{'dflt ms':>9}"
        f"{'HF ms':>8}{'tt ms':>8}{'pure/HF':>9}{'pure/tt':>9}{'dflt/tt':>9}{'fast':>6}  ids"
    )
    print(header)
    print("-" * len(header), flush=True)


def print_row(first: str, mode: str, s: dict[str, float | str]) -> None:
    pure, dflt, hf, tt = (float(s[k]) for k in ("pure", "default", "hf", "tiktoken"))
    print(
        f"{first:<16}{mode:<8}{float(s['kb']):>7.0f}{int(s['merges']):>7}{1e3 * pure:>9.1f}"
        f"{1e3 * dflt:>9.1f}{1e3 * hf:>8.1f}{1e3 * tt:>8.1f}{pure / hf:>8.2f}x"
        f"{pure / tt:>8.2f}x{dflt / tt:>8.2f}x{s['fast']:>6}  same",
        flush=True,
    )


def run_scripts(args: argparse.Namespace, clock) -> None:
    groups = script_groups(udhr_dir())
    names = args.groups or sorted(groups, key=lambda g: (g != WORLD, -len(groups[g][1])))
    print(f"\nscripts: UDHR, {len(groups) - 1} script groups; vocab {args.vocab:,}, pairs >= 2")
    print_header("script")
    for name in names:
        train_text, text = groups[name]
        train_text = train_text[: args.train_chars]  # WORLD and LATIN: training time bounded
        for mode in args.modes:
            print_row(name, mode, trained_case(train_text, text, mode, args, clock, 2))


def run_corpora(args: argparse.Namespace, clock) -> None:
    print(f"\ncorpora: vocab {args.vocab:,} on the first {args.mb} MB, the next {args.mb} MB")
    print_header("corpus")
    for corpus in args.corpora:
        train_text, text = two_windows(data_dir("corpora-data") / f"{corpus}.txt", args.mb * MB)
        for mode in args.modes:
            print_row(corpus, mode, trained_case(train_text, text, mode, args, clock, 1))


def hf_json_from_ranks(tok: bpe.Tokenizer) -> str:
    """A HF tokenizer.json for an imported rank file: our export's shape for a chunked
    tokeniser with its pattern (split, then ByteLevel), the merges derived from the ranks in
    rank order, and a piece that is a token taken whole (tiktoken's first step)."""
    from bpe.byte_level import byte_level_string as spell
    from bpe.export_hf import to_hf_json

    shape = bpe.Tokenizer(mode="chunked", merges=[], pattern=tok.pattern)
    document = json.loads(to_hf_json(shape))
    model = document["model"]
    model["vocab"] = {spell(tok.token_bytes(i)): i for i in tok.mergeable_ranks.values()}
    model["merges"] = [
        [spell(tok.token_bytes(a)), spell(tok.token_bytes(b))] for a, b, _ in tok.merges
    ]
    model["ignore_merges"] = True
    return json.dumps(document)


def model_peers(name: str, tmp: Path):
    """(our tokeniser, the HF tokenizer, the tiktoken Encoding or None) for one model."""
    import tiktoken
    import tokenizers
    from tiktoken.load import load_tiktoken_bpe

    from bpe.importers import import_path

    if name in RANK_FILES:
        path = data_dir("reference-tokenizers") / f"{name}.tiktoken"
        tok = import_path(path)
        (tmp / f"{name}.json").write_text(hf_json_from_ranks(tok), encoding="utf-8")
        hf = tokenizers.Tokenizer.from_file(str(tmp / f"{name}.json"))
        enc = tiktoken.Encoding(
            name,
            pat_str=tok.pattern or "",
            mergeable_ranks=load_tiktoken_bpe(str(path)),
            special_tokens={},
        )
        return tok, hf, enc
    path = data_dir("model-tokenizers") / name / "tokenizer.json"
    hf = tokenizers.Tokenizer.from_file(str(path))
    hf.encode_special_tokens = True  # our default: special tokens are text
    return import_path(path), hf, None


def hf_ids(hf, text: str) -> list[int]:
    return hf.encode(text, add_special_tokens=False).ids


def run_models(args: argparse.Namespace, clock) -> None:
    texts = {
        label: (data_dir("corpora-data") / f"{corpus}.txt").read_text(encoding="utf-8")[: args.size]
        for label, corpus in MODEL_TEXTS.items()
    }
    print(f"\nmodels: {args.size:,} characters of each text, cold")
    header = (
        f"{'model':<13}{'rule':<13}{'text':<9}{'pure ms':>9}{'HF ms':>9}{'tt ms':>9}"
        f"{'pure/HF':>9}{'pure/tt':>9}  ids"
    )
    print(header)
    print("-" * len(header), flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for name in args.models:
            tok, hf, enc = model_peers(name, Path(folder))
            for label, text in texts.items():
                runs = {
                    "pure": functools.partial(tok.encode, text, engine="pure"),
                    "hf": functools.partial(hf_ids, hf, text),
                }
                if enc is not None:
                    runs["tiktoken"] = functools.partial(enc.encode_ordinary, text)
                seconds, ids = best_times(runs, args.repeat, clock, all_cold(tok, hf))
                check_same(ids, f"{name} {label}")
                pure, hf_s = seconds["pure"], seconds["hf"]
                tt = seconds.get("tiktoken")
                print(
                    f"{name:<13}{tok.rule:<13}{label:<9}{1e3 * pure:>9.1f}{1e3 * hf_s:>9.1f}"
                    + (f"{1e3 * tt:>9.1f}" if tt else f"{'-':>9}")
                    + f"{pure / hf_s:>8.2f}x"
                    + (f"{pure / tt:>8.2f}x" if tt else f"{'-':>9}")
                    + "  same",
                    flush=True,
                )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", nargs="+", default=PARTS, choices=PARTS)
    parser.add_argument("--groups", nargs="*", help="script groups (default: all)")
    parser.add_argument("--modes", nargs="+", default=MODES, choices=MODES)
    parser.add_argument("--corpora", nargs="+", default=CORPORA, choices=CORPORA)
    parser.add_argument("--models", nargs="+", default=RANK_FILES + HF_MODELS)
    parser.add_argument("--vocab", type=int, default=10_000)
    parser.add_argument("--train-chars", type=int, default=1_000_000, help="scripts: at most")
    parser.add_argument("--mb", type=int, default=2, help="corpora: MB to train on and encode")
    parser.add_argument("--size", type=int, default=1_000_000, help="models: characters")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--wall", action="store_true", help="time with the wall clock")
    args = parser.parse_args(argv)
    if not peers_installed():
        return 0
    clocks = {True: ("wall", time.perf_counter), False: ("CPU", time.process_time)}
    clock_name, clock = clocks[args.wall]
    load = os.getloadavg()[0]
    print(
        f"best of {args.repeat}+ rounds (to {MIN_SECONDS} s each), {clock_name} time;"
        f" load {load:.1f} on {os.cpu_count()} cores"
    )
    parts = {"scripts": run_scripts, "corpora": run_corpora, "models": run_models}
    for part in args.parts:
        parts[part](args, clock)
    print(f"load average at end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
