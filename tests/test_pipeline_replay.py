""" "Why this split?" for imports run through HF's whole pipeline (Llama 2, Qwen 3): every stage
it shows is what HF `tokenizers` itself makes of the text (its normalizer's output, its
pre-tokenizer's words), and the merges replayed from the word's model symbols end in exactly
`tokenizers`' ids, for text that NFC changes, runs of spaces, added tokens and characters only
byte fallback spells. The panel shows each stage escaped.
"""

from __future__ import annotations

import io
import re
from html import unescape

import pytest

from tests.test_hf_models import loaded, model_path
from tests.test_web_imports import imported_slug
from webapp.rendering.segmentation import replay_token

tokenizers = pytest.importorskip("tokenizers")

TEXTS = {
    "llama2": "Cafe\u0301 na\u00efve  two  spaces\ttab <s> \U0001f9ec\u00e9\u0301 \ufb01 <b>x</b>",
    "qwen3": "Cafe\u0301 na\u00efve  two  spaces\ttab<|im_start|>\U0001f9ec \u212b\u00e9\u0301 123",
}


def _whole_words(parts) -> list[str]:
    assert parts.before == 0 and parts.after == 0  # short texts: nothing windowed out
    return [part.text for part in parts.parts]


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_every_tokens_replay_is_what_tokenizers_does(name):
    tok, hf = loaded(name)
    text = TEXTS[name]
    want = hf.encode(text, add_special_tokens=False).ids
    assert tok.encode(text, allowed_special="all") == want
    stages_seen = set()
    for index in range(len(want)):
        replay = replay_token(tok, text, index, allowed_special="all")
        assert replay is not None and replay.stages is not None, index
        s = replay.stages
        # The replay ends in the tokens the text's encoding has around this one.
        n = len(replay.result)
        assert any(
            want[lo : lo + n] == replay.result for lo in range(max(0, index - n + 1), index + 1)
        ), index
        if s.added:
            assert replay.result == [want[index]] and want[index] in tok.special_tokens.values()
            continue
        assert s.raw_cut == 0 and s.normalized_cut == 0
        assert s.normalized == hf.normalizer.normalize_str(s.raw)
        [segment] = [p.text for p in s.segments.parts if p.current]
        words = _whole_words(s.words)
        if hf.pre_tokenizer is None:
            assert words == [segment]
        else:
            assert words == [w for w, _ in hf.pre_tokenizer.pre_tokenize_str(segment)]
        [word] = [p.text for p in s.words.parts if p.current]
        assert replay.chunk_text == word
        if not replay.windowed:  # the word's replay ends in what HF's model makes of it
            assert replay.result == [t.id for t in hf.model.tokenize(word)], index
        stages_seen.add((s.raw, s.normalized))
    assert any(raw != normalized for raw, normalized in stages_seen)  # NFC or `▁` changed it


def test_a_long_llama2_word_is_replayed_as_a_window_that_ends_in_its_tokens():
    """Llama 2 has no pre-tokenizer: the whole text is one word, replayed as the window of its
    final tokens around the clicked one, from the word's own symbols."""
    tok, hf = loaded("llama2")
    text = "The caf\u00e9 \U0001f9ec served na\u00efve people. " * 6
    want = hf.encode(text, add_special_tokens=False).ids
    index = len(want) // 2
    replay = replay_token(tok, text, index)
    assert replay is not None and replay.windowed and replay.stages is not None
    assert replay.stages.words.total == 1
    assert len(replay.symbols) < len(text)
    n = len(replay.result)
    assert any(want[lo : lo + n] == replay.result for lo in range(index - n + 1, index + 1))


@pytest.mark.parametrize("name", sorted(TEXTS))
def test_the_panel_shows_each_stage_escaped(app, client, name):
    model_path(name)  # skips, naming the script, when the file is absent
    tok, hf = loaded(name)
    response = client.post(
        "/import",
        data={"file": (io.BytesIO(model_path(name).read_bytes()), "tokenizer.json")},
        content_type="multipart/form-data",
    )
    slug = imported_slug(client, response)
    text = 'Cafe\u0301 <script>alert("x")</script>'
    want = hf.encode(text, add_special_tokens=False).ids
    why = client.post(
        f"/t/{slug}/why", data={"text": text, "token": "1"}, headers={"HX-Request": "true"}
    )
    assert why.status_code == 200
    html = why.get_data(as_text=True)
    assert "<script>" not in html and "&lt;script&gt;" in html
    normalized = hf.normalizer.normalize_str(text)
    shown = re.search(r'<code class="why-chunk why-normalized">([^<]*)</code>', html)
    assert shown and unescape(shown.group(1)) == normalized  # plain text: escaped, not markup
    assert "exactly the tokens the playground shows here" in html
    assert 'class="pipeline-stages"' in html and str(want[0]) in html
