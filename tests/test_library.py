"""The bpe library's training modes, encode/decode semantics and the worked examples of
docs/algorithms.md."""

from __future__ import annotations

import ast
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpe
import bpe.training
from bpe.encoder import _encode_by_rescanning, _encode_with_heap
from bpe.patterns import GPT2_PATTERN, GPT4_PATTERN, split_chunks
from bpe.reference import get_pair_counts, merge_pair
from tests.strategies import TEXTS, normalise_words

WORKED_MERGES = [(97, 97, 256), (256, 97, 257), (257, 98, 258)]
LOREM = (
    "Eius eius dolor tempora consectetur sed. Amet quaerat quiquia quisquam quaerat. "
    "Quaerat quisquam quiquia dolore porro. Quisquam ut voluptatem quiquia labore "
    "numquam. Quiquia quaerat numquam quaerat. Dolorem numquam ipsum quaerat est.\n"
) * 3
TRAINER = "reference"


def worked_example_tokenizer() -> bpe.Tokenizer:
    return bpe.Tokenizer(mode="naive", merges=list(WORKED_MERGES))


# ----- encode/decode, exactly (docs/algorithms.md, "Encoding") ---------------------------------
def test_worked_encode_examples():
    tok = worked_example_tokenizer()
    assert tok.vocab[256] == b"aa" and tok.vocab[257] == b"aaa" and tok.vocab[258] == b"aaab"
    assert tok.encode("abaaab") == [97, 98, 258]
    assert tok.encode("aaaa") == [256, 256]
    assert tok.decode([97, 98, 258]) == "abaaab"


def test_cut_off_emoji_decodes_to_replacement_character():
    tok = worked_example_tokenizer()
    emoji = "😀".encode()
    assert tok.decode(list(emoji[:2])) == "\ufffd"
    assert tok.decode_bytes(list(emoji[:2])) == emoji[:2]
    assert tok.decode(list(emoji)) == "😀"


def test_decode_rejects_unknown_id():
    with pytest.raises(ValueError, match="not in this vocabulary"):
        worked_example_tokenizer().decode([259])


# ----- training (docs/algorithms.md, "Training") -------------------------------------------------
def test_helpers_count_overlaps_and_merge_left_to_right():
    assert get_pair_counts([([97, 97, 97], 1)]) == {(97, 97): 2}
    assert get_pair_counts([([1, 2], 3), ([1, 2, 1], 2)]) == {(1, 2): 5, (2, 1): 2}
    assert merge_pair([97, 97, 97], (97, 97), 256) == [256, 97]
    assert merge_pair([1, 2, 1, 2, 1], (1, 2), 9) == [9, 9, 1]


def test_naive_training_learns_qu_first_on_lorem_ipsum():
    # On lorem ipsum the commonest pair of bytes is "qu" (docs/algorithms.md, "Training").
    tok = bpe.train(LOREM, vocab_size=260, mode="naive", trainer=TRAINER)
    assert tok.vocab[256] == b"qu"
    counts = tok.training.merge_counts
    assert counts == sorted(counts, reverse=True)
    assert len(tok.merges) == 4


def test_naive_merges_may_cross_words_but_chunked_merges_may_not():
    naive = bpe.train(LOREM, vocab_size=300, mode="naive", trainer=TRAINER)
    chunked = bpe.train(LOREM, vocab_size=300, mode="chunked", trainer=TRAINER)
    chunks = set(split_chunks(LOREM, GPT4_PATTERN))
    naive_tokens = [naive.vocab[new] for _, _, new in naive.merges]
    assert any(not any(t in c.encode() for c in chunks) for t in naive_tokens)
    for _, _, new in chunked.merges:
        assert any(chunked.vocab[new] in c.encode() for c in chunks)
    # Chunked compresses less well on its own corpus: the cost of keeping words apart.
    assert chunked.training.tokens_after[-1] >= naive.training.tokens_after[-1]


