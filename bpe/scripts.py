"""Which writing system a text is in, and whether it separates its words with spaces.

- `dominant_script(text)`: the Unicode script (the `Script` property, as the `regex` module's
  `\\p{Script=...}` knows it) of most of the text's letters (general category L*). Marks,
  digits, punctuation and the `Common`/`Inherited` scripts are not counted, so Hindi is
  Devanagari whatever its danda and digits are. Only the first `SAMPLE_CHARS` characters are
  looked at: a corpus of a gigabyte is judged by its first 500,000.
- `spaced(text)`: whether "tokens per word" means anything for the text. Words split on
  whitespace are words only in scripts that put spaces between words. Han, kana, Thai, Lao,
  Khmer, Myanmar, Tibetan and the other scripts of `UNSPACED_SCRIPTS` do not (Unicode's line
  breaking, UAX #14, gives them no break opportunities at spaces to rely on: ideographs break
  anywhere, the `SA` class needs a dictionary); a whitespace-separated "word" of Chinese is a
  whole clause, and its tokens per word (75-278 in GPT-4) measures nothing. For those texts the
  figure that compares is tokens per character.

>>> dominant_script("Всеобщая декларация прав человека (1948)")
'Cyrillic'
>>> dominant_script("世界人权宣言 UDHR"), spaced("世界人权宣言 UDHR")
('Han', False)
>>> dominant_script("123 !?"), spaced("123 !?")
(None, True)
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import lru_cache

import regex

# Unicode 16's scripts (Scripts.txt's property values), Common and Inherited left out: they hold
# no letters of a writing system of their own.
SCRIPTS = [
    "Adlam",
    "Ahom",
    "Anatolian_Hieroglyphs",
    "Arabic",
    "Armenian",
    "Avestan",
    "Balinese",
    "Bamum",
    "Bassa_Vah",
    "Batak",
    "Bengali",
    "Bhaiksuki",
    "Bopomofo",
    "Brahmi",
    "Braille",
    "Buginese",
    "Buhid",
    "Canadian_Aboriginal",
    "Carian",
    "Caucasian_Albanian",
    "Chakma",
    "Cham",
    "Cherokee",
    "Chorasmian",
    "Coptic",
    "Cuneiform",
    "Cypriot",
    "Cypro_Minoan",
    "Cyrillic",
    "Deseret",
    "Devanagari",
    "Dives_Akuru",
    "Dogra",
    "Duployan",
    "Egyptian_Hieroglyphs",
    "Elbasan",
    "Elymaic",
    "Ethiopic",
    "Garay",
    "Georgian",
    "Glagolitic",
    "Gothic",
    "Grantha",
    "Greek",
    "Gujarati",
    "Gunjala_Gondi",
    "Gurmukhi",
    "Gurung_Khema",
    "Han",
    "Hangul",
    "Hanifi_Rohingya",
    "Hanunoo",
    "Hatran",
    "Hebrew",
    "Hiragana",
    "Imperial_Aramaic",
    "Inscriptional_Pahlavi",
    "Inscriptional_Parthian",
    "Javanese",
    "Kaithi",
    "Kannada",
    "Katakana",
    "Kawi",
    "Kayah_Li",
    "Kharoshthi",
    "Khitan_Small_Script",
    "Khmer",
    "Khojki",
    "Khudawadi",
    "Kirat_Rai",
    "Lao",
    "Latin",
    "Lepcha",
    "Limbu",
    "Linear_A",
    "Linear_B",
    "Lisu",
    "Lycian",
    "Lydian",
    "Mahajani",
    "Makasar",
    "Malayalam",
    "Mandaic",
    "Manichaean",
    "Marchen",
    "Masaram_Gondi",
    "Medefaidrin",
    "Meetei_Mayek",
    "Mende_Kikakui",
    "Meroitic_Cursive",
    "Meroitic_Hieroglyphs",
    "Miao",
    "Modi",
    "Mongolian",
    "Mro",
    "Multani",
    "Myanmar",
    "Nabataean",
    "Nag_Mundari",
    "Nandinagari",
    "New_Tai_Lue",
    "Newa",
    "Nko",
    "Nushu",
    "Nyiakeng_Puachue_Hmong",
    "Ogham",
    "Ol_Chiki",
    "Ol_Onal",
    "Old_Hungarian",
    "Old_Italic",
    "Old_North_Arabian",
    "Old_Permic",
    "Old_Persian",
    "Old_Sogdian",
    "Old_South_Arabian",
    "Old_Turkic",
    "Old_Uyghur",
    "Oriya",
    "Osage",
    "Osmanya",
    "Pahawh_Hmong",
    "Palmyrene",
    "Pau_Cin_Hau",
    "Phags_Pa",
    "Phoenician",
    "Psalter_Pahlavi",
    "Rejang",
    "Runic",
    "Samaritan",
    "Saurashtra",
    "Sharada",
    "Shavian",
    "Siddham",
    "SignWriting",
    "Sinhala",
    "Sogdian",
    "Sora_Sompeng",
    "Soyombo",
    "Sundanese",
    "Sunuwar",
    "Syloti_Nagri",
    "Syriac",
    "Tagalog",
    "Tagbanwa",
    "Tai_Le",
    "Tai_Tham",
    "Tai_Viet",
    "Takri",
    "Tamil",
    "Tangsa",
    "Tangut",
    "Telugu",
    "Thaana",
    "Thai",
    "Tibetan",
    "Tifinagh",
    "Tirhuta",
    "Todhri",
    "Toto",
    "Tulu_Tigalari",
    "Ugaritic",
    "Vai",
    "Vithkuqi",
    "Wancho",
    "Warang_Citi",
    "Yezidi",
    "Yi",
    "Zanabazar_Square",
]

# Scripts written without spaces between words: ideographic and syllabic East Asian scripts,
# and the South-East Asian scripts of UAX #14's class SA (plus Tibetan, whose tsheg marks
# syllables, not words).
UNSPACED_SCRIPTS = frozenset(
    {
        "Han",
        "Hiragana",
        "Katakana",
        "Bopomofo",
        "Yi",
        "Tangut",
        "Nushu",
        "Khitan_Small_Script",
        "Thai",
        "Lao",
        "Khmer",
        "Myanmar",
        "Tai_Tham",
        "Tai_Viet",
        "Tai_Le",
        "New_Tai_Lue",
        "Tibetan",
        "Balinese",
        "Javanese",
    }
)

SAMPLE_CHARS = 500_000
# Letters per whitespace-separated "word" above which a text is not written with spaces between
# words, whatever its script: longer than the words of any spaced language of the UDHR's 527
# complete texts (Greenlandic's 14.5 is the longest; Amharic written with the Ethiopic
# wordspace U+1361 instead of spaces comes to 52).
MAX_LETTERS_PER_WORD = 16.0

# One alternation of named groups: a letter's match names its script (`lastgroup`).
_CLASSIFIER = regex.compile("|".join(f"(?P<{name}>\\p{{Script={name}}})" for name in SCRIPTS))


@lru_cache(maxsize=65536)
def script_of(char: str) -> str | None:
    """The script of one character; None for Common, Inherited or unassigned ones."""
    match = _CLASSIFIER.match(char)
    return match.lastgroup if match is not None else None


@dataclass(frozen=True)
class Writing:
    """How a text is written, judged from its first `SAMPLE_CHARS` characters."""

    script: str | None  # of most of its letters; None: no letter of any script
    letters: int  # letters (general category L*) in the sample
    words: int  # whitespace-separated words in the sample

    @property
    def letters_per_word(self) -> float:
        return self.letters / self.words if self.words else 0.0

    @property
    def spaced(self) -> bool:
        """Whether its words are separated by spaces, so that tokens per word means something:
        not in a script written without spaces, nor with "words" too long to be words."""
        return self.script not in UNSPACED_SCRIPTS and self.letters_per_word <= MAX_LETTERS_PER_WORD


def writing(text: str, *, sample: int = SAMPLE_CHARS) -> Writing:
    """The script of most of the letters of `text`'s first `sample` characters (ties: the name
    first in order), and its letters and words there.

    Japanese mixes Han and kana; whichever has more letters names it, and both are unspaced.
    """
    head = text[:sample]
    letters = Counter(char for char in head if char.isalpha())
    scripts: Counter[str] = Counter()
    for char, count in letters.items():
        script = script_of(char)
        if script is not None:
            scripts[script] += count
    script = min(scripts, key=lambda name: (-scripts[name], name)) if scripts else None
    return Writing(script, sum(letters.values()), len(head.split()))


def dominant_script(text: str, *, sample: int = SAMPLE_CHARS) -> str | None:
    return writing(text, sample=sample).script


def spaced(text: str, *, sample: int = SAMPLE_CHARS) -> bool:
    return writing(text, sample=sample).spaced
