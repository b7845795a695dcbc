"""Which-of-two questions about dates, settled by reading the dates and comparing them.

The reader (`drkit.reader.model`) picks a span; a 22M-parameter transformer does not compare two dates, and
on questions such as "Who was born first, A or B?" or "Which film has the director who died later, A or B?"
it was right about half the time, as a coin would be. This module does what a person does: find each
option's passage among those read (for "the director of A", the passage of the person A's passage names by
the relation's word: `drkit.reader.clues.bridges`), read the date the question asks about, and compare.

* **Options.** "..., A or B?", "Was A or B born first?", "... out of A and B?", "... between A and B?".
* **What is compared.** A birth date ("born"; "older", "younger" of people), a death date ("died"), the
  length of a life ("lived longer", "died younger"), or else the option's own date (a film's release,
  a museum's founding: a date near a word the question uses, such as "established in 1893", else the first
  date of the passage's first sentence, else its first date).
* **Which way.** earlier ("first", "earlier", "older", "before", ...) or later ("later", "last", "more
  recently", "younger", ...), longer or shorter.

Dates and a person's life dates are read as `drkit.reader.dates` says; two dates are compared at the
precision both have, two lives at the precision all four dates have, and a tie, a missing option, a missing
date or a relation the rules do not read settles nothing: the reader's answer then stands.

The phrases above were written for English comparison questions in general, after reading the wording
of 2WikiMultiHopQA's questions; a question worded otherwise is left to the reader. `settled` applies this
and then `drkit.reader.same` (yes/no: do two things share a country?) before reading: the reader's transformer
runs only on the questions they do not settle (`settled_reading` gives the others' answer and evidence).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from drkit.data.text import split_sentences
from drkit.reader.clues import MAX_QUESTION_CHARS, bridges, option_passages, sentence_of, without_suffix
from drkit.reader.dates import Date, life_dates, life_lengths, own_date
from drkit.reader.examples import earlier
from drkit.reader.reading import Reading, Supporting
from drkit.reader.same import same_country
from drkit.reader.text import normalize_answer

_EARLIER = re.compile(r"\b(first|earlier|earliest|older|oldest|before|sooner|elder|eldest)\b")
_LATER = re.compile(r"\b(later|latest|last|more recently|most recently|recent|younger|youngest|after|newer|newest)\b")
_LONGER = re.compile(r"\blived? (longer|the longest)\b|\blonger (life|lifespan)\b")
_SHORTER = re.compile(r"\blived? (shorter|the shortest)\b|\bshorter (life|lifespan)\b")
_AGE = re.compile(r"\b(younger|youngest|older|oldest|elder|eldest)\b")
_BIRTH = re.compile(r"\b(born|birth|age)\b")  # the words of _AGE are read before it
_DEATH = re.compile(r"\b(died|die|death|passed away)\b")
_NOT_RELATION = r"(?!(?:who|that|whose|which|is|was|were|born|died)\b)"
_RELATION = (re.compile(rf"\b(?:has|had|have|with|by)\s+(?:the|a|an)\s+(?:[a-z]+\s+)?{_NOT_RELATION}([a-z]+)\s+"
                        r"(?:who|that|whose|born|died|is|was|were)\b"),
             re.compile(r"\bwhose\s+([a-z]+)\s+(?:is|was|were|died|born|lived)\b"))
_UNREAD_RELATION = re.compile(r"[a-z]'s\s+[a-z]+\s+(?:who|that|is|was|were|born|died)\b|\b(?:has|had|with)\s+(?:the|a|an)\s+"
                              r"(?:older|younger|elder|oldest|youngest|eldest)\s+[a-z]+")
_OPTION_FORMS = (  # (the two options and the question around them, the word between the options)
    (re.compile(r"^(?P<head>(?:was|is|were|did|does|do))\s+(?P<options>\S.*?\s+or\s+.*?)\s+(?P<tail>(?:born|die|died|"
                r"live|lived|release|released|come out|came out|establish|established|found|founded|older|younger)\b"
                r"[^,?]*)\?*$", re.I), "or"),
    (re.compile(r"^(?P<head>.*?\b(?:out of|between|among))\s+(?P<options>\S.*?\s+and\s+.*?)\s*\?*$", re.I), "and"),
    (re.compile(r"^(?P<head>[^,]*?),\s*(?P<options>\S.*?\s+or\s+.*?)\s*\?*$", re.I), "or"),
)
_STOP = frozenset("which who what film album one was is were the a an has had have did does do came out first earlier "
                  "later more recently than other born died director whose with that of by and or".split())


@dataclass(frozen=True)
class Asked:
    """What a which-of-two question asks: its options, what is compared and which way."""

    options: tuple[str, str]
    attribute: str  # birth | death | life | date (the option's own date)
    later: bool  # the answer has the later date (the longer life for "life")
    relation: str | None  # "director" in "the film whose director ...": the date is that person's
    cue: tuple[str, ...]  # the question's content words, to find the option's own date near them


@dataclass(frozen=True)
class Value:
    option: str
    passage: int  # the passage's number in the example
    sentence: str  # the sentence holding the date (or the first of two)
    dates: tuple[Date, ...]  # one date, or (birth, death) for a life; () for a country
    via: str | None  # the bridge passage's title, when the date is that of the option's relation
    country: str | None = None  # for a same-country question (`drkit.reader.same`)


@dataclass(frozen=True)
class Comparison:
    answer: str
    asked: Asked
    values: tuple[Value, Value]

    def to_dict(self, passages: Sequence | None = None) -> dict:
        """JSON-ready; with the `passages` read (`ReaderPassage`), each value names its passage's corpus id."""
        return {"attribute": self.asked.attribute, "later": self.asked.later, "relation": self.asked.relation,
                "values": [{"option": v.option, "passage": v.passage,
                            **({"passage_id": passages[v.passage].id} if passages is not None else {}),
                            "via": v.via, "dates": [d.text for d in v.dates], "sentence": v.sentence,
                            **({"country": v.country} if v.country else {})}
                           for v in self.values]}


