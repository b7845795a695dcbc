"""Dates as English text writes them, and a person's life dates, for `drkit.reader.compare`.

"12 January 1968", "January 12, 1968", "March 1908", "1968-01-12" or a year (1000 to 2099; any 3 or 4 digits
inside a life's parenthesis: "(died 875)"; "4/12/1943" and "4.12.1943" give their year, the order of day and month
being unknown); "BC" counts backwards. A person's birth and death come from the first
parenthesis of the passage's subject ("(born 12 January 1968)", "(22 March 1908 - 3 October 1982)", "(-
November 4, 1873)"; a dash lost in the text, "190030 April 1985", is put back), else from "born ..." and
"died ..." in its first two sentences, not after "his", "her", "their" or "whose".
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Sequence

from drkit.data.text import split_sentences
from drkit.index.found import MONTHS as MONTH_NAMES
from drkit.reader.clues import subject_end

_MONTH_NUMBER = {m[:3].lower(): i for i, m in enumerate(MONTH_NAMES, 1)}  # "jan" -> 1: a name or abbreviation, by its start
_ABBREVIATIONS = [a for m in MONTH_NAMES if len(m) > 3 for a in (("Sept", "Sep") if m == "September" else (m[:3],))]
_MONTH = "(" + "|".join((*MONTH_NAMES, *_ABBREVIATIONS)) + r")\.?"
_YEAR = r"(1\d{3}|20\d{2})"  # as drkit.index.found reads years: 1000 to 2099
_ANY_YEAR = r"(\d{3,4})"  # inside a life's parenthesis, "died 875" too


def _date_patterns(year: str) -> tuple:
    """(regex, which groups are day / month / year), longest forms first; a year not inside a longer number,
    not "2000-seat", and may follow a hyphen only after a digit ("1849-1916")."""
    alone = rf"(?<![\d.,:/])(?<![A-Za-z]-)\b{year}\b(?![.,:/]?\d)(?!-[A-Za-z])"
    return ((re.compile(rf"(?<![\d.,:/-]){year}-(\d{{1,2}})-(\d{{1,2}})(?![\d-])"), (3, 2, 1)),  # 1975-04-09
            (re.compile(rf"(?<![\d.,:/-])\d{{1,2}}([/.])\d{{1,2}}\1{year}(?!\d|[/.]\d)"), (None, None, 2)),  # 4/12/1943
            (re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}\s*,?\s+{year}\b", re.I), (1, 2, 3)),
            (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\s*,?\s+{year}\b", re.I), (2, 1, 3)),
            (re.compile(rf"\b{_MONTH}\s*,?\s+{year}\b", re.I), (None, 1, 2)),
            (re.compile(alone), (None, None, 1)))


_DATE_PATTERNS = {False: _date_patterns(_YEAR), True: _date_patterns(_ANY_YEAR)}
_BC = re.compile(r"\s*(?:BCE|BC|B\.C\.E?\.?)(?!\w)")

@dataclass(frozen=True)
class Date:
    year: int
    month: int | None
    day: int | None
    text: str
    start: int  # character offsets in the passage text
    end: int

    @property
    def ymd(self) -> tuple[int, int, int]:
        """(year, month, day), 0 where not given (`drkit.reader.examples.earlier` compares these)."""
        return self.year, self.month or 0, self.day or 0


def find_dates(text: str, short_years: bool = False) -> list[Date]:
    """The dates of `text` in order, each at its longest form ("12 January 1968" rather than "1968"); a year
    "BC" is negative. Years are 1000 to 2099, or with `short_years` any of 3 or 4 digits (inside a life's
    parenthesis: "(died 875)")."""
    found: list[Date] = []
    taken: list[tuple[int, int]] = []
    for pattern, (d, m, y) in _DATE_PATTERNS[short_years]:
        for match in pattern.finditer(text):
            a, b = match.span()
            if any(a < e and b > s for s, e in taken):
                continue
            month = (int(match.group(m)) if match.group(m).isdigit() else
                     _MONTH_NUMBER[match.group(m).lower().rstrip(".")[:3]]) if m else None
            day = int(match.group(d)) if d else None
            if (day is not None and not 1 <= day <= 31) or (month is not None and not 1 <= month <= 12):
                continue
            year = int(match.group(y))
            if _BC.match(text, b):
                year = -year
            found.append(Date(year, month, day, match.group(0), a, b))
            taken.append((a, b))
    return sorted(found, key=lambda x: x.start)


_CIRCA = ("c", "ca", "circa")


def is_date(text: str) -> bool:
    """Whether `text` is a date and nothing more: it holds one (`find_dates`) and, the dates taken out, no word but
    "c.", "ca." or "circa" ("12 January 1968", "1968", "c. 1900"; not "Paris, 1968", "in 1968" nor "1968 Summer
    Olympics")."""
    dates = find_dates(text)
    if not dates:
        return False
    rest, at = [], 0
    for d in dates:
        rest.append(text[at:d.start])
        at = d.end
    rest.append(text[at:])
    return all(w.lower() in _CIRCA for w in re.findall(r"[^\W\d_]+", _BC.sub(" ", " ".join(rest))))


_GLUED = re.compile(rf"\b(\d{{4}})(\d{{1,2}})(?=\s+{_MONTH})", re.I)  # "17 September 190030 April 1985": a lost dash
_DASH = re.compile(r"\s*(?:[\u2013\u2014-]|\bto\b)\s*")



def life_dates(text: str) -> tuple[Date | None, Date | None]:
    """(birth, death) of the person a passage is about: from the first parenthesis of its subject (before the
    first sentence's "is" / "was") that holds a date ("(born 12 January 1968)", "(22 March 1908 - 3 October
    1982)", "(- 4 November 1873)"), else from "born ..." / "died ..." in its first two sentences, not after
    "his", "her", "their" or "whose" (someone else's). Each date's offsets are its parenthesis's."""
    birth = death = None
    for paren in re.finditer(r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)", text[: subject_end(text)]):
        inner = _GLUED.sub(lambda m: f"{m.group(1)} \u2013 {m.group(2)}", paren.group(1))
        dates = find_dates(inner, short_years=True)
        if not dates:
            continue
        born, died = re.search(r"\bborn\b", inner), re.search(r"\bdied\b|\bd\.", inner)
        if born:
            birth = next((d for d in dates if d.start > born.start()), None)
        elif not _DASH.match(inner.lstrip()) and not (died and died.start() < dates[0].start):
            birth = dates[0]  # "(22 March 1908 - ...", "(1849 - ...", "(835 -)"
        if died:
            death = next((d for d in dates if d.start > died.start()), None)
        else:
            after = birth.end if birth else 0
            dash = _DASH.search(inner, after)
            later = [d for d in dates if d.start >= (dash.end() if dash else after) and d is not birth]
            if later and (dash or (birth and len(dates) == 2)):  # "May 25, 1902 December 5, 1981": the dash lost
                death = later[0]
        birth, death = (d and dataclasses.replace(d, start=paren.start(), end=paren.end()) for d in (birth, death))
        break
    sentences = split_sentences(text)[:2]
    head = text[: sentences[-1][1]] if sentences else text
    for word in ("born", "died"):
        if (birth if word == "born" else death) is not None:
            continue
        for found in re.finditer(rf"(?<![-\w])(?<!-\s){word}\b(?:\s+(?:on|in|at))?", head):
            clause = re.split(r"[,;.]", head[: found.start()])[-1]
            if re.search(r"\b(?:his|her|their|whose|its)\b", clause, re.I):
                continue
            after = find_dates(head[found.end(): found.end() + 60])
            if after:
                d = after[0]
                date = dataclasses.replace(d, start=d.start + found.end(), end=d.end + found.end())
                birth, death = (date, death) if word == "born" else (birth, date)
            break
    return birth, death


def own_date(text: str, cue: Sequence[str]) -> Date | None:
    dates = find_dates(text)
    if not dates:
        return None
    lowered = text.lower()
    for word in cue:  # "established in 1893" for "Which museum was established first"
        stem = word[:max(4, len(word) - 3)]
        for hit in re.finditer(rf"\b{re.escape(stem)}", lowered):
            near = [d for d in dates if 0 <= d.start - hit.end() <= 40]
            if near:
                return near[0]
    first = split_sentences(text)[:1]
    in_first = [d for d in dates if first and d.end <= first[0][1]]
    return (in_first or dates)[0]


def life_lengths(a: Sequence[Date], b: Sequence[Date]) -> tuple[int, int] | None:
    """Two lives' lengths (birth, death) at the precision all four dates give: in days, months or years; None
    when they do not tell which is longer (a difference within what the precision can hide: 2 months, 2
    years) or one is not a life (negative, or over 122 years)."""
    import datetime

    dates = [*a, *b]
    precision = min(3 if d.day else 2 if d.month else 1 for d in dates)
    try:
        if precision == 3:
            days = [datetime.date(*d.ymd).toordinal() for d in dates]
            out, margin, top = (days[1] - days[0], days[3] - days[2]), 1, 122 * 366
        elif precision == 2:
            months = [d.year * 12 + d.month for d in dates]
            out, margin, top = (months[1] - months[0], months[3] - months[2]), 2, 122 * 12
        else:
            out, margin, top = (dates[1].year - dates[0].year, dates[3].year - dates[2].year), 2, 122
    except ValueError:  # "31 February", or a year before 1 (BC) that datetime cannot hold
        return None
    if min(out) < 0 or max(out) > top or abs(out[0] - out[1]) < margin:
        return None
    return out


