"""The sample corpus a first-time visitor can try: generated here, in the project's own words.

A small seeded grammar writes a few hundred lines of plain English (a workshop's notes on
tokenisers, weather and bread), with numbers, a little Python and some non-Latin lines, so
naive and chunked training differ visibly: naive merges across word boundaries (`e t`, `, the`),
chunked never does. The text is the same on every machine and every start (a fixed seed), so
the sample corpus is stored once and its tokenisers are trained once and then reused.
"""

from __future__ import annotations

import random

SAMPLE_NAME = "Sample: workshop notes (generated)"
SAMPLE_FILENAME = "sample-workshop-notes.txt"
SAMPLE_VOCAB_SIZE = 512
SAMPLE_LINES = 900
_SEED = 20261201

_SUBJECTS = (
    "the tokeniser",
    "our baker",
    "the weather report",
    "a careful reader",
    "the new model",
    "every student",
    "the night train",
    "my neighbour",
    "the workshop",
    "this little script",
    "the river",
    "a patient teacher",
    "the old library",
    "the market",
    "each merge",
)
_VERBS = (
    "counts",
    "splits",
    "remembers",
    "bakes",
    "watches",
    "learns",
    "shares",
    "compares",
    "measures",
    "follows",
    "opens",
    "repeats",
    "joins",
    "finds",
    "explains",
)
_OBJECTS = (
    "the most frequent pair",
    "fresh bread before seven",
    "the longest words",
    "rain in the north",
    "every byte of the text",
    "a short poem",
    "the same sentence twice",
    "numbers like 1,024",
    "the spaces between words",
    "a list of prices",
    "the morning news",
    "the first chapter",
    "tokens that start with a space",
    "the slow afternoon",
    "what it saw yesterday",
)
_ENDINGS = (
    ".",
    ".",
    ".",
    "!",
    "?",
    ", and then it rests.",
    ", again and again.",
    " before lunch.",
    " with great care.",
    ", as always.",
    " in the evening.",
    " (twice).",
)
_CODE = (
    "def merge(ids, pair, new_id):",
    "    out, i = [], 0",
    "    while i < len(ids):",
    "        if ids[i:i + 2] == list(pair):",
    "            out.append(new_id)",
    "            i += 2",
    "        else:",
    "            out.append(ids[i])",
    "            i += 1",
    "    return out",
)
_OTHER_SCRIPTS = (
    "東京の朝はとても静かです。",
    "北京今天下雨，我们在图书馆读书。",
    "Привет, мир! Сегодня мы считаем пары.",
    "Καλημέρα· το ψωμί είναι ζεστό.",
    "¡Buenos días! El panadero abre a las siete.",
    "Grüße aus Köln: das Wetter ist schön.",
)


def sample_text() -> str:
    """The sample corpus: about 50 kB of generated lines, identical on every call."""
    rng = random.Random(_SEED)
    lines: list[str] = []
    for n in range(SAMPLE_LINES):
        kind = rng.random()
        if kind < 0.08:
            start = rng.randrange(len(_CODE) - 3)
            lines.extend(_CODE[start : start + 3])
        elif kind < 0.14:
            lines.append(rng.choice(_OTHER_SCRIPTS))
        elif kind < 0.2:
            price = rng.randrange(1, 500) + rng.randrange(100) / 100
            lines.append(f"Item {n}: {rng.choice(_OBJECTS)} costs {price:.2f} euros.")
        else:
            sentence = (
                f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_OBJECTS)}"
                f"{rng.choice(_ENDINGS)}"
            )
            lines.append(sentence[0].upper() + sentence[1:])
        if rng.random() < 0.1:
            lines.append("")
    return "\n".join(lines) + "\n"