def test_tie_goes_to_the_smallest_pair():
    # (97, 98) and (98, 99) and (99, 97) all occur twice; (97, 98) is smallest.
    tok = bpe.train("abcabc", vocab_size=257, mode="naive", trainer=TRAINER)
    assert tok.merges == [(97, 98, 256)]
    assert tok.training.merge_counts == [2]


def test_overlapping_run_counts_twice_and_merges_left_to_right():
    tok = bpe.train("aaabdaaabac", vocab_size=259, mode="naive", trainer=TRAINER)
    assert tok.merges == [(97, 97, 256), (97, 98, 257), (256, 257, 258)]
    assert tok.training.merge_counts == [4, 2, 2]
    assert tok.training.tokens_after == [9, 7, 5]


def test_min_frequency_stops_training():
    tok = bpe.train("abab cd", vocab_size=300, mode="naive", min_frequency=2, trainer=TRAINER)
    assert tok.merges == [(97, 98, 256)]


def test_tiny_corpus_stops_when_no_pair_is_left():
    tok = bpe.train("ab", vocab_size=1000, mode="naive", trainer=TRAINER, special_tokens=["<s>"])
    assert tok.merges == [(97, 98, 256)]
    assert tok.special_tokens == {"<s>": 257}
    assert tok.vocab_size == 258


@pytest.mark.parametrize("mode", ["naive", "chunked"])
def test_special_tokens_take_the_last_ids(mode):
    specials = ["<eot>", "<pad>"]
    tok = bpe.train(LOREM, vocab_size=270, mode=mode, special_tokens=specials, trainer=TRAINER)
    assert tok.vocab_size == 270
    assert tok.special_tokens == {"<eot>": 268, "<pad>": 269}
    assert max(new for _, _, new in tok.merges) == 267


def test_special_tokens_are_text_unless_allowed():
    tok = bpe.train(
        LOREM, vocab_size=270, mode="chunked", special_tokens=["<eot>"], trainer=TRAINER
    )
    text = "dolor<eot>sed"
    plain = tok.encode(text)
    assert tok.special_tokens["<eot>"] not in plain
    allowed = tok.encode(text, allowed_special="all")
    assert allowed.count(tok.special_tokens["<eot>"]) == 1
    assert allowed == tok.encode(text, allowed_special={"<eot>"})
    assert tok.decode(allowed) == text == tok.decode(plain)
    with pytest.raises(ValueError, match="not a special token"):
        tok.encode(text, allowed_special={"<nope>"})


@pytest.mark.parametrize(
    ("settings_", "message"),
    [
        ({"vocab_size": 200}, "vocab_size must be at least 256"),
        ({"vocab_size": 300, "mode": "bytes"}, "unknown mode"),
        ({"vocab_size": 300, "trainer": "fast"}, "unknown trainer"),
        ({"vocab_size": 300, "min_frequency": 0}, "min_frequency"),
        ({"vocab_size": 300, "pattern": "(unclosed"}, "not a valid regex"),
        ({"vocab_size": 300, "special_tokens": ["<a>", "<a>"]}, "given twice"),
        ({"vocab_size": 300, "special_tokens": [""]}, "non-empty"),
    ],
)
def test_bad_settings_say_what_to_fix(settings_, message):
    with pytest.raises(ValueError, match=message):
        bpe.train("some text", **{"trainer": TRAINER, **settings_})


def test_patterns_split_as_documented():
    assert split_chunks("I'm here  now!\n", GPT4_PATTERN) == [
        "I",
        "'m",
        " here",
        " ",
        " now",
        "!\n",
    ]
    assert split_chunks("I'm 12345", GPT2_PATTERN) == ["I", "'m", " 12345"]
    assert split_chunks("12345", GPT4_PATTERN) == ["123", "45"]
    assert bpe.resolve_pattern(r"\w+|\s+") == r"\w+|\s+"
    # Capturing groups do not change what a chunk is.
    assert split_chunks("ab cd", r"(\w)\w|\s") == ["ab", " ", "cd"]


