"""Yes/no questions of whether two things share a country, settled by reading each one's country.

"Are A and B located in the same country?", "Do A and B share the same nationality?", "Do both films A and
B have the directors from the same country?": the reader answers these about as often right as a coin.
Here each option is a title read that the question names (the longest names first); for "the directors
of films A and B" (a relation word before "of film(s)" or after "have the"), the option's person is the one
its passage names nearest that word (`drkit.reader.clues.bridges`). The country is the first one the
passage's first two sentences name, by name or demonym, not counting "X-born" (`drkit.reader.countries`):
"is a 1944 American film", "is an English actor", "is a village in ..., Iran". Both found: "yes" when they
are one country, "no" otherwise; an option, a person or a country not found settles nothing.
"""

from __future__ import annotations

import re
from typing import Sequence

from drkit.data.text import split_sentences
from drkit.reader.clues import MAX_QUESTION_CHARS, bridges, subject_end, without_suffix
from drkit.reader.countries import countries_in
from drkit.reader.text import normalize_answer

_SAME = re.compile(r"^(?:are|is|do|does|did|were|was)\b.*\bsame (?:country|nationality|citizenship)\b", re.I)
_RELATION = (re.compile(r"\b([a-z]+?)s?\s+of\s+(?:the\s+)?(?:films?|songs?|albums?|books?|novels?|plays?|series)\b"),
             re.compile(r"\bhave\s+the\s+([a-z]+?)s?\s+(?:from|of|who|that|with|born)\b"))


def options_named(question: str, titles: Sequence[str]) -> list[int]:
    """The passages whose titles (or titles without a "(...)" suffix) the question names, longest first, each
    name counted once and not inside a longer one already taken; one passage per name."""
    q = f" {normalize_answer(question)} "
    names = []
    for i, t in enumerate(titles):
        for name in {normalize_answer(t), normalize_answer(without_suffix(t))}:
            if len(name) > 2:
                names.append((name, i))
    titled = {}  # a name -> the distinct titles it is the name of ("Kismet": "Kismet (1944 film)", "Kismet (1955 film)")
    for name, i in names:
        titled.setdefault(name, set()).add(normalize_answer(titles[i]))
    names = [(name, i) for name, i in names if len(titled[name]) == 1]
    taken: list[tuple[int, int]] = []
    found: list[int] = []
    seen: set[str] = set()
    for name, i in sorted(names, key=lambda x: -len(x[0])):
        at = q.find(f" {name} ")
        if at < 0 or name in seen or any(at < e and at + len(name) + 2 > s for s, e in taken):
            continue
        seen.add(name)
        taken.append((at, at + len(name) + 2))
        if i not in found:
            found.append(i)
    return found


def country_of(text: str) -> tuple[str, int] | None:
    """The first country the passage's first two sentences name after its subject ("Tom Holland is an English
    actor": English, not Holland), with its character offset."""
    sentences = split_sentences(text)[:2]
    head = text[: sentences[-1][1]] if sentences else text
    start = subject_end(text)
    found = countries_in(head[start:])
    return (found[0][0], found[0][1] + start) if found else None


def same_country(question: str, titles: Sequence[str], texts: Sequence[str]):
    """("yes" | "no", [(option passage, passage read for it, its country, the country's offset in that passage)]
    * 2, the relation word or None) for a same-country question the passages settle; None otherwise."""
    if len(question) > MAX_QUESTION_CHARS or not _SAME.search(question) or re.search(r"\bnot\b|n't\b", question):
        return None  # "Are A and B not in the same country?" is left to the reader
    options = options_named(question, titles)
    if len(options) != 2:
        return None
    relation = next((m.group(1) for p in _RELATION for m in [p.search(question.lower())] if m), None)
    values = []
    for p in options:
        sources = bridges(relation, p, titles, texts)[:1] if relation else [(p, None)]
        country = country_of(texts[sources[0][0]]) if sources else None
        if country is None:
            return None
        values.append((p, sources[0][0], *country))
    if values[0][1] == values[1][1]:  # both options led to one passage: nothing to compare
        return None
    return ("yes" if values[0][2] == values[1][2] else "no"), values, relation
