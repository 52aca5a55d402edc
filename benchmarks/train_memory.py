"""Naive training memory on a 150 MB corpus: peak RSS per corpus byte, time to the first merge.

The corpus is built from the real corpora (`corpora-data/`, see ../shared/corpora) into a
temporary file: english_large.txt, code.txt and chinese_modern.txt whole, then the start of
english_large.txt again up to --mb megabytes (cut at a character boundary). code.txt holds
characters beyond the BMP, so the text is a 4-byte-per-character str in every path.

Each training runs in its own fresh process, timed whole; the peak RSS comes from `os.wait4`
and the time of the peak from sampling /proc/PID/status:
- `lib`: `bpe.train(text, mode="naive")` on the file's text, as a script calls it;
- `cli`: `bpe train FILE --mode naive` (the command line);
- `job`: a web training job as the embedded runner's child runs it
  (`webapp.jobs.process.child_main`: the text read from the SQLite database, progress and the
  result written back); the corpus is stored and the job queued by another process first;
- `rustbpe` and `hf1` (HuggingFace `tokenizers`, one thread): the same text and vocab size,
  both cutting at line feeds only (neither has a whole-text mode), as in train_vs_peers.py.

    python benchmarks/train_memory.py                      # lib, job, rustbpe; vocab 1000
    python benchmarks/train_memory.py --runs lib,rustbpe --vocab 500
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CORPORA_DIR = Path(os.environ.get("BPE_CORPORA_DIR", REPO / "corpora-data"))
PARTS = ["english_large.txt", "code.txt", "chinese_modern.txt", "english_large.txt"]
RUNS = ["lib", "cli", "job", "rustbpe", "hf1"]
MIB = 1 << 20


def build_corpus(path: Path, size: int) -> str:
    """Write the corpus (exactly `size` bytes, or less by a partial character); describe it."""
    used, total = [], 0
    with path.open("wb") as out:
        for name in PARTS:
            data = (CORPORA_DIR / name).read_bytes()
            if total + len(data) > size:
                end = size - total
                while end > 0 and data[end] & 0xC0 == 0x80:  # back off to a character boundary
                    end -= 1
                data = data[:end]
            out.write(data)
            total += len(data)
            used.append(f"{name} ({len(data) / 1e6:.2f} MB)")
            if total >= size - 4:
                break
    return f"{total:,} bytes: " + " + ".join(used)


# ----- the workers: each runs in its own process --------------------------------------------------
def work_lib(corpus: str, vocab: int, started: float) -> dict:
    import bpe

    text = Path(corpus).read_text(encoding="utf-8")
    first: list[float] = []

    def progress(p: bpe.Progress) -> None:
        if p.merges_done and not first:
            first.append(time.perf_counter() - started)

    tok = bpe.train(text, vocab_size=vocab, mode="naive", progress=progress)
    return {"first_merge": first[0] if first else None, "merges": len(tok.merges)}


def work_job(db_url: str, job_id: int) -> dict:
    import multiprocessing

    from webapp.jobs.process import child_main
    from webapp.jobs.store import JobStore
    from webapp.storage.db import Database

    store = JobStore(Database(db_url))
    assert store.claim(job_id, stale_after=3600), "the job was not queued"
    receiver, _sender = multiprocessing.Pipe(duplex=False)  # a stop that never comes
    child_main(job_id, db_url, receiver, 1.0)
    return {"status": str(store.status(job_id))}


def prepare_job(corpus: str, folder: str, vocab: int) -> dict:
    """Store the corpus through the upload path and queue a naive job on it (not measured)."""
    from _common import store_corpus

    from webapp import create_app
    from webapp.jobs.store import JobStore

    url = f"sqlite:///{folder}/jobs.sqlite3"
    app = create_app({"DATABASE_URL": url, "JOBS_EXECUTION": "manual", "UPLOAD_TMP_DIR": folder})
    corpus_id = store_corpus(app, Path(corpus).read_text(encoding="utf-8"), name="150 MB")
    store = JobStore(app.extensions["bpe_db"])
    [job_id] = store.submit_many(corpus_id, [{"mode": "naive", "vocab_size": vocab}])
    return {"db_url": url, "job_id": job_id}


def work_rustbpe(corpus: str, vocab: int) -> dict:
    import rustbpe
    from train_vs_peers import LINES_PATTERN, line_blocks

    text = Path(corpus).read_text(encoding="utf-8")
    tok = rustbpe.Tokenizer()
    tok.train_from_iterator(iter(line_blocks(text)), vocab, pattern=LINES_PATTERN)
    return {"merges": len(tok.get_mergeable_ranks()) - 256}


def work_hf1(corpus: str, vocab: int) -> dict:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    text = Path(corpus).read_text(encoding="utf-8")
    tok.train_from_iterator(text.splitlines(keepends=True), trainer=trainer)
    return {"merges": tok.get_vocab_size() - 256}


def worker_main(args: list[str]) -> None:
    started = time.perf_counter()
    sys.path.insert(0, str(REPO))
    role = args[0]
    if role == "lib":
        result = work_lib(args[1], int(args[2]), started)
    elif role == "job":
        result = work_job(args[1], int(args[2]))
    elif role == "prepare":
        result = prepare_job(args[1], args[2], int(args[3]))
    elif role == "rustbpe":
        result = work_rustbpe(args[1], int(args[2]))
    else:
        result = work_hf1(args[1], int(args[2]))
    print(json.dumps(result))


# ----- the parent: runs and measures each worker --------------------------------------------------
def rss_kib(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def run_child(cmd: list[str], env: dict[str, str] | None = None) -> dict:
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    peak, peak_at = 0, 0.0
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        rss = rss_kib(proc.pid)
        if rss > peak:
            peak, peak_at = rss, time.perf_counter() - started
        time.sleep(0.1)
    seconds = time.perf_counter() - started
    output = proc.stdout.read() if proc.stdout else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        return {"error": f"exit {code}"}
    result = json.loads(output.strip().splitlines()[-1]) if output.strip() else {}
    result.update(seconds=seconds, peak_bytes=usage.ru_maxrss * 1024, peak_at=peak_at)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", default="lib,job,rustbpe", help=", ".join(RUNS))
    parser.add_argument("--vocab", type=int, default=1000)
    parser.add_argument("--mb", type=float, default=150, help="corpus size in MB (10**6 bytes)")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker_main(args.worker)
        return
    runs = [r for r in args.runs.split(",") if r]
    me = [sys.executable, str(Path(__file__).resolve()), "--worker"]
    with tempfile.TemporaryDirectory(prefix="train-memory-") as folder:
        corpus = Path(folder) / "corpus.txt"
        print("corpus:", build_corpus(corpus, int(args.mb * 1e6)), flush=True)
        size = corpus.stat().st_size
        print(f"vocab {args.vocab}, naive; load before: {os.getloadavg()[0]:.2f}", flush=True)
        results: dict[str, dict] = {}
        for run in runs:
            if run == "lib":
                results[run] = run_child([*me, "lib", str(corpus), str(args.vocab)])
            elif run == "cli":
                out = Path(folder) / "cli.json"
                cmd = [sys.executable, "-m", "bpe", "train", str(corpus), "--mode", "naive"]
                cmd += ["--vocab-size", str(args.vocab), "-o", str(out), "-q"]
                results[run] = run_child(cmd)
            elif run == "job":
                job = run_child([*me, "prepare", str(corpus), folder, str(args.vocab)])
                results[run] = run_child([*me, "job", job["db_url"], str(job["job_id"])])
            else:
                env = dict(os.environ, RAYON_NUM_THREADS="1")
                results[run] = run_child([*me, run, str(corpus), str(args.vocab)], env=env)
            print(f"  {run:8} {describe(results[run], size)}", flush=True)
        print(f"load after: {os.getloadavg()[0]:.2f}")
        table(results, size)


def describe(result: dict, size: int) -> str:
    if "error" in result:
        return result["error"]
    first = result.get("first_merge")
    return (
        f"{result['seconds']:7.1f} s  peak {result['peak_bytes'] / MIB:6.0f} MiB"
        f" = {result['peak_bytes'] / size:5.2f} B per corpus byte (at {result['peak_at']:.0f} s)"
        + (f"  first merge at {first:.1f} s" if first is not None else "")
        + (f"  {result['status']}" if "status" in result else "")
    )


def table(results: dict[str, dict], size: int) -> None:
    print("\n| run | seconds | peak MiB | bytes per corpus byte | first merge s |")
    print("|---|---:|---:|---:|---:|")
    for run, r in results.items():
        if "error" in r:
            print(f"| {run} | {r['error']} | | | |")
            continue
        first = r.get("first_merge")
        print(
            f"| {run} | {r['seconds']:.1f} | {r['peak_bytes'] / MIB:.0f} |"
            f" {r['peak_bytes'] / size:.2f} | {'' if first is None else f'{first:.1f}'} |"
        )
    ours = results.get("lib", {})
    for peer in ("rustbpe", "hf1"):
        theirs = results.get(peer, {})
        if "seconds" in ours and "seconds" in theirs:
            print(
                f"lib / {peer}: time {ours['seconds'] / theirs['seconds']:.2f}x,"
                f" peak memory {ours['peak_bytes'] / theirs['peak_bytes']:.2f}x"
            )


if __name__ == "__main__":
    main()