def parse_question(question: str, titles: Sequence[str] = ()) -> Asked | None:
    """The options, attribute and direction of a which-of-two date question; None for any other question. When
    the options could be split at more than one " or " ("Now or Never or Y"), the split whose two options are
    both titles of `titles` is taken, else the first."""
    q = " ".join(question.strip().split())
    if len(q) > MAX_QUESTION_CHARS:  # the option forms' lazy matches grow fast with the length
        return None
    for form, conjunction in _OPTION_FORMS:
        match = form.match(q)
        if match:
            break
    else:
        return None
    a, b = _split(match.group("options"), conjunction, titles)
    if not a or not b or normalize_answer(a) == normalize_answer(b):
        return None
    rest = (match.group("head") + " " + (match.groupdict().get("tail") or "")).lower()
    relation = None
    for pattern in _RELATION:
        found = pattern.search(rest)
        if found and found.group(1) not in ("one", "other", "person"):
            relation = found.group(1)
            break
    if relation is None and _UNREAD_RELATION.search(rest):  # "the film's director", "the older director"
        return None
    age, longer = _AGE.search(rest), _LONGER.search(rest)
    if longer or _SHORTER.search(rest) or (age and _DEATH.search(rest)):  # "died younger": a life
        attribute, later = "life", bool(longer or (age and _EARLIER.search(age.group(1))))  # "died older": longer
    else:
        earlier, late = _EARLIER.search(rest), _LATER.search(rest)
        if bool(earlier) == bool(late):
            return None
        later = bool(late)
        if age:  # a person's age is their birth ("who is younger"); a thing's, its own date ("which band is older")
            attribute = "birth" if relation or rest.startswith("who") else "date"
        elif _DEATH.search(rest):
            attribute = "death"
        elif _BIRTH.search(rest):
            attribute = "birth"
        else:
            attribute = "date"
    cue = tuple(w for w in re.findall(r"[a-z]+", rest) if w not in _STOP and len(w) > 3)
    return Asked((a, b), attribute, later, relation, cue)


# "... between A and B" offers a choice only after "which" or "who" and a comparative: "Which film came out first
# between A and B?", "Who is older out of A and B?" (not "What war was fought between A and B?")
_WHICH_OF = re.compile(r"^(?:which|who|whose)\b.*\b(?:first|last|earlier|later|more|most|less|least|\w+er|\w+est)\b",
                       re.I)


def question_options(question: str, titles: Sequence[str]) -> tuple[str, str] | None:
    """The two options a which-of-two question offers ("Who was born first, A or B?", "Which is older, A or B?",
    "Which film came out first between A and B?", any attribute), when both are titles of `titles`
    (`option_passages`): an answer to it is one of them. None for any other question."""
    q = " ".join(question.strip().split())
    if len(q) > MAX_QUESTION_CHARS:
        return None
    match, conjunction = next(((m, c) for form, c in _OPTION_FORMS if (m := form.match(q))), (None, None))
    if match is None or (conjunction == "and" and not _WHICH_OF.match(match.group("head"))):
        return None  # "What war was fought between England and France?" offers no choice
    a, b = _split(match.group("options"), conjunction, titles)
    if a and b and normalize_answer(a) != normalize_answer(b) and option_passages(a, titles) \
            and option_passages(b, titles):
        return a, b
    return None


