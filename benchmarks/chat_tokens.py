"""A chat of 20 messages counted in 6 models on the chat page: the server's time per request,
and each model's share against transformers' `apply_chat_template(tokenize=True)` (the peer,
for the models whose files carry a template; tiktoken for GPT-4 and GPT-4o's formats).

    .venv/bin/python benchmarks/chat_tokens.py [--rounds 20]

The six: GPT-4 and GPT-4o (reference-tokenizers/), gpt-oss, Llama 3, Qwen 3 and DeepSeek-V3
(model-tokenizers/, with their tokenizer_config.json's template), stored as `flask
fetch-models` stores them. The page is asked through the app (Flask's test client, so the
time is the server's: parsing, rendering six templates, encoding, the HTML), warm (each
model loaded once before timing, as a serving process keeps it). Median and worst of the
rounds; the bar is a median of at most 200 ms.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _common import bench_app, owner_headers

from bpe.chat import count_chat
from bpe.chat_types import ChatTemplate, Message
from bpe.importers import import_path
from webapp.content.imports import store_reference

MODELS = {"gptoss": "gpt-oss", "llama3": "Llama 3", "qwen3": "Qwen 3", "deepseek_v3": "DeepSeek-V3"}
REFERENCES = {"cl100k_base": "GPT-4", "o200k_base": "GPT-4o"}
TURNS = [
    "Can you explain how byte-pair encoding builds its vocabulary?",
    "It starts from single bytes and repeatedly merges the most frequent adjacent pair into a "
    "new token, until the vocabulary reaches the size asked for.",
    "Why do chat models need special tokens around each message?",
    "They mark where a message starts and ends and who wrote it, so the model can tell the "
    "instructions, the question and its own earlier answers apart.",
]


def conversation() -> list[Message]:
    messages = [Message("system", "You are a patient teacher. Answer in two sentences.")]
    for i in range(19):
        messages.append(Message("user" if i % 2 == 0 else "assistant", TURNS[i % 4]))
    return messages


def model(name: str):
    path = ROOT / "model-tokenizers" / name / "tokenizer.json"
    tok = import_path(path)
    config = json.loads((path.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok.chat_template = ChatTemplate.from_config(config)
    return tok


def tiktoken_encoding(path: Path):
    """tiktoken's own Encoding from the local rank file and its pattern (no download)."""
    import base64

    import tiktoken

    ranks = {}
    for line in path.read_bytes().splitlines():
        token, rank = line.split()
        ranks[base64.b64decode(token)] = int(rank)
    sidecar = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))
    return tiktoken.Encoding(
        path.stem, pat_str=sidecar["pat_str"], mergeable_ranks=ranks, special_tokens={}
    )


def timed(fn, rounds: int) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), max(times)


def peers(toks: dict[str, object], messages: list[Message], rounds: int) -> None:
    import transformers

    plain = [{"role": m.role, "content": m.content} for m in messages]
    print("| model | format | tokens | ours ms (median) | peer | peer ms | ours/peer |")
    print("|---|---|---|---|---|---|---|")
    for label, tok in toks.items():
        count = count_chat(tok, messages)
        ours, _ = timed(lambda tok=tok: count_chat(tok, messages), rounds)
        name = next((n for n, lab in MODELS.items() if lab == label), None)
        if name is not None and name != "gptoss":
            theirs_tok = transformers.AutoTokenizer.from_pretrained(
                str(ROOT / "model-tokenizers" / name)
            )
            ids = theirs_tok.apply_chat_template(
                plain, tokenize=True, add_generation_prompt=True, return_dict=False
            )
            assert list(ids) == count.ids, label
            peer, _ = timed(
                lambda t=theirs_tok: t.apply_chat_template(
                    plain, tokenize=True, add_generation_prompt=True
                ),
                rounds,
            )
            peer_name = "transformers"
        elif label in REFERENCES.values():
            name = "cl100k_base" if label == "GPT-4" else "o200k_base"
            encoding = tiktoken_encoding(ROOT / "reference-tokenizers" / f"{name}.tiktoken")
            # The peer encodes each message's content, as OpenAI's cookbook counts.
            peer, _ = timed(lambda e=encoding: [e.encode(m.content) for m in messages], rounds)
            peer_name = "tiktoken (contents only)"
        else:
            row = f"| {label} | {count.format.name} | {count.total:,} | {ours * 1000:.1f}"
            print(f"{row} | none (harmony is ours: no template in its files) | | |")
            continue
        row = f"| {label} | {count.format.name} | {count.total:,} | {ours * 1000:.1f}"
        print(f"{row} | {peer_name} | {peer * 1000:.1f} | {ours / peer:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--profile", action="store_true", help="where a request's time goes")
    args = parser.parse_args()
    print(f"load: {os.getloadavg()}")
    app = bench_app("bench-chat-")
    database = app.extensions["bpe_db"]
    toks = {}
    for name, label in REFERENCES.items():
        toks[label] = import_path(ROOT / "reference-tokenizers" / f"{name}.tiktoken")
    for name, label in MODELS.items():
        toks[label] = model(name)
    slugs = [store_reference(database, tok, label) for label, tok in toks.items()]
    messages = conversation()
    data = {
        "role": [m.role for m in messages],
        "content": [m.content for m in messages],
        "t": slugs,
        "gen": "1",
        "action": "count",
    }
    client = app.test_client()
    headers = owner_headers(client)  # a bearer owner, as a script posts the site's forms
    first = time.perf_counter()
    response = client.post("/chat", data=data, headers=headers)
    assert response.status_code == 200, response.status_code
    print(f"first request (loads the six models): {time.perf_counter() - first:.2f} s")
    median, worst = timed(lambda: client.post("/chat", data=data, headers=headers), args.rounds)
    print(
        f"POST /chat, 20 messages x 6 models, {args.rounds} rounds: median "
        f"{median * 1000:.0f} ms, worst {worst * 1000:.0f} ms (bar: median <= 200 ms)"
    )
    if args.profile:
        import cProfile
        import pstats

        profile = cProfile.Profile()
        profile.runcall(lambda: client.post("/chat", data=data, headers=headers))
        pstats.Stats(profile).sort_stats("cumulative").print_stats(30)
    peers(toks, messages, args.rounds)
    print(f"load: {os.getloadavg()}")


if __name__ == "__main__":
    main()