# ----- encode reproduces training ---------------------------------------------------------------
@pytest.mark.parametrize("mode", ["naive", "chunked", "words"])
def test_encoding_the_training_text_reproduces_the_final_token_count(mode):
    tok = bpe.train(LOREM, vocab_size=320, mode=mode, trainer=TRAINER)
    assert tok.merges
    # In words mode the count includes the `</w>` symbols, as training counted them.
    assert len(tok.encode(LOREM)) == tok.training.tokens_after[-1]


@settings(max_examples=60, deadline=None)
@given(text=TEXTS, extra=st.integers(0, 40), mode=st.sampled_from(["naive", "chunked", "words"]))
def test_property_encode_matches_training_token_count(text, extra, mode):
    base = 256 if mode != "words" else len(set("".join(text.split()))) + 2
    tok = bpe.train(text, vocab_size=base + extra, mode=mode, trainer=TRAINER)
    final = tok.training.tokens_after[-1] if tok.merges else tok.training.initial_tokens
    assert len(tok.encode(text)) == final


@settings(max_examples=40, deadline=None)
@given(text=TEXTS, extra=st.integers(0, 30))
def test_property_chunked_tokens_never_straddle_a_chunk(text, extra):
    tok = bpe.train(text, vocab_size=256 + extra, mode="chunked", trainer=TRAINER)
    chunk_ends, offset = set(), 0
    for chunk in split_chunks(text, GPT4_PATTERN):
        offset += len(chunk.encode())
        chunk_ends.add(offset)
    token_ends, offset = set(), 0
    for token_id in tok.encode(text):
        offset += len(tok.vocab[token_id])
        token_ends.add(offset)
    assert chunk_ends <= token_ends


