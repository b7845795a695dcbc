"""Text normalisation shared by linking, passage splitting and TF-IDF, and sentence splitting (`split_sentences`,
for the reader and for cutting documents into passages).

`fold` lower-cases a string without changing its length, so that character offsets found in the
folded text are offsets in the original text too, and folds every character the same way
whatever surrounds it (Python's ``str.lower`` writes a capital sigma as a final sigma at the end
of a word; here both sigmas fold to ``σ``). A character whose lower case is longer (``"İ"``) is
kept as it is.

`nfc` puts text in Unicode's composed form (NFC), so that "Zoë" typed as "o" and a combining diaeresis is the
same name as "Zoë" typed as one character; `nfc_spans` does it keeping a map back to the original's offsets.

`is_token_boundary` follows the BERT basic tokenizer: words split at whitespace, punctuation
(Unicode category P* and the ASCII symbols) and CJK ideographs, and nowhere else, so a name that
starts and ends at such boundaries covers whole word pieces.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache


def fold(text: str) -> str:
    """Case-fold `text` character by character, keeping its length."""
    lowered = text.lower()
    if len(lowered) != len(text):
        lowered = "".join(c.lower() if len(c.lower()) == 1 else c for c in text)
    return lowered.replace("ς", "σ")


def nfc(text: str) -> str:
    """`text` in Unicode normal form C (itself, at no cost, when it already is)."""
    return text if unicodedata.is_normalized("NFC", text) else unicodedata.normalize("NFC", text)


def nfc_spans(text: str) -> tuple[str, list[int] | None]:
    """``(nfc(text), starts)``: ``starts[i]`` is the offset in `text` where character i of the normal form begins,
    ``starts[len]`` is ``len(text)``; None when `text` is in normal form already (offsets are the same). Text is
    normalised a run at a time: a base character with its combining marks and whatever composes with them (Hangul
    jamo, the Indic vowel signs that are base characters themselves). Should the runs' forms not make the
    normal form of the whole (no known case), `text` is returned as it is, with None."""
    if unicodedata.is_normalized("NFC", text):
        return text, None
    pieces, starts, begin = [], [], 0
    for i in range(1, len(text) + 1):
        if i < len(text) and (unicodedata.combining(text[i]) or _is_jamo(text[i]) or _composes(text[begin:i], text[i])):
            continue
        piece = unicodedata.normalize("NFC", text[begin:i])
        pieces.append(piece)
        starts.extend([begin] * len(piece))
        begin = i
    out = "".join(pieces)
    if not unicodedata.is_normalized("NFC", out):
        return text, None
    return out, starts + [len(text)]


def _composes(run: str, char: str) -> bool:
    """Whether `char`, a base character, composes with the run before it (Bengali "\u09c7" + "\u09be")."""
    return unicodedata.normalize("NFC", run + char) != unicodedata.normalize("NFC", run) + char


def _is_jamo(char: str) -> bool:
    cp = ord(char)
    return 0x1100 <= cp <= 0x11FF or 0xA960 <= cp <= 0xA97F or 0xD7B0 <= cp <= 0xD7FF


@lru_cache(maxsize=1 << 16)
def is_separator(char: str) -> bool:
    """True for characters that BERT's basic tokenizer splits on or around."""
    if char.isspace():
        return True
    cp = ord(char)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    category = unicodedata.category(char)
    if category.startswith("P") or category in ("Cc", "Cf", "Zs"):
        return True
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF or 0x2A700 <= cp <= 0x2B73F
            or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def is_token_boundary(text: str, i: int) -> bool:
    """True when position `i` (between ``text[i-1]`` and ``text[i]``) separates two words."""
    if i <= 0 or i >= len(text):
        return True
    return is_separator(text[i - 1]) or is_separator(text[i])


_SENTENCE_END = re.compile(r"(?<=[.!?])([\"')\]]*)\s+(?=[\"'(\[]?[A-Z0-9])")
_ABBREVIATION = re.compile(r"\b(?:[A-Z]|e\.g|i\.e|c|ca|vs|St|Dr|Mr|Mrs|Ms|Jr|Sr|No|Vol|pp|Mt|Gen|Col|Lt|Capt|Rev|Prof|"
                           r"Inc|Ltd|Co|Corp|U\.S|U\.K)\.$")
_INITIAL = re.compile(r"\b[A-Z]\.$")
# after a single capital and a full stop, these words start a sentence ("World War I. The war ..."); an initial
# is followed by a name ("J. Smith")
_SENTENCE_STARTERS = frozenset("A An The He She It They We I His Her Its Their This That These Those There In On At "
                               "After Before During From Following However In Later Since When While".split())


def split_sentences(text: str) -> list[tuple[int, int]]:
    """Character spans of the sentences of `text`, in order, covering its non-blank text: a break after
    ., ! or ? followed by white space and a capital or digit, unless the word before the full stop is an
    initial or a common abbreviation ("J.", "Dr.", "St.", "U.S."); a single capital before the full stop ends a
    sentence when a common sentence-starting word follows ("World War I. The ...", `_SENTENCE_STARTERS`)."""
    spans, start = [], 0
    for m in _SENTENCE_END.finditer(text):
        before = text[start : m.start()]
        if _ABBREVIATION.search(before):
            following = re.match(r"[\"'(\[]?(\w+)", text[m.end():])
            if not (_INITIAL.search(before) and following and following.group(1) in _SENTENCE_STARTERS):
                continue
        spans.append((start, m.end(1)))
        start = m.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        while a < b and text[a].isspace():
            a += 1
        while b > a and text[b - 1].isspace():
            b -= 1
        if b > a:
            out.append((a, b))
    return out
