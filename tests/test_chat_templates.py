"""Chat templates: our rendering and tokens equal transformers' `apply_chat_template` on the
same files for every model in model-tokenizers/ that has a template, and a template that loops
or keeps growing is stopped with a message saying so."""

from __future__ import annotations

import json
import time
from functools import cache

import pytest

from bpe.chat import Message, count_chat
from bpe.chat_template import render_template
from bpe.chat_types import ChatError, ChatTemplate, TemplateLimit
from bpe.importers import import_path
from bpe.model import Tokenizer
from tests.test_hf_models import model_path

transformers = pytest.importorskip("transformers")

TEMPLATED = ("llama3", "qwen3", "deepseek_v3")
CONVERSATIONS = {
    "one user": [Message("user", "Hello!")],
    "system first": [
        Message("system", "You are terse."),
        Message("user", "What is BPE?"),
        Message("assistant", "Byte-pair encoding: merge the commonest pair, repeat."),
        Message("user", "And  spaces\n\nor newlines?  "),
    ],
    "unicode and specials as text": [
        Message("user", "naïve café, 日本語, emoji 🤖 and <|im_end|> typed by a user"),
        Message("assistant", "  leading and trailing spaces  "),
        Message("user", "{{ not a template }} {% raw %}"),
    ],
    "long": [
        Message("user" if i % 2 == 0 else "assistant", f"turn {i}: " + "word " * i)
        for i in range(20)
    ],
}


@cache
def _ours(name: str) -> Tokenizer:
    path = model_path(name)
    tok = import_path(path)
    config = json.loads((path.parent / "tokenizer_config.json").read_text(encoding="utf-8"))
    tok.chat_template = ChatTemplate.from_config(config)
    return tok


@cache
def _theirs(name: str) -> object:
    return transformers.AutoTokenizer.from_pretrained(str(model_path(name).parent))


@pytest.mark.parametrize("name", TEMPLATED)
@pytest.mark.parametrize("conversation", list(CONVERSATIONS))
@pytest.mark.parametrize("add_generation_prompt", [True, False])
def test_token_ids_equal_transformers(name, conversation, add_generation_prompt):
    messages = CONVERSATIONS[conversation]
    theirs = _theirs(name).apply_chat_template(
        [{"role": m.role, "content": m.content} for m in messages],
        tokenize=True,
        add_generation_prompt=add_generation_prompt,
        return_dict=False,
    )
    count = count_chat(_ours(name), messages, add_generation_prompt=add_generation_prompt)
    assert count.format.name == "template"
    assert count.ids == list(theirs)
    assert sum(count.per_message) + count.framing == count.total == len(theirs)


@pytest.mark.parametrize("name", TEMPLATED)
def test_every_message_is_found_and_framing_is_marked(name):
    messages = CONVERSATIONS["system first"]
    count = count_chat(_ours(name), messages)
    assert all(count.found)
    assert all(n > 0 for n in count.per_message)
    # The special tokens the template writes are framing, never a message's.
    assert any(count.special)
    assert all(
        owner is None for owner, special in zip(count.owners, count.special, strict=True) if special
    )


def test_the_models_without_a_template_say_so():
    tok = import_path(model_path("llama2"))
    with pytest.raises(ChatError, match="no chat template"):
        count_chat(tok, [Message("user", "hi")])


@pytest.mark.parametrize(
    ("template", "words"),
    [
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}",
            "ran for over",
        ),
        (
            "{% set ns = namespace(s='ab') %}{% for i in range(60) %}"
            "{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}",
            "built a text of over",
        ),
        ("{{ 'x' * 10**9 }}", "built a text of over"),
        ("{{ 'x' | center(10**9) }}", "built a text of over"),
        ("{{ '{:>999999999}'.format(1) }}", "built a text of over"),
        (
            "{% for i in range(100000) %}{{ messages[0].content * 100 }}{% endfor %}",
            "built a text of over",
        ),
        (
            "{% set x %}{% for i in range(100000) %}{{ messages[0].content * 1000 }}"
            "{% endfor %}{% endset %}{{ x }}",
            "built a text of over",
        ),
    ],
)
def test_a_looping_or_growing_template_is_stopped(template, words):
    started = time.monotonic()
    with pytest.raises(TemplateLimit, match=words):
        render_template(ChatTemplate(template), [Message("user", "0123456789abc")], time_limit=1.0)
    assert time.monotonic() - started < 5


def test_the_sandbox_and_the_helpers_are_transformers():
    chat = ChatTemplate(
        "{{ messages | tojson }}|{{ dict(a=1) | tojson }}|{{ strftime_now('%Y') }}|"
        "{% if messages[0].role != 'user' %}{{ raise_exception('no') }}{% endif %}"
        "{% generation %}{{ bos_token }}{% endgeneration %}"
    )
    out = render_template(chat, [Message("user", "<b>é</b>")])
    assert out.startswith('[{"role": "user", "content": "<b>é</b>"}]|{"a": 1}|20')
    with pytest.raises(ChatError, match="no"):
        render_template(chat, [Message("assistant", "x")])
    with pytest.raises(ChatError, match="unsafe|underscored|access"):
        render_template(ChatTemplate("{{ messages.__class__.__mro__ }}"), [Message("user", "x")])
    with pytest.raises(ChatError, match="underscored"):
        render_template(ChatTemplate("{% set ns = namespace(_x=1) %}"), [Message("user", "x")])
