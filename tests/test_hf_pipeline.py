"""Synthetic tokenizer.json files, composed from every supported HF component, give the ids and
the text HF `tokenizers` gives when it loads the same file.

Each example draws a normalizer and a pre-tokenizer sequence, the BPE model's options
(byte_fallback, unk and fuse_unk, subword prefix or word suffix, ignore_merges), added tokens
with random flags, a decoder and a post-processor; HF's own BpeTrainer learns a small vocabulary
for that pipeline, and both libraries then encode random texts with and without the special
tokens the post-processor adds.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpe import formats
from bpe.hf.pre_tokenizers import Splitter, apply_behavior, find_spans
from bpe.importers import import_bytes
from bpe.patterns import BUILT_IN_PATTERNS, compile_pattern
from tests.strategies import TEXTS

tokenizers = pytest.importorskip("tokenizers")
from tokenizers import (  # noqa: E402
    AddedToken,
    Regex,
    Tokenizer,
    decoders,
    models,
    normalizers,
    pre_tokenizers,
    processors,
    trainers,
)

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs!",
    "Café, naïve résumé — déjà vu. İstanbul ΣΊΣΥΦΟΣ σοφός 中文字符 中文 😀 emoji",
    "def f(x): return x**2 + 12345 * 3.14  # numbers 0123456789 and under_scores",
    "  Leading spaces,\ttabs\tand\nnew lines\n\nrepeat repeat repeat the the the",
    "hello hello help helpful helper he she they them there their ▁▁ marks",
]
# Characters the texts are made of: the corpus's, some it never saw, and combining marks.
ALPHABET = "".join(sorted(set("".join(CORPUS)))) + "\u0301\u0308ʼ\u00a0\u3000Ωж\x00"
ADDED = ["<s>", "</s>", "<x>", "hello", "ab", " tab", "中文", "[MASK]"]

NORMALIZERS = [
    normalizers.NFC(),
    normalizers.NFD(),
    normalizers.NFKC(),
    normalizers.NFKD(),
    normalizers.Lowercase(),
    normalizers.Strip(),
    normalizers.Strip(left=False, right=True),
    normalizers.StripAccents(),
    normalizers.Prepend("\u2581"),
    normalizers.Replace(" ", "\u2581"),
    normalizers.Replace(Regex("[0-9]+"), "#"),
]
BEHAVIORS = ["removed", "isolated", "merged_with_previous", "merged_with_next", "contiguous"]


@st.composite
def pre_tokenizer_steps(draw: st.DrawFn) -> list[object]:
    def split() -> object:
        pattern = draw(st.sampled_from([" ", "e", Regex(r"\s+"), Regex(r"\p{L}+"), Regex("[.,!]")]))
        return pre_tokenizers.Split(
            pattern, draw(st.sampled_from(BEHAVIORS)), invert=draw(st.booleans())
        )

    makers = {
        "split": split,
        "metaspace": lambda: pre_tokenizers.Metaspace(
            prepend_scheme=draw(st.sampled_from(["always", "first", "never"])),
            split=draw(st.booleans()),
        ),
        "whitespace": pre_tokenizers.Whitespace,
        "whitespace_split": pre_tokenizers.WhitespaceSplit,
        "punctuation": lambda: pre_tokenizers.Punctuation(draw(st.sampled_from(BEHAVIORS))),
        "digits": lambda: pre_tokenizers.Digits(individual_digits=draw(st.booleans())),
    }
    names = draw(st.lists(st.sampled_from(sorted(makers)), max_size=3))
    steps = [makers[name]() for name in names]
    if draw(st.booleans()):  # byte-level vocabularies: ByteLevel last
        steps.append(
            pre_tokenizers.ByteLevel(
                add_prefix_space=draw(st.booleans()), use_regex=draw(st.booleans())
            )
        )
    return steps


@st.composite
def tokenizer_files(draw: st.DrawFn) -> str:
    steps = draw(pre_tokenizer_steps())
    byte_level = bool(steps) and isinstance(steps[-1], pre_tokenizers.ByteLevel)
    affix = draw(st.sampled_from(["none", "prefix", "suffix"]))
    byte_fallback = not byte_level and draw(st.booleans())
    use_unk = draw(st.booleans())
    options: dict[str, object] = {
        "fuse_unk": draw(st.booleans()),
        "byte_fallback": byte_fallback,
        "ignore_merges": draw(st.booleans()),
    }
    if use_unk:
        options["unk_token"] = "<unk>"
    if affix == "prefix":
        options["continuing_subword_prefix"] = "##"
    if affix == "suffix":
        options["end_of_word_suffix"] = "</w>"
    model = models.BPE(**options)
    tok = Tokenizer(model)
    chosen = draw(st.lists(st.sampled_from(NORMALIZERS), max_size=3))
    if chosen:
        tok.normalizer = normalizers.Sequence(chosen) if len(chosen) > 1 else chosen[0]
    if steps:
        tok.pre_tokenizer = pre_tokenizers.Sequence(steps) if len(steps) > 1 else steps[0]
    trainer_options = {k: v for k, v in options.items() if k.endswith(("prefix", "suffix"))}
    trainer = trainers.BpeTrainer(
        vocab_size=draw(st.integers(60, 400)),
        special_tokens=["<unk>"] if use_unk else [],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet() if byte_level else [],
        show_progress=False,
        **trainer_options,
    )
    tok.train_from_iterator(CORPUS, trainer)
    if byte_fallback:
        data = json.loads(tok.to_str())
        vocab = data["model"]["vocab"]
        for b in range(256):
            vocab.setdefault(f"<0x{b:02X}>", len(vocab))
        tok = Tokenizer.from_str(json.dumps(data))
    for content in draw(st.lists(st.sampled_from(ADDED), max_size=4, unique=True)):
        token = AddedToken(
            content,
            single_word=draw(st.booleans()),
            lstrip=draw(st.booleans()),
            rstrip=draw(st.booleans()),
            normalized=draw(st.booleans()),
            special=draw(st.booleans()),
        )
        tok.add_tokens([token])
    tok.add_special_tokens(["<bos>"])
    bos = tok.token_to_id("<bos>")
    tok.post_processor = draw(
        st.sampled_from(
            [
                processors.TemplateProcessing(
                    single="<bos> $A <bos>", special_tokens=[("<bos>", bos)]
                ),
                processors.ByteLevel(),
                processors.RobertaProcessing(("<bos>", bos), ("<bos>", bos)),
            ]
        )
    )
    decoder_choices = [
        decoders.Sequence(
            [
                decoders.Replace("\u2581", " "),
                decoders.ByteFallback(),
                decoders.Fuse(),
                decoders.Strip(" ", 1, 0),
            ]
        ),
        decoders.Metaspace(prepend_scheme=draw(st.sampled_from(["always", "first", "never"]))),
        decoders.BPEDecoder(suffix="</w>"),
        # Strip's `stop` is left 0: `tokenizers` panics on a token made only of its character.
        decoders.Sequence([decoders.ByteFallback(), decoders.Strip("a", 2, 0)]),
    ]
    if byte_level:
        decoder_choices.append(decoders.ByteLevel())
    tok.decoder = draw(st.sampled_from(decoder_choices))
    return str(tok.to_str())


TEXT = st.lists(
    st.one_of(st.text(ALPHABET, max_size=6), st.sampled_from([*ADDED, " ", "  ", "\u2581"])),
    max_size=12,
).map("".join)


@settings(max_examples=250, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    raw=tokenizer_files(),
    texts=st.lists(TEXT, min_size=1, max_size=6),
    id_lists=st.lists(st.lists(st.integers(0, 10_000), max_size=10), max_size=3),
)
def test_composed_files_encode_and_decode_like_tokenizers(
    raw: str, texts: list[str], id_lists: list[list[int]]
) -> None:
    hf = Tokenizer.from_str(raw)
    tok = import_bytes(raw.encode(), filename="composed.json")
    again = formats.loads(formats.dumps(tok))
    for text in [*texts, " ".join(CORPUS)]:
        for add in (False, True):
            want = hf.encode(text, add_special_tokens=add).ids
            assert tok.encode(text, allowed_special="all", add_special_tokens=add) == want, (
                text,
                add,
            )
            assert again.encode(text, allowed_special="all", add_special_tokens=add) == want
        ids = hf.encode(text).ids
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False), text
    for ids in id_lists:  # ids no text gives: bytes that are not UTF-8, lone marks
        ids = [i % hf.get_vocab_size() for i in ids]
        assert tok.decode(ids) == hf.decode(ids, skip_special_tokens=False), ids


def test_a_repeated_word_encodes_by_its_place_like_tokenizers() -> None:
    # Words are encoded once per distinct (text, origin): the first word of a text can take
    # another form (Metaspace's "first" prepends only to it) than the same text later on.
    tok = Tokenizer(models.BPE(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(prepend_scheme="first")]
    )
    trainer = trainers.BpeTrainer(vocab_size=120, special_tokens=["<unk>"], show_progress=False)
    tok.train_from_iterator(["word word word other word", *CORPUS], trainer)
    ours = import_bytes(tok.to_str().encode(), filename="repeated.json")
    first, *_, last = tok.encode("word word").tokens
    assert first.startswith("\u2581") and not last.startswith("\u2581")  # the case is there
    for text in ["word word word", "word other word word", "other word other"]:
        assert ours.encode(text) == tok.encode(text).ids, text


@settings(max_examples=300, deadline=None)
@given(text=st.one_of(TEXTS, TEXT), origin=st.integers(0, 3), which=st.integers(0, 100))
def test_isolated_splits_by_a_built_in_pattern_keep_every_piece_and_origin(
    text: str, origin: int, which: int
) -> None:
    # Such a split runs as one `split` in C (bpe.hf.pre_tokenizers.Splitter._isolating): its
    # words and origins must be the matches, the stretches between them, and their alignment.
    pattern = sorted(BUILT_IN_PATTERNS)[which % len(BUILT_IN_PATTERNS)]
    compiled = compile_pattern(pattern)
    splitter = Splitter(compiled, "Isolated")
    assert splitter._isolating is not None
    want = [
        (text[s:e], max(0, min(origin, e) - s))
        for s, e in apply_behavior(find_spans(text, compiled), "Isolated")
    ]
    assert splitter((text, origin)) == want
