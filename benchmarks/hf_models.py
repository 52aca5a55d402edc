"""Five models' tokenizer.json files: import time, and encode time against HF `tokenizers` on
one thread, with the ids checked equal.

    TOKENIZERS_PARALLELISM=false RAYON_NUM_THREADS=1 \\
    .venv/bin/python benchmarks/hf_models.py [--models DIR] [--size 1000000] [--rounds 3]

For each model (model-tokenizers/NAME/tokenizer.json, or BPE_MODEL_TOKENIZERS_DIR):
1. `bpe.importers.import_path` against `tokenizers.Tokenizer.from_file` (best of the rounds);
2. encoding `--size` characters of English (english_small), code and Chinese (chinese_modern),
   cold: our caches cleared and a freshly loaded HF tokenizer each round (its word cache
   empty), `add_special_tokens=False` on both; the median of the rounds and the ratio ours/HF.
Wall-clock seconds; CPU seconds of this process beside the encode times (the machine is shared).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("RAYON_NUM_THREADS", "1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tokenizers

from bpe.importers import import_path

MODELS = ("llama3", "gptoss", "qwen3", "deepseek_v3", "llama2")
CORPORA = {"english": "english_small", "code": "code", "chinese": "chinese_modern"}


def timed(fn, *args, **kwargs):
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_dir = Path(os.environ.get("BPE_MODEL_TOKENIZERS_DIR", ROOT / "model-tokenizers"))
    parser.add_argument("--models", type=Path, default=default_dir)
    parser.add_argument("--corpora", type=Path, default=ROOT / "corpora-data")
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=list(MODELS))
    args = parser.parse_args()
    texts = {
        label: (args.corpora / f"{name}.txt").read_text(encoding="utf-8")[: args.size]
        for label, name in CORPORA.items()
    }
    print(f"load: {os.getloadavg()}")
    print(
        "| model | rule | import ours s | import HF s | corpus | encode ours s (cpu) | HF s "
        "| ours/HF |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in args.only:
        path = args.models / name / "tokenizer.json"
        ours_import = min(timed(import_path, path)[1] for _ in range(args.rounds))
        hf_import = min(
            timed(tokenizers.Tokenizer.from_file, str(path))[1] for _ in range(args.rounds)
        )
        tok = import_path(path)
        for label, text in texts.items():
            ours_runs, cpu_runs, hf_runs = [], [], []
            for _ in range(args.rounds):
                tok.clear_caches()
                ids, wall, cpu = timed(tok.encode, text, engine="pure")
                ours_runs.append(wall)
                cpu_runs.append(cpu)
                hf = tokenizers.Tokenizer.from_file(str(path))
                hf.encode_special_tokens = True  # our default: special tokens are text
                encoding, wall, _ = timed(hf.encode, text, add_special_tokens=False)
                want = encoding.ids
                hf_runs.append(wall)
                if ids != want:
                    raise SystemExit(f"{name} {label}: our ids differ from HF's")
            ours, hf_time = statistics.median(ours_runs), statistics.median(hf_runs)
            print(
                f"| {name} | {tok.rule} | {ours_import:.2f} | {hf_import:.2f} | {label} "
                f"| {ours:.2f} ({statistics.median(cpu_runs):.2f}) | {hf_time:.2f} "
                f"| {ours / hf_time:.2f}x |",
                flush=True,
            )
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