@settings(max_examples=80, deadline=None)
@given(text=TEXTS, training=TEXTS, mode=st.sampled_from(["naive", "chunked"]))
def test_property_decode_inverts_encode(text, training, mode):
    tok = bpe.train(training + text[: len(text) // 2], vocab_size=290, mode=mode, trainer=TRAINER)
    assert tok.decode(tok.encode(text)) == text
    assert tok.decode_bytes(tok.encode(text)) == text.encode()


@settings(max_examples=300, deadline=None)
@given(
    ids=st.lists(st.sampled_from([97, 98, 99]), max_size=200),
    merges=st.lists(st.tuples(st.integers(0, 5), st.integers(0, 5)), max_size=12),
)
def test_property_heap_encoder_equals_rescanning(ids, merges):
    # Build a valid merge table over a tiny alphabet: ids 97..99 then new ids from 256.
    table: dict[tuple[int, int], int] = {}
    known = [97, 98, 99]
    for left, right in merges:
        pair = (known[left % len(known)], known[right % len(known)])
        if pair not in table:
            table[pair] = 256 + len(table)
            known.append(table[pair])
    assert _encode_with_heap(ids, table) == _encode_by_rescanning(list(ids), table)


def test_long_single_byte_run_encodes_like_repeated_merging():
    tok = bpe.train("a" * 1000, vocab_size=270, mode="naive", trainer=TRAINER)
    text = "a" * 100_000
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert ids == _encode_by_rescanning(list(text.encode()), tok.ranks)


# ----- words mode ---------------------------------------------------------------------------------
def test_words_mode_ids_and_end_of_word():
    tok = bpe.train("low lower lowest newest widest", vocab_size=40, mode="words", trainer=TRAINER)
    assert tok.alphabet == sorted(set("lowernstid"))
    assert tok.end_of_word_id == len(tok.alphabet)
    assert tok.special_tokens == {"<unk>": tok.base_size + len(tok.merges)}
    est = tok.token_to_id("est</w>")
    assert est is not None and tok.ends_word(est)
    assert tok.id_to_token(est) == "est</w>"


def test_words_mode_decode_is_lossy_on_whitespace_by_design():
    text = "low  lower\nlowest\t newest "
    tok = bpe.train(text, vocab_size=40, mode="words", trainer=TRAINER)
    assert tok.decode(tok.encode(text)) == "low lower lowest newest"


def test_words_mode_unknown_characters_map_to_unk():
    tok = bpe.train("low lower", vocab_size=30, mode="words", trainer=TRAINER)
    ids = tok.encode("lqw")
    assert tok.special_tokens["<unk>"] in ids
    assert tok.decode(ids) == "l<unk>w"


@settings(max_examples=40, deadline=None)
@given(text=TEXTS)
def test_property_words_round_trip_normalises_whitespace(text):
    alphabet = len(set("".join(text.split())))
    tok = bpe.train(text, vocab_size=alphabet + 2 + 10, mode="words", trainer=TRAINER)
    assert tok.decode(tok.encode(text)) == normalise_words(text)


# ----- progress and cancel ----------------------------------------------------------------------
def test_progress_reports_every_merge_and_cancel_raises():
    seen: list[bpe.Progress] = []
    bpe.train(LOREM, vocab_size=266, mode="naive", trainer=TRAINER, progress=seen.append)
    assert [p.merges_done for p in seen] == list(range(1, 11))
    assert all(p.merges_target == 10 for p in seen)
    assert [p.total_tokens for p in seen] == sorted((p.total_tokens for p in seen), reverse=True)

    calls = iter(range(100))
    with pytest.raises(bpe.TrainingCancelled) as info:
        bpe.train(LOREM, vocab_size=300, trainer=TRAINER, should_stop=lambda: next(calls) >= 3)
    assert info.value.merges_done == 3


def test_a_large_naive_text_is_checked_before_its_utf8_parts_are_joined(monkeypatch):
    # The join of a large text's UTF-8 parts is one C call of tens of ms before the trainer's
    # first check, so a check is made just before it, due or not (the threshold lowered here).
    monkeypatch.setattr(bpe.training, "_CHECK_BEFORE_JOIN", 0)
    seen: list[bpe.Progress] = []
    bpe.train(LOREM, vocab_size=266, mode="naive", trainer=TRAINER, progress=seen.append)
    assert seen[0] == bpe.Progress(0, 0, None, 0, 0)  # splitting's report, before the trainer's
    assert [p.merges_done for p in seen[1:]] == list(range(1, 11))


# ----- isolation ----------------------------------------------------------------------------------
def loaded_in_a_fresh_process(code: str, modules: tuple[str, ...]) -> list[str]:
    """Which of the modules are in sys.modules after running code in a new interpreter."""
    code += f"\nprint(sorted(m for m in {modules!r} if m in sys.modules))\n"
    result = subprocess.run(
        [sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return ast.literal_eval(result.stdout.strip())


def test_import_bpe_loads_neither_flask_nor_sqlalchemy():
    code = "import bpe, bpe.cli, bpe.token_info"
    assert loaded_in_a_fresh_process(code, ("flask", "sqlalchemy", "alembic", "webapp")) == []


def test_import_bpe_and_training_leave_the_hf_pipeline_chat_templates_and_batches_unloaded():
    """Every `bpe train` process and training job imports `bpe`: the HF pipeline, the chat
    templates and the batch encoder's process pool (about a fifth of the package's import
    time) load only when an HF import, a chat template or `encode_batch` asks for them."""
    code = "import bpe\nbpe.train('hello world, ' * 50, vocab_size=260)"
    unwanted = ("bpe.hf.pipeline", "bpe.chat_types", "bpe.batch")
    assert loaded_in_a_fresh_process(code, unwanted) == []


@pytest.mark.parametrize("trainer", ["reference", "efficient"])
def test_a_stop_asked_for_after_the_last_merge_still_cancels(trainer):
    asked = []

    def progress(p: bpe.Progress) -> None:
        if p.merges_target and p.merges_done == p.merges_target:
            asked.append(True)  # the stop arrives as the last merge completes

    with pytest.raises(bpe.TrainingCancelled) as info:
        bpe.train(
            LOREM,
            vocab_size=266,
            mode="naive",
            trainer=trainer,
            progress=progress,
            should_stop=lambda: bool(asked),
        )
    assert info.value.merges_done == 10
