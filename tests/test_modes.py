"""A mode is one module and one registration: a toy fourth mode, defined here and touching the
library only through `bpe.modes.register_mode`, trains, encodes, decodes, saves and loads."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import bpe
from bpe import modes
from bpe.export_common import ExportError
from bpe.export_hf import to_hf_json
from bpe.export_tiktoken import to_tiktoken_encoding
from bpe.formats import dumps, loads
from bpe.modes import ByteLevelMode
from bpe.reference import encode_reference
from bpe.stepwise import encode_chunks

TEXT = "the cat sat\nthe cat sat\non the mat\n\nthe cat sat\nno cat\n" * 20


class LinesMode(ByteLevelMode):
    """Byte-level, one piece per line (its line feed included): no merge crosses a line."""

    name = "lines"
    label = "Lines (bytes, one piece per line)"
    description = "Each line as a run of bytes; no merge crosses a line end."

    def split(self, text: str, pattern: str | None) -> list[str]:
        return text.splitlines(keepends=True)

    def iter_split(self, text: str, pattern: str | None) -> Iterator[str]:
        return iter(text.splitlines(keepends=True))


class SaidLinesMode(LinesMode):
    """The same mode, able to say its split as a regex (so the exports can carry it)."""

    name = "said-lines"

    def split_pattern(self, pattern: str | None) -> str | None:
        return r"[^\n]*\n|[^\n]+"


@pytest.fixture
def lines_mode() -> Iterator[LinesMode]:
    mode = LinesMode()
    modes.register_mode(mode)
    yield mode
    modes.unregister_mode(mode.name)


@pytest.fixture
def said_lines_mode() -> Iterator[SaidLinesMode]:
    mode = SaidLinesMode()
    modes.register_mode(mode)
    yield mode
    modes.unregister_mode(mode.name)


def test_a_registered_mode_trains_encodes_decodes_saves_and_loads(lines_mode):
    tok = bpe.train(TEXT, vocab_size=300, mode="lines", trainer="reference")
    assert tok.mode == "lines" and tok.mode_object is lines_mode
    efficient = bpe.train(TEXT, vocab_size=300, mode="lines", trainer="efficient")
    assert efficient.merges == tok.merges

    # No merge crosses a line end: no token holds a line feed anywhere but at its end, and
    # pairs run out once every distinct line is one token (naive mode would merge on across).
    assert all(b"\n" not in tok.vocab[new][:-1] for _, _, new in tok.merges)
    assert len(tok.merges) < 300 - 256
    assert len(bpe.train(TEXT, vocab_size=300, mode="naive").merges) > len(tok.merges)
    for line in ["the cat sat\n", "on the mat\n", "no cat\n"]:
        assert [tok.token_to_id(line)] == tok.encode(line)

    text = "the cat sat\non the mat, not a line we saw\nno cat"
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    # The same ids as the literal rule, line by line.
    by_lines = [
        encode_reference(list(piece.encode()), tok.ranks) for piece in text.splitlines(True)
    ]
    assert ids == [token for line_ids in by_lines for token in line_ids]
    assert [tok.encode_piece(p) for p in tok.pieces(text)] == by_lines
    # The scrubber's view: one chunk per line, cut back to the first k merges.
    assert [c.ids for c in encode_chunks(tok, text)] == by_lines
    assert tok.encode(text, merge_limit=0) == list(text.encode())

    loaded = loads(dumps(tok))
    assert loaded.mode == "lines" and loaded.merges == tok.merges
    assert loaded.encode(text) == ids


def test_an_unregistered_mode_is_refused_by_name():
    with pytest.raises(ValueError, match="unknown mode 'lines'; choose one of naive, chunked"):
        bpe.train(TEXT, vocab_size=300, mode="lines")


def test_registering_a_taken_name_or_removing_a_built_in_is_refused(lines_mode):
    with pytest.raises(ValueError, match="already registered"):
        modes.register_mode(LinesMode())
    with pytest.raises(ValueError, match="built-in"):
        modes.unregister_mode("words")
    assert modes.mode_names() == ("naive", "chunked", "words", "lines")
    assert bpe.MODES == ("naive", "chunked", "words")


@pytest.mark.parametrize("name", ["naive", "chunked", "words"])
def test_every_built_in_mode_says_what_the_train_form_shows(name):
    mode = modes.get_mode(name)
    assert mode.name == name and mode.label and mode.description
    assert mode.byte_level == (name != "words")


def test_a_mode_that_cannot_say_its_split_is_refused_by_the_exports(lines_mode):
    tok = bpe.train(TEXT, vocab_size=280, mode="lines")
    for export in (to_hf_json, to_tiktoken_encoding):
        with pytest.raises(ExportError, match="cannot export a 'lines' tokeniser"):
            export(tok)
    assert tok.fast_path is None


def test_a_mode_that_says_its_split_exports_with_it(said_lines_mode):
    tiktoken = pytest.importorskip("tiktoken")
    tok = bpe.train(TEXT, vocab_size=280, mode="said-lines")
    text = "the cat sat\non the mat, not a line we saw\nno cat"
    encoding = to_tiktoken_encoding(tok)
    assert isinstance(encoding, tiktoken.Encoding)
    assert encoding.encode_ordinary(text) == tok.encode(text)
    hf = pytest.importorskip("tokenizers").Tokenizer.from_str(to_hf_json(tok))
    assert hf.encode(text).ids == tok.encode(text)
    # Not one of the patterns known to split alike in tiktoken's engine: no fast path.
    assert tok.fast_path is None
