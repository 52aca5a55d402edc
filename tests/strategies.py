"""Hypothesis strategies shared by the library tests."""

from __future__ import annotations

import unicodedata

from hypothesis import strategies as st

# Characters Python's own Unicode tables know (Unicode 15 for 3.11/3.12); characters assigned
# later can be split differently by the `regex` module and by HF's and tiktoken's engines.
KNOWN_CHARACTERS = st.characters(
    blacklist_categories=("Cs", "Cn"),  # no lone surrogates, nothing unassigned
)

# Pieces that hit the hard cases: runs, alternations, multi-byte characters, whitespace runs.
HARD_PIECES = st.sampled_from(
    [
        "a",
        "aa",
        "aaaaa",
        "ab",
        "abababa",
        " ",
        "  ",
        "\n",
        "\t\n",
        "\r\n",
        "é",
        "😀",
        "😀😀😀",
        "中文",
        "中中中",
        "the ",
        " the",
        "'s",
        "123",
        "4567",
        ".",
        "!!",
        "<|x|>",
    ]
)

TEXTS = st.one_of(
    st.text(KNOWN_CHARACTERS, max_size=80),
    st.lists(HARD_PIECES, max_size=40).map("".join),
    st.lists(st.one_of(HARD_PIECES, st.text(KNOWN_CHARACTERS, max_size=3)), max_size=30).map(
        "".join
    ),
)


def normalise_words(text: str) -> str:
    """What words mode gives back: the whitespace-separated words joined by single spaces."""
    return " ".join(text.split())


def is_known(text: str) -> bool:
    return all(unicodedata.category(c) not in ("Cn", "Cs") for c in text)


# Words in many scripts, for the encoders' script-specific branches (bpe.modes.byte_symbols):
# two-byte scripts with spaces (Cyrillic, Greek, Arabic, Hebrew, Armenian), three-byte ones with
# spaces (Devanagari, Tamil, Georgian, Ethiopic, Hangul) and without (Chinese, Japanese kana,
# Thai, Khmer, Myanmar), four-byte ones (Adlam, emoji), and accented Latin.
SCRIPT_WORDS = {
    "latin": ["derechos", "Menschenwürde", "égalité", "façon", "Dirêtu", "ŋgɔ"],
    "cyrillic": ["права", "человека", "свобода", "Всеобщая", "декларация"],
    "greek": ["δικαιώματα", "ἀνθρώπου", "ελευθερία"],
    "arabic": ["حقوق", "الإنسان", "الحرية", "لكل"],
    "hebrew": ["זכויות", "האדם", "חירות"],
    "armenian": ["իրավունք", "մարդու"],
    "devanagari": ["मानव", "अधिकार", "स्वतंत्रता", "सार्वभौम"],
    "tamil": ["மனித", "உரிமைகள்"],
    "georgian": ["ადამიანის", "უფლებათა"],
    "ethiopic": ["የሰው", "ልጅ", "መብቶች"],
    "hangul": ["세계", "인권", "선언", "모든"],
    "chinese": ["世界人权宣言", "人人生而自由", "在尊严和权利上一律平等"],
    "japanese": ["すべての人間は", "生まれながらにして自由であり", "カタカナ"],
    "thai": ["ปฏิญญาสากลว่าด้วยสิทธิมนุษยชน", "มนุษย์"],
    "khmer": ["សេចក្តីប្រកាស", "សិទ្ធិមនុស្ស"],
    "myanmar": ["လူ့အခွင့်အရေး", "ကမ္ဘာ"],
    "adlam": ["𞤀𞤣𞤤𞤢𞤥", "𞤆𞤵𞤤𞤢𞥄𞤪"],
    "emoji": ["😀", "👍🏽", "🇫🇷"],
}
SEPARATORS = st.sampled_from(["", " ", "  ", "\n", ", ", "。", "、", "।", "؟ ", "-"])
WORLD_WORDS = st.sampled_from([word for words in SCRIPT_WORDS.values() for word in words])
# Texts of words from one script or many, joined by spaces, by nothing, or by punctuation.
WORLD_TEXTS = st.lists(st.tuples(WORLD_WORDS, SEPARATORS), max_size=30).map(
    lambda parts: "".join(word + sep for word, sep in parts)
)
# One script per text, repeated words: what a vocabulary trained on that script learns from.
SCRIPT_TEXTS = st.sampled_from(sorted(SCRIPT_WORDS)).flatmap(
    lambda script: st.lists(
        st.tuples(st.sampled_from(SCRIPT_WORDS[script]), SEPARATORS), min_size=1, max_size=40
    ).map(lambda parts: "".join(word + sep for word, sep in parts))
)
