"""Two checkouts' pure-Python encoder side by side: which of two versions encodes faster.

The load of a shared machine moves a single encode by +-30%, and two runs minutes apart even
more, so one long-lived worker process per checkout loads the same tokeniser and text, and the
two take turns: one cold `encode(text, engine="pure")` each per round, tiktoken's encode timed
in the second worker every round as a yardstick. The minimum and the median of each are
printed, and the ids of both must be the same.

    .venv/bin/python benchmarks/encode_ab.py --old /path/to/main-checkout --corpus code --mode naive
    .venv/bin/python benchmarks/encode_ab.py --old ../main --new . --rounds 20
    .venv/bin/python benchmarks/encode_ab.py --old ../main --pattern '\\p{L}+|\\p{N}|\\s+|.'

The tokeniser: vocab 10,000 trained (by the new checkout) on the first 2 MB of the corpus; the
text: the next 2 MB, as in `encode_vs_peers.py`. Needs `tiktoken`.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CORPORA = ["english_small", "english_large", "chinese_modern", "code"]


def worker(folder: str) -> None:
    """Load the tokeniser with the checkout's `bpe` (the working directory) and answer rounds."""
    sys.path.insert(0, os.getcwd())  # this checkout's bpe, not the one installed
    import bpe
    from bpe.export_tiktoken import load_tiktoken
    from bpe.formats import load

    if not Path(bpe.__file__).resolve().is_relative_to(Path.cwd().resolve()):
        raise SystemExit(f"the worker in {os.getcwd()} imported {bpe.__file__}")

    tok = load(Path(folder) / "tok.json")
    enc = load_tiktoken(Path(folder) / "tok.tiktoken")
    text = (Path(folder) / "text.txt").read_text(encoding="utf-8")
    tok._cuts, tok._characters, tok._whole_tokens  # noqa: B018  built once, as the benchmark does
    for line in sys.stdin:
        started = time.process_time()
        if line.strip() == "tiktoken":
            ids = enc.encode_ordinary(text)
        else:
            tok.clear_caches()
            ids = tok.encode(text, engine="pure")
        took = time.process_time() - started
        digest = hashlib.sha1(repr(ids).encode()).hexdigest()[:12]
        print(f"{took:.6f} {digest}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True, help="checkout of the version to compare with")
    parser.add_argument("--new", default=str(HERE.parent), help="checkout (default: this one)")
    parser.add_argument("--corpus", default="english_small", choices=CORPORA)
    parser.add_argument("--mode", default="chunked", choices=["naive", "chunked"])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument(
        "--pattern",
        default="gpt4",
        help="split pattern: gpt4, gpt2 or a regex (one not built in splits under a time limit)",
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(args.worker)
        return 0
    sys.path.insert(0, str(HERE))
    from encode_vs_peers import MB, corpora_dir, two_windows  # it imports this checkout's bpe

    import bpe
    from bpe.export_tiktoken import write_tiktoken
    from bpe.formats import save

    train_text, text = two_windows(corpora_dir() / f"{args.corpus}.txt", 2 * MB)
    tok = bpe.train(train_text, vocab_size=10_000, mode=args.mode, pattern=args.pattern)
    with tempfile.TemporaryDirectory() as folder:
        save(tok, Path(folder) / "tok.json")
        write_tiktoken(tok, Path(folder) / "tok.tiktoken")
        (Path(folder) / "text.txt").write_text(text, encoding="utf-8")
        command = [sys.executable, str(Path(__file__).resolve()), "--old", "-", "--worker", folder]
        workers = {
            name: subprocess.Popen(
                command, cwd=path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
            )
            for name, path in (("old", args.old), ("new", args.new))
        }
        times: dict[str, list[float]] = {"old": [], "new": [], "tiktoken": []}
        digests: dict[str, str] = {}

        def ask(name: str, what: str) -> float:
            process = workers[name]
            assert process.stdin is not None and process.stdout is not None
            process.stdin.write(what + "\n")
            process.stdin.flush()
            took, digest = process.stdout.readline().split()
            if what == "pure":
                digests[name] = digest
            return float(took)

        try:
            for _ in range(args.rounds):
                for name in ("old", "new"):
                    times[name].append(ask(name, "pure"))
                times["tiktoken"].append(ask("new", "tiktoken"))
        finally:
            for process in workers.values():
                assert process.stdin is not None
                process.stdin.close()
                process.wait(timeout=60)
    if digests["old"] != digests["new"]:
        raise SystemExit("the two checkouts give different ids")
    low = {name: min(values) for name, values in times.items()}
    mid = {name: statistics.median(values) for name, values in times.items()}
    print(
        f"{args.corpus} {args.mode}, {args.rounds} rounds, load {os.getloadavg()[0]:.1f}:"
        f" minimum old {low['old'] * 1000:.0f} ms, new {low['new'] * 1000:.0f} ms,"
        f" tiktoken {low['tiktoken'] * 1000:.0f} ms; new/old {low['new'] / low['old']:.3f}"
        f" (median {mid['new'] / mid['old']:.3f});"
        f" old/tiktoken {low['old'] / low['tiktoken']:.2f}x,"
        f" new/tiktoken {low['new'] / low['tiktoken']:.2f}x; same ids"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
