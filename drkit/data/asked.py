"""The kind of answer a question asks for, from its wording: plain rules on English question words, the first
that matches deciding (kinds are spaCy's entity labels, as `drkit index --entities ner` records them):

* "when", "what year", "which year", "date", "birthday": a date (DATE);
* "nationality": a nationality or a country (NORP, GPE);
* "where", "place", "city", "country", "town": a place (GPE, LOC, FAC);
* "who" or "whom" opening the question or one of its sentences ("To whom ...?" too): a person (PERSON); not the
  relative "who" of "Which film has the director who was born first?", which asks for a film;
* anything else ("which award", "why", "what is"): no kind.

The entity answer prefers entities of that kind (`drkit.qa.answer_kinds`), the reader spans of it
(`drkit.reader.decode`, ``--span-checks``).
"""

from __future__ import annotations

import re

DATE = frozenset({"DATE"})
RULES: tuple[tuple[re.Pattern, frozenset], ...] = tuple((re.compile(p, re.IGNORECASE), frozenset(k)) for p, k in (
    (r"\b(when|what year|which year|date|birthday)\b", DATE),
    (r"\bnationality\b", {"NORP", "GPE"}),
    (r"\b(where|place|city|country|town)\b", {"GPE", "LOC", "FAC"}),
    (r"(?:^\W*|[.?!]\s+)(?:(?:to|with|by|for|from|of)\s+)?(?:who|whom)\b", {"PERSON"}),
))


def asked_kinds(question: str) -> frozenset | None:
    """The kinds of entity `question` asks for (module docstring), or None when its words do not say."""
    return next((kinds for pattern, kinds in RULES if pattern.search(question)), None)
