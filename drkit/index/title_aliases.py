"""A title's alias found from the title itself (``drkit index --entities titles``, on unless
``--no-title-aliases``): a Wikipedia-style disambiguation suffix names the same entity without it, so
"Next of Kin (1982 film)" is also found as "Next of Kin", and "Song of Solomon (novel)" as "Song of Solomon",
wherever the text (or a question) writes it.

A bare form is an alias only where it names one page: not where another title is that form already ("Paris"
beside "Paris (film)": the linker keeps it for the city's page), nor where two titles share it ("Kismet (1944
film)" and "Kismet (1955 film)": "Kismet" is left to neither, as a linker without hyperlinks cannot tell which is
meant), nor where it is one word: the linker finds names whatever their case, and a one-word form is a common
word ("Taken (film)", "Empire (2002 film)": "the Roman Empire") or a first name ("Stephen (...)") as often as it
names the page (2Wiki's one-word forms written capitalised more often than not include "Empire", "Princess",
"Heart", "Stephen", "Sophia"). `drkit.index.build.with_title_aliases` also leaves out a date ("March 1982
(album)"), a form another entity has, and a place the recogniser found (`PLACES`: "Palo Alto (2013 film)" is
2Wiki's only page of that name, but the text's "Palo Alto" is the city). A name the recogniser found in the text
(`drkit.index.ner`) that is such an alias is that page's entity, not an entity of its own: its mentions then
reach the page.

Where the text itself writes another disambiguation after the bare form ("Next of Kin (1982 film)" where only
"Next of Kin (2006 film)" has a page), the form names another page and is not linked (`suffix_conflicts`): a year
the page's dated suffix does not hold ("(1982 film)", "(1982)"), or a kind of its own ("(novel)", "(TV series)"
beside "(2006 film)", a kind being the last word of some title's suffix). A suffix that agrees ("(2006)",
"(film)"), a person's dates ("Ian Barry (born 1943)" for "Ian Barry (director)") or a parenthesis that is no
disambiguation ("(Italian: Parenti)", "(Dick Durock)", "(OBE)", "(son)") leaves the link. On 2Wiki's 6,119
passages this leaves 2 of 83,426 mentions unlinked, both rightly: "Emilio Botín (1934 – 2014)" and "Archduchess
Maria of Austria (15 May 1531 - ...)", whose pages are their namesakes of 1903-1993 and 1584-1649.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from drkit.data.kb import name_key  # the linker's key of a name: words joined by one space, case-folded
from drkit.index.found import YEAR_PATTERN

PLACES = frozenset({"GPE", "LOC", "FAC"})  # the recogniser's labels of places (drkit.index.ner)
SUFFIX = re.compile(r"^(?P<bare>.*\S)\s*\((?P<what>[^()]+)\)$")
WRITTEN_SUFFIX = re.compile(r"[ \t]*\(([^()\n]{1,60})\)")  # a parenthesis right after a name in a text
_KIND = re.compile(r"(?:(?:1\d{3}|20\d{2}) )?([^\W\d_]+(?: [^\W\d_]+)?)")  # "novel", "2006 film", "tv series"


def bare_title(title: str) -> str | None:
    """The title without its final "(...)" disambiguation ("Next of Kin (1982 film)" -> "Next of Kin"); None when it has
    none or nothing is left before it."""
    match = SUFFIX.fullmatch(" ".join(title.split()))
    return match.group("bare") if match else None


def own_suffix(key: str, alias: str) -> str | None:
    """The disambiguation of the title `key` whose bare form is `alias` (both folded: "next of kin (2006 film)",
    "next of kin" -> "2006 film"); None when `alias` is not its bare form."""
    match = SUFFIX.fullmatch(key)
    return match.group("what").strip() or None if match and match.group("bare") == alias else None


def _kind_words(suffix: str) -> list[str]:
    """The last word of each comma-separated part of a disambiguation that is no date: "footballer, born 1990" ->
    ["footballer"], "2006 film" -> ["film"], "1903–1993" -> []."""
    return [words[-1] for part in suffix.split(",") if (words := part.split()) and not YEAR_PATTERN.search(words[-1])]


def suffix_kinds(keys: Iterable[str]) -> frozenset[str]:
    """The last words of the titles' disambiguations that are no year ("film", "novel", "series", "footballer"):
    the kinds a written parenthesis may name (folded keys in, folded words out)."""
    return frozenset(w for k in keys if (m := SUFFIX.fullmatch(k)) for w in _kind_words(m.group("what")))


def suffix_conflicts(own: str, written: str, kinds: frozenset[str] | None = None) -> bool:
    """Whether a parenthesis `written` after a title's bare form in a text names another page than the title of
    suffix `own` (both folded; the module's docstring): years, none of them `own`'s where it holds some ("(1982)"
    or "(1982 film)" beside "2006 film", "(1934 – 2014)" beside "1903–1993"; a person's "(born 1943)" beside
    "director" is their own), or a kind ("novel", "2006 film") whose last word is another of `kinds` (the titles'
    own: `suffix_kinds`; None: any word) than `own`'s ("(Dick Durock)" or "(OBE)" name no kind; `own` without a
    kind, "1903–1993", none is another)."""
    written, years = " ".join(written.split()), set(YEAR_PATTERN.findall(own))
    found = set(YEAR_PATTERN.findall(written))
    if years and found and not found & years:  # only a dated suffix: "(born 1943)" is a person's own
        return True
    kind = _KIND.fullmatch(written)
    if kind is None or YEAR_PATTERN.fullmatch(written):
        return False
    last, mine = kind.group(1).split()[-1], _kind_words(own)
    return bool(mine) and last not in mine and (kinds is None or last in kinds)


def title_aliases(titles: Iterable[str], min_length: int = 3) -> dict[str, str]:
    """Title -> its alias, the bare form (`bare_title`), for each title whose bare form has two words or more and
    at least `min_length` characters, is no title itself and is the bare form of no other title (case aside, as
    the linker finds names)."""
    titles = list(dict.fromkeys(" ".join(t.split()) for t in titles))
    keys = {name_key(t) for t in titles}
    bares = {t: b for t in titles if (b := bare_title(t)) is not None}
    shared = Counter(name_key(b) for b in {name_key(t): b for t, b in bares.items()}.values())  # case variants: one page
    return {t: b for t, b in bares.items()
            if " " in b and len(b) >= min_length and shared[name_key(b)] == 1 and name_key(b) not in keys}
