"""Entities found in a corpus's text by rules (``drkit index --entities found``), for a corpus without a
list of its entities: the people, places, organisations and dates that its titles do not name.

This is a rule-based finder, not a trained named-entity recogniser (that is `drkit.index.ner`, ``--entities
ner``); it needs nothing installed. It finds

* **dates**: "12 December 1915", "December 12, 1915", "December 1915", and a year (1000 to 2099) that is
  not part of a longer number;
* **names**: maximal runs of capitalised words ("Stephen Daldry", "Victoria Palace Theatre",
  "University of Copenhagen"): a word that starts with an upper-case letter, joined to the next by one
  space, or by one lower-case connector word of names ("of", "de", "von", "van", ...) when a capitalised
  word follows it. Leading and trailing connectors and function words are dropped ("The Hague" keeps its
  "The" only in the middle of a run). A run of one word is kept only if the corpus writes that word
  capitalised more often than not where it does not start a sentence (so "He", "In", "However" at a
  sentence's start are not names), and a month or weekday name alone is not one.

Each distinct surface form is one entity (names equal but for case are one, as in
`drkit.data.kb.EntityTable`); a form seen fewer than `min_count` times is left out.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
CONNECTORS = frozenset("of de del della der di da das do dos du la le van von y al bin ibn zu den ter".split())
FUNCTION = frozenset("the a an and or but in on at by for with from to as is was were be this that these those "
                     "he she it they his her its their we you i".split())

_MONTH = "(?:" + "|".join(MONTHS) + ")"
DATE_PATTERN = re.compile(rf"\b(?:\d{{1,2}} {_MONTH},? \d{{3,4}}|{_MONTH} \d{{1,2}}, \d{{3,4}}|{_MONTH} \d{{3,4}})\b")
YEAR_PATTERN = re.compile(r"(?<![\d.,])\b(1\d{3}|20\d{2})\b(?![\d.,]\d)")
_WORD = re.compile(r"[^\W\d_][\w'’.\-]*", re.UNICODE)
_SENTENCE_END = re.compile(r"[.!?:;\"“”()\[\]]\s*$")


def _capitalised(word: str) -> bool:
    return word[:1].isupper()


_POSSESSIVE = re.compile(r"['’]s?$")


def _words(text: str) -> list[tuple[int, int, str]]:
    """(start, end of the raw match, the word without trailing punctuation or possessive 's)."""
    return [(m.start(), m.end(), _POSSESSIVE.sub("", m.group().rstrip(".'’-"))) for m in _WORD.finditer(text)]


def _ends_sentence(raw: str) -> bool:
    """A word followed by a full stop that is not an initial or a short abbreviation ("F.", "St.", "Mrs.")."""
    return raw.endswith(".") and len(raw.rstrip(".")) > 3 and "." not in raw.rstrip(".")


def _starts_sentence(text: str, start: int) -> bool:
    before = text[max(0, start - 64):start].rstrip()  # a bounded look back: linear in the text's length
    return (not before and start - 64 <= 0) or bool(_SENTENCE_END.search(before[-2:]))


def word_case_counts(texts: Iterable[str]) -> tuple[Counter, Counter]:
    """How often each word (case-folded) is written capitalised and in lower case, not counting a word that
    starts a sentence."""
    upper, lower = Counter(), Counter()
    for text in texts:
        for start, _, w in _words(text):
            if not w or _starts_sentence(text, start):
                continue
            (upper if _capitalised(w) else lower)[w.casefold()] += 1
    return upper, lower


def find_in_text(text: str, upper: Counter, lower: Counter) -> list[str]:
    """The dates and names of one text (module docstring), in text order, repeats kept."""
    found = [m.group() for m in DATE_PATTERN.finditer(text)]
    dated = [(m.start(), m.end()) for m in DATE_PATTERN.finditer(text)]
    found += [m.group() for m in YEAR_PATTERN.finditer(text) if not any(a <= m.start() < b for a, b in dated)]
    words = _words(text)
    i = 0
    while i < len(words):
        start, end, w = words[i]
        if not w or not _capitalised(w):
            i += 1
            continue
        run = [i]
        j = i + 1
        while j < len(words):
            gap = text[words[j - 1][1]:words[j][0]]
            if gap != " " or _ends_sentence(text[words[j - 1][0]:words[j - 1][1]]) \
                    or text[words[j - 1][1] - 2:words[j - 1][1]] in ("'s", "’s"):
                break
            wj = words[j][2]
            if wj and _capitalised(wj):
                run.append(j)
                j += 1
            elif wj.casefold() in CONNECTORS and j + 1 < len(words) and text[words[j][1]:words[j + 1][0]] == " " \
                    and words[j + 1][2] and _capitalised(words[j + 1][2]):
                run += [j, j + 1]
                j += 2
            else:
                break
        i = j
        while run and (words[run[0]][2].casefold() in FUNCTION | CONNECTORS
                       or (len(run) > 1 and upper[words[run[0]][2].casefold()] < lower[words[run[0]][2].casefold()])):
            run = run[1:]  # a leading function word, or a word the corpus writes in lower case ("When Guy")
        while run and words[run[-1]][2].casefold() in FUNCTION | CONNECTORS:
            run = run[:-1]
        if not run:
            continue
        name = text[words[run[0]][0]:words[run[-1]][0] + len(words[run[-1]][2])]
        if len(run) == 1:
            key = name.casefold()
            if name in MONTHS or name in WEEKDAYS or upper[key] <= lower[key]:
                continue
        found.append(name)
    return found


def found_entities(texts: list[str], min_count: int = 1) -> list[str]:
    """The names and dates found in `texts` (module docstring), each distinct form once, most frequent first
    (ties in first-seen order)."""
    upper, lower = word_case_counts(texts)
    counts: Counter = Counter()
    for text in texts:
        counts.update(find_in_text(text, upper, lower))
    return [name for name, c in counts.most_common() if c >= min_count and len(name) >= 2]
