"""What passages say about their subjects, found by rule: a title's forms, a passage's subject, its sentences,
and the person it names by a relation's word ("directed by X"), for `drkit.reader.compare` and
`drkit.reader.same`.
"""

from __future__ import annotations

import re
from typing import Sequence

from drkit.data.text import split_sentences
from drkit.reader.text import normalize_answer

MAX_QUESTION_CHARS = 300  # longer questions are left to the reader


def title_key(title: str) -> str:
    return normalize_answer(title)


def without_suffix(title: str) -> str:
    """A title without its "(...)" disambiguation: "Kismet (1944 film)" -> "Kismet"."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title)


def bare(title: str) -> str:
    return normalize_answer(without_suffix(title))


def is_title_of(title: str, name: str) -> bool:
    """Whether `title` is the page of `name`: the same once normalised, or the same but for a "(...)" suffix
    ("Kismet (1944 film)" is Kismet's page); never for a blank name."""
    key = title_key(name)
    return bool(key) and (title_key(title) == key or bare(title) in (key, bare(name)))


def held_title(span: str, titles: Sequence[str], short: int = 3) -> str | None:
    """The longest of `titles` (without its "(...)" suffix, at least `short` characters) that `span` holds as
    whole words ("Leo Fong, who directed it" -> "Leo Fong") or, for a span longer than `short` characters, that
    holds the span ("Fong" -> "Leo Fong"); case aside, a hyphen part of a word ("Mecklenburg" is not held by
    "Mecklenburg-Schwerin"). None when there is none."""
    low, best = span.lower(), None
    for title in map(without_suffix, titles):
        t = title.lower()
        # the substring tests first: most candidates hold no title, and the patterns differ for each
        if len(title) >= short and ((t in low and re.search(rf"(?<![\w-]){re.escape(t)}(?![\w-])", low)) or (
                len(low) > short and low in t and re.search(rf"(?<![\w-]){re.escape(low)}(?![\w-])", t))):
            if best is None or len(title) > len(best):
                best = title
    return best


def option_passages(option: str, titles: Sequence[str]) -> list[int]:
    """The passages whose title is the option (case and punctuation aside), else the one passage whose title is
    it but for a "(...)" suffix; none when several titles are ("Kismet (1944 film)", "Kismet (1955 film)")."""
    key, short = title_key(option), bare(option)
    exact = [i for i, t in enumerate(titles) if title_key(t) == key]
    if exact:
        return exact
    loose = [i for i, t in enumerate(titles) if bare(t) == short and short]
    return loose if len({title_key(titles[i]) for i in loose}) == 1 else []


def subject_end(text: str) -> int:
    """Where the first sentence's subject ends: at its first "is" / "was" / "were" / "are" outside parentheses
    (the end of the first sentence when it has none)."""
    first = split_sentences(text)[:1]
    end = first[0][1] if first else len(text)
    blanked = re.sub(r"\([^()]*(?:\([^()]*\)[^()]*)*\)", lambda m: " " * len(m.group(0)), text[:end])
    verb = re.search(r"\b(?:is|was|were|are)\b", blanked)
    return verb.start() if verb else end


def sentence_of(text: str, at: int) -> str:
    for a, b in split_sentences(text):
        if a <= at < b:
            return text[a:b]
    return text[:200]


def bridges(relation: str, p: int, titles: Sequence[str], texts: Sequence[str]) -> list[tuple[int, str]]:
    """The passages, among those read, of the people that passage `p` names right by the relation's word:
    after it with at most three lower-case words between ("directed by X", "directed and produced by X"), or
    just before it ("X's film", "X directed"); nearest first. "directed by Ed Wood and starring Walter Lang"
    names Ed Wood only: another name stands between the word and Walter Lang."""
    text = texts[p]
    lowered = text.lower()
    stem = relation[:5]
    cues = [(m.start(), m.end()) for m in re.finditer(rf"\b{re.escape(stem)}[a-z]*", lowered)]
    named = []
    for q, title in enumerate(titles):
        if q == p or bare(title) == bare(titles[p]):
            continue
        name = without_suffix(title).lower()
        if len(name) < 3:
            continue
        for at in (m.start() for m in re.finditer(rf"(?<!\w){re.escape(name)}(?!\w)", lowered)):
            for c0, c1 in cues:
                after, before = text[c1:at], text[at + len(name): c0]
                if at >= c1 and re.fullmatch(r"(?:\s+[a-z-]+){0,3}\s+", after):
                    named.append((at - c1, q, title))
                elif at < c0 and re.fullmatch(r"(?:'s)?\s*", before):
                    named.append((c0 - at, q, title))
    best = {}
    for distance, q, title in sorted(named):
        best.setdefault(q, (distance, q, title))
    return [(q, title) for _, q, title in sorted(best.values())]


