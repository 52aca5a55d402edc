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
