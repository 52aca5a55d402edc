"""The chat page and `POST /api/t/<slug>/chat`: a conversation edited without JavaScript (add,
remove, move), counted in the picked models side by side, framing apart; bad input is a 4xx."""

from __future__ import annotations

import re

import pytest

import bpe
from bpe.chat import Message, count_chat
from bpe.chat_types import ChatTemplate
from bpe.export_hf import to_hf_json
from bpe.importers import import_bytes
from webapp.content.imports import store_reference

TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}<|{{ m.role }}|>{{ m.content | trim }}{{ eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
SPECIALS = ["<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>"]


def trained_with_specials() -> bpe.Tokenizer:
    return bpe.train(
        "the cat sat on the mat; the dog ate the rat. hello there\n" * 8,
        vocab_size=300,
        trainer="reference",
        special_tokens=SPECIALS,
    )


@pytest.fixture
def models(app):
    """A templated HF import stored as "Llama 3", one without a template as "Llama 2"."""
    trained = trained_with_specials()
    database = app.extensions["bpe_db"]
    templated = import_bytes(to_hf_json(trained).encode(), filename="tokenizer.json")
    templated.chat_template = ChatTemplate(TEMPLATE, "<s>", "</s>")
    plain = import_bytes(to_hf_json(trained).encode(), filename="tokenizer.json")
    return {
        "Llama 3": (store_reference(database, templated, "Llama 3"), templated),
        "Llama 2": (store_reference(database, plain, "Llama 2"), plain),
    }


def form(messages, models, action="count", gen=True):
    data = {
        "role": [m.role for m in messages],
        "content": [m.content for m in messages],
        "t": [*models, ""],
        "action": action,
    }
    if gen:
        data["gen"] = "1"
    return data


def totals(html: str) -> list[str]:
    return re.findall(r'<td class="chat-total">([^<]*)</td>', html)


CONVERSATION = [
    Message("system", "Be brief."),
    Message("user", "hello there, the cat"),
    Message("assistant", "  the dog ate the rat  "),
]


def test_counts_each_model_side_by_side_as_the_library_does(client, models):
    slug, tok = models["Llama 3"]
    response = client.post("/chat", data=form(CONVERSATION, [slug, models["Llama 2"][0]]))
    assert response.status_code == 200
    html = response.get_data(as_text=True)
    expected = count_chat(tok, CONVERSATION)
    assert totals(html) == [f"{expected.total:,}", "–"]
    assert "has no chat template" in html  # Llama 2 says so instead of a number
    assert expected.framing > 0 and all(n > 0 for n in expected.per_message)
    assert f"{expected.framing:,} of them framing" in html
    # Special tokens the template writes are marked as such.
    assert '<span class="chat-token framing special">&lt;|user|&gt;</span>' in html


def test_the_generation_prompt_box_changes_the_count(client, models):
    slug, tok = models["Llama 3"]
    html = client.post("/chat", data=form(CONVERSATION, [slug], gen=False)).get_data(as_text=True)
    expected = count_chat(tok, CONVERSATION, add_generation_prompt=False)
    assert totals(html) == [f"{expected.total:,}"]
    assert expected.total < count_chat(tok, CONVERSATION).total


def _roles_and_contents(html: str) -> list[tuple[str, str]]:
    roles = re.findall(r"<option selected>(\w+)</option>", html)
    contents = re.findall(r'name="content" rows="2" spellcheck="false">([^<]*)</textarea>', html)
    return list(zip(roles, contents, strict=True))


def test_add_remove_and_move_without_javascript(client, models):
    slug, _ = models["Llama 3"]
    html = client.post("/chat", data=form(CONVERSATION, [slug], action="add-user")).get_data(
        as_text=True
    )
    assert [r for r, _ in _roles_and_contents(html)] == ["system", "user", "assistant", "user"]
    html = client.post("/chat", data=form(CONVERSATION, [slug], action="up-2")).get_data(
        as_text=True
    )
    assert [r for r, _ in _roles_and_contents(html)] == ["system", "assistant", "user"]
    html = client.post("/chat", data=form(CONVERSATION, [slug], action="remove-0")).get_data(
        as_text=True
    )
    assert _roles_and_contents(html) == [
        ("user", "hello there, the cat"),
        ("assistant", "  the dog ate the rat  "),
    ]


def test_htmx_gets_only_the_editor(client, models):
    slug, _ = models["Llama 3"]
    response = client.post("/chat", data=form(CONVERSATION, [slug]), headers={"HX-Request": "1"})
    html = response.get_data(as_text=True)
    assert response.status_code == 200
    assert html.lstrip().startswith("<form") and "<html" not in html
    assert totals(html)


def test_the_page_escapes_what_is_typed(client, models):
    slug, _ = models["Llama 3"]
    evil = [Message("user", "<script>alert(1)</script>")]
    html = client.post("/chat", data=form(evil, [slug])).get_data(as_text=True)
    assert "<script>alert(1)" not in html
    assert "&lt;script&gt;" in html


@pytest.mark.parametrize(
    ("change", "status"),
    [
        ({"role": ["bot"], "content": ["x"]}, 400),
        ({"role": ["user", "user"], "content": ["x"]}, 400),
        ({"role": ["user"] * 51, "content": ["x"] * 51}, 413),
        ({"content": ["x" * 60_000]}, 413),
        ({"action": "remove-7"}, 400),
        ({"t": ["no-such-model"]}, 404),
        ({"t": [f"m{i}" for i in range(9)]}, 422),
    ],
)
def test_bad_forms_are_refused(client, models, change, status):
    data = {**form([Message("user", "hi")], [models["Llama 3"][0]]), **change}
    assert client.post("/chat", data=data).status_code == status


def test_the_api_counts_per_message(client, models):
    slug, tok = models["Llama 3"]
    body = {"messages": [{"role": m.role, "content": m.content} for m in CONVERSATION]}
    response = client.post(f"/api/t/{slug}/chat", json=body)
    assert response.status_code == 200
    data = response.get_json()
    expected = count_chat(tok, CONVERSATION)
    assert data["ids"] == expected.ids
    assert [m["tokens"] for m in data["messages"]] == expected.per_message
    assert data["framing"] == expected.framing and data["total"] == expected.total
    assert data["format"] == "template"


@pytest.mark.parametrize(
    ("body", "status", "words"),
    [
        ({"messages": "hi"}, 422, "Give the conversation"),
        ({"messages": [{"role": "robot", "content": "x"}]}, 422, "role must be one of"),
        ({"messages": [{"role": "user", "content": 3}]}, 422, "content must be a string"),
        ({"messages": [{"role": "user", "content": "x"}] * 201}, 422, "At most 200"),
        ({"messages": [{"role": "user", "content": "x" * 60_000}]}, 413, "too long"),
        ({"messages": [{"role": "user", "content": "x"}], "format": "nope"}, 422, "unknown"),
        ({"messages": [{"role": "user", "content": "x"}], "format": 3}, 400, "format"),
    ],
)
def test_the_api_refuses_bad_conversations(client, models, body, status, words):
    response = client.post(f"/api/t/{models['Llama 3'][0]}/chat", json=body)
    assert response.status_code == status
    assert words in response.get_json()["error"]


def test_the_api_says_when_a_model_has_no_template(client, models):
    response = client.post(
        f"/api/t/{models['Llama 2'][0]}/chat", json={"messages": [{"role": "user", "content": "x"}]}
    )
    assert response.status_code == 422
    assert "no chat template" in response.get_json()["error"]
    body = client.post("/api/t/x/chat", data=b"{bad json", content_type="application/json")
    assert body.status_code in (400, 404)


def test_a_tokeniser_trained_here_gets_the_plain_format(client, make_tokenizer):
    ref = make_tokenizer()
    response = client.post(
        f"/api/t/{ref.slug}/chat", json={"messages": [{"role": "user", "content": "the cat"}]}
    )
    assert response.status_code == 200
    data = response.get_json()
    assert data["format"] == "plain"
    assert data["text"] == "user: the cat\n\nassistant: "


def test_a_looping_template_is_stopped_and_said_so(app, client, models):
    looping = import_bytes(to_hf_json(trained_with_specials()).encode(), filename="tokenizer.json")
    looping.chat_template = ChatTemplate(
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}"
    )
    slug = store_reference(app.extensions["bpe_db"], looping, "Qwen 3")
    html = client.post("/chat", data=form(CONVERSATION, [slug, models["Llama 3"][0]])).get_data(
        as_text=True
    )
    assert "the chat template ran for over 2 s and was stopped" in html
    assert totals(html)[0] == "–" and totals(html)[1] != "–"  # the other model is counted
    response = client.post(
        f"/api/t/{slug}/chat", json={"messages": [{"role": "user", "content": "x"}]}
    )
    assert response.status_code == 422
    assert "ran for over" in response.get_json()["error"]


def test_every_page_links_the_chat_page(client):
    assert 'href="/chat"' in client.get("/").text


def test_every_page_links_the_languages_page(client):
    assert 'href="/languages"' in client.get("/chat").text
