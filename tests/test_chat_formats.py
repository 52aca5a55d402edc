"""The formats we write ourselves: GPT-4's and GPT-4o's counts are OpenAI's cookbook formula
on tiktoken's own encodings, gpt-oss's harmony uses the file's own special tokens, our own
tokenisers' plain format has no chat tokens."""

from __future__ import annotations

import json

import pytest

import bpe
from bpe.chat import Message, count_chat, format_for
from bpe.importers import import_path
from tests.reference_files import REPO, read_ranks
from tests.test_hf_models import model_path

tiktoken = pytest.importorskip("tiktoken")

MESSAGES = [
    Message("system", "You are terse."),
    Message("user", "naïve café, 日本語 and <|endoftext|> as text"),
    Message("assistant", "Sure."),
    Message("user", "spaces around  \n"),
]


def _reference(name: str) -> bpe.Tokenizer:
    path = REPO / "reference-tokenizers" / f"{name}.tiktoken"
    if not path.is_file():
        pytest.skip(f"{path} is missing")
    return import_path(path)


@pytest.mark.parametrize(
    ("name", "per_message", "format_name"),
    [("cl100k_base", 4, "chatml"), ("o200k_base", 3, "o200k")],
)
def test_openai_counts_are_the_cookbook_formula(name, per_message, format_name):
    tok = _reference(name)
    # tiktoken's own Encoding, from the same rank file and pattern (no download).
    path = REPO / "reference-tokenizers" / f"{name}.tiktoken"
    sidecar = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))
    encoding = tiktoken.Encoding(
        name, pat_str=sidecar["pat_str"], mergeable_ranks=read_ranks(path), special_tokens={}
    )
    count = count_chat(tok, MESSAGES)
    assert count.format.name == format_name
    # OpenAI's cookbook: tokens per message, plus the role's and the content's, plus 3 for the
    # reply's priming (its content encoded as plain text, special-looking text included). The
    # formula counts apart what is encoded together: a content starting with a line break
    # would share a token with the header's, so these start otherwise.
    expected = sum(
        per_message + len(encoding.encode(m.role)) + len(encoding.encode_ordinary(m.content))
        for m in MESSAGES
    )
    assert count.total == expected + 3
    assert count.per_message == [len(encoding.encode_ordinary(m.content)) for m in MESSAGES]


def test_chatml_writes_tiktokens_documented_ids():
    count = count_chat(_reference("cl100k_base"), [Message("user", "hi")])
    assert count.ids[0] == 100264 and 100265 in count.ids
    assert count.text == "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"


def test_gpt_oss_speaks_harmony_with_its_own_tokens():
    tok = import_path(model_path("gptoss"))
    count = count_chat(tok, MESSAGES)
    assert count.format.name == "harmony"
    assert count.text.startswith("<|start|>system<|message|>You are ChatGPT")
    assert "<|start|>developer<|message|># Instructions\n\nYou are terse.<|end|>" in count.text
    assert "<|start|>assistant<|channel|>final<|message|>Sure.<|end|>" in count.text
    assert count.text.endswith("<|start|>assistant")
    assert count.ids.count(tok.special_tokens["<|start|>"]) == len(MESSAGES) + 2
    assert all(count.found)


def test_gpt2_has_no_format_and_our_own_get_plain():
    assert format_for(_reference("gpt2")) is None
    ours = bpe.train("the cat sat on the mat " * 20, vocab_size=270, trainer="reference")
    count = count_chat(ours, MESSAGES[:2], add_generation_prompt=False)
    assert count.format.name == "plain"
    assert count.text == f"system: {MESSAGES[0].content}\n\nuser: {MESSAGES[1].content}"
    assert not any(count.special)
    assert count.ids == ours.encode(count.text)
