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
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable

from drkit.data.kb import name_key  # the linker's key of a name: words joined by one space, case-folded

PLACES = frozenset({"GPE", "LOC", "FAC"})  # the recogniser's labels of places (drkit.index.ner)
SUFFIX = re.compile(r"^(?P<bare>.*\S)\s*\((?P<what>[^()]+)\)$")


def bare_title(title: str) -> str | None:
    """The title without its final "(...)" disambiguation ("Next of Kin (1982 film)" -> "Next of Kin"); None when it has
    none or nothing is left before it."""
    match = SUFFIX.fullmatch(" ".join(title.split()))
    return match.group("bare") if match else None


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
