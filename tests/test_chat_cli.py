"""`bpe chat TOKENIZER CONVERSATION`: per-message counts in the model's own format; every bad
input is one line on stderr and exit 1."""

from __future__ import annotations

import json

import pytest

import bpe
from bpe.chat import Message, count_chat
from bpe.chat_types import ChatTemplate
from bpe.cli import main
from tests.test_hf_models import model_path

CONVERSATION = {
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is a token?"},
    ]
}


@pytest.fixture
def conversation(tmp_path):
    path = tmp_path / "chat.json"
    path.write_text(json.dumps(CONVERSATION), encoding="utf-8")
    return str(path)


def test_a_model_file_with_its_config_beside_it(conversation, capsys):
    path = model_path("qwen3")
    assert main(["chat", str(path), conversation, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    tok = bpe.importers.import_path(path)
    config = json.loads((path.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok.chat_template = ChatTemplate.from_config(config)
    expected = count_chat(tok, [Message(**m) for m in CONVERSATION["messages"]])
    assert data["format"] == "template"
    assert data["ids"] == expected.ids
    assert [m["tokens"] for m in data["messages"]] == expected.per_message


def test_our_own_file_in_the_plain_format(tmp_path, conversation, capsys):
    tok = bpe.train("the cat sat on the mat " * 20, vocab_size=270, trainer="reference")
    saved = tmp_path / "tok.json"
    bpe.save(tok, saved)
    assert main(["chat", str(saved), conversation, "--no-generation-prompt"]) == 0
    out = capsys.readouterr().out
    expected = count_chat(
        tok, [Message(**m) for m in CONVERSATION["messages"]], add_generation_prompt=False
    )
    assert "plain format" in out
    assert f"total     {expected.total:>8,}" in out


def test_a_saved_chat_template_round_trips(tmp_path):
    tok = bpe.train("the cat sat on the mat " * 20, vocab_size=270, trainer="reference")
    tok.chat_template = ChatTemplate("{{ messages[0].content }}", "<s>", None)
    saved = tmp_path / "tok.json"
    bpe.save(tok, saved)
    assert bpe.load(saved).chat_template == tok.chat_template
    tok.chat_template = None
    bpe.save(tok, saved)
    assert "chat_template" not in json.loads(saved.read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("conversation_text", "words"),
    [
        ("{not json", "not valid JSON"),
        ('{"messages": [{"role": "robot", "content": "x"}]}', "role must be one of"),
        ('{"messages": []}', "no messages"),
        (json.dumps({"messages": [{"role": "user", "content": "x"}] * 201}), "At most 200"),
        (json.dumps([{"role": "user", "content": "x" * 100_001}]), "at most 100,000"),
    ],
)
def test_bad_conversations_are_one_line(tmp_path, capsys, conversation_text, words):
    path = tmp_path / "chat.json"
    path.write_text(conversation_text, encoding="utf-8")
    assert main(["chat", str(model_path("llama3")), str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("bpe: ") and words in err and err.count("\n") == 1


def test_a_model_without_a_template_says_so(conversation, capsys):
    assert main(["chat", str(model_path("llama2")), conversation]) == 1
    assert "no chat template" in capsys.readouterr().err