def _split(options: str, conjunction: str, titles: Sequence[str]) -> tuple[str, str]:
    """"A or B" (or "A and B") cut into its two options: at the conjunction that makes both titles, else the first."""
    cuts = list(re.finditer(rf"\s+{conjunction}\s+", options))
    pairs = [(options[: m.start()].strip(" ,"), options[m.end():].strip(" ,?")) for m in cuts]
    for a, b in pairs:
        if titles and option_passages(a, titles) and option_passages(b, titles):
            return a, b
    return pairs[0] if pairs else ("", "")


def _value(asked: Asked, option: str, titles: Sequence[str], texts: Sequence[str]) -> Value | None:
    for p in option_passages(option, titles):
        sources = [(p, None)]
        if asked.relation and asked.attribute in ("birth", "death", "life"):
            sources = bridges(asked.relation, p, titles, texts)[:1]  # the person named, not the next one
        for q, via in sources:
            text = texts[q]
            if asked.attribute == "date":
                date = own_date(text, asked.cue)
                dates = (date,) if date else ()
            else:
                birth, death = life_dates(text)
                dates = {"birth": (birth,), "death": (death,), "life": (birth, death)}[asked.attribute]
            if dates and all(d is not None for d in dates):
                return Value(option, q, sentence_of(text, dates[0].start), tuple(dates), via)
    return None


def compare(question: str, titles: Sequence[str], texts: Sequence[str]) -> Comparison | None:
    """The answer to a which-of-two date question from passages (`titles[i]`, `texts[i]`), or None when the
    question is not one or the passages do not settle it (an option or a date not found, a tie)."""
    asked = parse_question(question, titles)
    if asked is None:
        return None
    values = [_value(asked, option, titles, texts) for option in asked.options]
    if values[0] is None or values[1] is None or values[0].passage == values[1].passage:
        return None
    if asked.attribute == "life":
        lengths = life_lengths(values[0].dates, values[1].dates)
        if lengths is None:
            return None
        first_wins = (lengths[0] > lengths[1]) == asked.later
    else:
        first_earlier = earlier(values[0].dates[0].ymd, values[1].dates[0].ymd)
        if first_earlier is None:  # a tie, or a date too coarse to tell
            return None
        first_wins = first_earlier != asked.later
    return Comparison(asked.options[0 if first_wins else 1], asked, (values[0], values[1]))


def settled(example) -> Comparison | None:
    """What the dates (`compare`) or the countries (`drkit.reader.same`) read in `example`'s passages answer of its
    question, or None when they do not settle it. It needs no reading: the reader skips what it settles."""
    titles, texts = [p.title for p in example.passages], [p.text for p in example.passages]
    return compare(example.question, titles, texts) or _same(example.question, titles, texts)


def settled_reading(example, found: Comparison) -> Reading:
    """The `drkit.reader.model.Reading` of an `example` that `settled` answered (`found`), the transformer unread:
    its supporting sentences are those the comparison read (no probability): for each option, the sentence of its
    passage that names the person whose date or country it is (for "the director of A"), then the sentence of
    the date or country; its type is that of the answer."""
    passages = example.passages
    titles = [p.title for p in passages]
    supporting: list[Supporting] = []
    sentences: dict[int, list] = {}  # passage -> its sentences' offsets, split once

    def add(p: int, hit) -> None:  # the first sentence of passage p for which hit(sentence) holds
        text = passages[p].text
        if p not in sentences:
            sentences[p] = split_sentences(text)
        for s, (a, b) in enumerate(sentences[p]):
            if hit(text[a:b]):
                if all((x.passage, x.sentence) != (p, s) for x in supporting):
                    supporting.append(Supporting(p, s, passages[p].id, text[a:b], None))
                return

    for v in found.values:
        if v.via is not None:  # the date or country is of the person the option's passage names: that sentence too
            name = re.compile(rf"(?<!\w){re.escape(without_suffix(v.via))}(?!\w)", re.I)  # as `bridges` finds it
            for p in option_passages(v.option, titles):
                add(p, lambda sentence: name.search(sentence) is not None)
        add(v.passage, lambda sentence: sentence == v.sentence)
    kind = found.answer if found.asked.attribute == "country" else "span"  # a same-country answer is yes or no
    return Reading(found.answer, kind, None, None, tuple(supporting), {}, found)


def _same(question: str, titles: Sequence[str], texts: Sequence[str]) -> Comparison | None:
    """`drkit.reader.same.same_country` as a `Comparison` (attribute "country")."""
    same = same_country(question, titles, texts)
    if same is None:
        return None
    answer, read, relation = same
    values = tuple(Value(titles[p], q, sentence_of(texts[q], at), (), titles[q] if q != p else None, country)
                   for p, q, country, at in read)
    return Comparison(answer, Asked((titles[read[0][0]], titles[read[1][0]]), "country", False, relation, ()), values)
