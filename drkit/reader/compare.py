"""Which-of-two questions about dates, settled by reading the dates and comparing them.

The reader (`drkit.reader.model`) picks a span; a 22M-parameter transformer does not compare two dates, and
on questions such as "Who was born first, A or B?" or "Which film has the director who died later, A or B?"
it was right about half the time, as a coin would be. This module does what a person does: find each
option's passage among those read (for "the director of A", the passage of the person A's passage names,
nearest the relation's word), read the date the question asks about, and compare.

* **Options.** "..., A or B?", "Was A or B born first?", "... out of A and B?", "... between A and B?".
* **What is compared.** A birth date ("born", "older", "younger", "age"), a death date ("died", "death"),
  the length of a life ("lived longer", "lived shorter"), or else the option's own date (a film's release,
  a museum's founding: a date near a word the question uses, such as "established in 1893", else the first
  date of the passage's first sentence, else its first date).
* **Which way.** earlier ("first", "earlier", "older", "before", ...) or later ("later", "last", "more
  recently", "younger", ...), longer or shorter.

A person's dates are read from the parenthesis after the name ("(born 12 January 1968)", "(22 March 1908 -
3 October 1982)") or from "born ..." / "died ..." in the text. Dates are "12 January 1968", "January 12,
1968", "March 1908" or a year; two dates are compared at the precision both have, and a tie, a missing
option or a missing date settles nothing: the reader's answer then stands.

The phrases above were written for English comparison questions in general, after reading the wording
of 2WikiMultiHopQA's questions; a question worded otherwise is left to the reader. `settle` applies this
and then `drkit.reader.same` (yes/no: do two things share a country?) to a reader's answer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Sequence

from drkit.reader.examples import MONTHS, earlier
from drkit.reader.text import normalize_answer, split_sentences

_MONTHS = {**MONTHS, **{m[:3]: i for m, i in MONTHS.items()}}
_MONTH = r"(January|February|March|April|May|June|July|August|September|October|November|December|" \
         r"Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\.?"
_YEAR = r"(1\d{3}|20\d{2})"  # as drkit.index.found reads years: 1000 to 2099
_ANY_YEAR = r"(\d{3,4})"  # inside a life's parenthesis, "died 875" too


def _date_patterns(year: str) -> tuple:
    """(regex, which groups are day / month / year), longest forms first; a year not inside a longer number,
    not "2000-seat", and may follow a hyphen only after a digit ("1849-1916")."""
    alone = rf"(?<![\d.,:/])(?<![A-Za-z]-)\b{year}\b(?![.,:/]?\d)(?!-[A-Za-z])"
    return ((re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+{_MONTH}\s*,?\s+{year}\b", re.I), (1, 2, 3)),
            (re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\s*,?\s+{year}\b", re.I), (2, 1, 3)),
            (re.compile(rf"\b{_MONTH}\s*,?\s+{year}\b", re.I), (None, 1, 2)),
            (re.compile(alone), (None, None, 1)))


_DATE_PATTERNS = {False: _date_patterns(_YEAR), True: _date_patterns(_ANY_YEAR)}
_BC = re.compile(r"\s*(?:BCE|BC|B\.C\.E?\.?)(?!\w)")
_EARLIER = re.compile(r"\b(first|earlier|earliest|older|oldest|before|sooner|elder|eldest)\b")
_LATER = re.compile(r"\b(later|latest|last|more recently|most recently|recent|younger|youngest|after|newer|newest)\b")
_LONGER = re.compile(r"\blived? (longer|the longest)\b|\blonger (life|lifespan)\b")
_SHORTER = re.compile(r"\blived? (shorter|the shortest)\b|\bshorter (life|lifespan)\b")
_BIRTH = re.compile(r"\b(born|birth|older|oldest|younger|youngest|elder|eldest|age)\b")
_DEATH = re.compile(r"\b(died|die|death|passed away)\b")
_NOT_RELATION = r"(?!(?:who|that|whose|which|is|was|were|born|died)\b)"
_RELATION = (re.compile(rf"\b(?:has|had|have|with|by)\s+(?:the|a|an)\s+(?:[a-z]+\s+)?{_NOT_RELATION}([a-z]+)\s+"
                        r"(?:who|that|whose|born|died|is|was|were)\b"),
             re.compile(r"\bwhose\s+([a-z]+)\s+(?:is|was|were|died|born|lived)\b"))
_UNREAD_RELATION = re.compile(r"[a-z]'s\s+[a-z]+\s+(?:who|that|is|was|were|born|died)\b|\b(?:has|had|with)\s+(?:the|a|an)\s+"
                              r"(?:older|younger|elder|oldest|youngest|eldest)\s+[a-z]+")
MAX_QUESTION_CHARS = 300  # longer questions are left to the reader
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
            month = _MONTHS[match.group(m).lower().rstrip(".")[:3]] if m else None
            day = int(match.group(d)) if d else None
            if day is not None and not 1 <= day <= 31:
                continue
            year = int(match.group(y))
            if _BC.match(text, b):
                year = -year
            found.append(Date(year, month, day, match.group(0), a, b))
            taken.append((a, b))
    return sorted(found, key=lambda x: x.start)


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
    age = re.search(r"\b(younger|youngest|older|oldest|elder|eldest)\b", rest)
    if _LONGER.search(rest) or _SHORTER.search(rest) or (age and _DEATH.search(rest)):  # "died younger": a life
        attribute, later = "life", bool(_LONGER.search(rest) or (age and age.group(1) in ("older", "oldest", "elder",
                                                                                         "eldest")))
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


def _split(options: str, conjunction: str, titles: Sequence[str]) -> tuple[str, str]:
    """"A or B" (or "A and B") cut into its two options: at the conjunction that makes both titles, else the first."""
    cuts = list(re.finditer(rf"\s+{conjunction}\s+", options))
    pairs = [(options[: m.start()].strip(" ,"), options[m.end():].strip(" ,?")) for m in cuts]
    for a, b in pairs:
        if titles and _option_passages(a, titles) and _option_passages(b, titles):
            return a, b
    return pairs[0] if pairs else ("", "")


def _title_key(title: str) -> str:
    return normalize_answer(title)


def without_suffix(title: str) -> str:
    """A title without its "(...)" disambiguation: "Kismet (1944 film)" -> "Kismet"."""
    return re.sub(r"\s*\([^)]*\)\s*$", "", title)


def _bare(title: str) -> str:
    return normalize_answer(without_suffix(title))


def _option_passages(option: str, titles: Sequence[str]) -> list[int]:
    """The passages whose title is the option (case and punctuation aside), else the one passage whose title is
    it but for a "(...)" suffix; none when several titles are ("Kismet (1944 film)", "Kismet (1955 film)")."""
    key, bare = _title_key(option), _bare(option)
    exact = [i for i, t in enumerate(titles) if _title_key(t) == key]
    if exact:
        return exact
    loose = [i for i, t in enumerate(titles) if _bare(t) == bare and bare]
    return loose if len({_title_key(titles[i]) for i in loose}) == 1 else []


_GLUED = re.compile(rf"\b(\d{{4}})(\d{{1,2}})(?=\s+{_MONTH})", re.I)  # "17 September 190030 April 1985": a lost dash
_DASH = re.compile(r"\s*(?:[\u2013\u2014-]|\bto\b)\s*")


def _subject_end(text: str) -> int:
    """Where the first sentence's subject ends: at its first "is" / "was" / "were" / "are" outside parentheses
    (the end of the first sentence when it has none)."""
    first = split_sentences(text)[:1]
    end = first[0][1] if first else len(text)
    blanked = re.sub(r"\([^()]*(?:\([^()]*\)[^()]*)*\)", lambda m: " " * len(m.group(0)), text[:end])
    verb = re.search(r"\b(?:is|was|were|are)\b", blanked)
    return verb.start() if verb else end


def _life_dates(text: str) -> tuple[Date | None, Date | None]:
    """(birth, death) of the person a passage is about: from the first parenthesis of its subject (before the
    first sentence's "is" / "was") that holds a date ("(born 12 January 1968)", "(22 March 1908 - 3 October
    1982)", "(- 4 November 1873)"), else from "born ..." / "died ..." in its first two sentences, not after
    "his", "her", "their" or "whose" (someone else's). Each date's offsets are its parenthesis's."""
    birth = death = None
    for paren in re.finditer(r"\(([^()]*(?:\([^()]*\)[^()]*)*)\)", text[: _subject_end(text)]):
        inner = _GLUED.sub(lambda m: f"{m.group(1)} \u2013 {m.group(2)}", paren.group(1))
        dates = [Date(d.year, d.month, d.day, d.text, d.start, d.end) for d in find_dates(inner, short_years=True)]
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
        at = paren.start()
        birth, death = (d and Date(d.year, d.month, d.day, d.text, at, paren.end()) for d in (birth, death))
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
                date = Date(d.year, d.month, d.day, d.text, d.start + found.end(), d.end + found.end())
                birth, death = (date, death) if word == "born" else (birth, date)
            break
    return birth, death


def _own_date(text: str, cue: Sequence[str]) -> Date | None:
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


def _sentence_of(text: str, at: int) -> str:
    for a, b in split_sentences(text):
        if a <= at < b:
            return text[a:b]
    return text[:200]


def _value(asked: Asked, option: str, titles: Sequence[str], texts: Sequence[str]) -> Value | None:
    for p in _option_passages(option, titles):
        via = None
        sources = [(p, None)]
        if asked.relation and asked.attribute in ("birth", "death", "life"):
            sources = _bridges(asked.relation, p, titles, texts)[:1]  # the person named, not the next one
        for q, via in sources:
            text = texts[q]
            if asked.attribute == "date":
                date = _own_date(text, asked.cue)
                dates = (date,) if date else ()
            else:
                birth, death = _life_dates(text)
                dates = {"birth": (birth,), "death": (death,), "life": (birth, death)}[asked.attribute]
            if dates and all(d is not None for d in dates):
                return Value(option, q, _sentence_of(text, dates[0].start), tuple(dates), via)
    return None


def _bridges(relation: str, p: int, titles: Sequence[str], texts: Sequence[str]) -> list[tuple[int, str]]:
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
        if q == p or _bare(title) == _bare(titles[p]):
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
        lengths = _lengths(values[0].dates, values[1].dates)
        if lengths is None:
            return None
        first_wins = (lengths[0] > lengths[1]) == asked.later
    else:
        first_earlier = earlier(values[0].dates[0].ymd, values[1].dates[0].ymd)
        if first_earlier is None:  # a tie, or a date too coarse to tell
            return None
        first_wins = first_earlier != asked.later
    return Comparison(asked.options[0 if first_wins else 1], asked, (values[0], values[1]))


def _lengths(a: Sequence[Date], b: Sequence[Date]) -> tuple[int, int] | None:
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


def settle(example, reading):
    """`reading` (a `drkit.reader.model.Reading` of `example`) with its answer replaced where the dates read settle a
    which-of-two question (`compare`) or the countries read a same-country one (`drkit.reader.same`); unchanged
    otherwise."""
    import dataclasses

    titles, texts = [p.title for p in example.passages], [p.text for p in example.passages]
    found = compare(example.question, titles, texts) or _same(example.question, titles, texts)
    if found is None:
        return reading
    kind = found.answer if found.asked.attribute == "country" else "span"  # a same-country answer is yes or no
    return dataclasses.replace(reading, answer=found.answer, answer_type=kind, span=None, comparison=found)


def _same(question: str, titles: Sequence[str], texts: Sequence[str]) -> Comparison | None:
    """`drkit.reader.same.same_country` as a `Comparison` (attribute "country")."""
    from drkit.reader.same import same_country

    same = same_country(question, titles, texts)
    if same is None:
        return None
    answer, read, relation = same
    values = tuple(Value(titles[p], q, _sentence_of(texts[q], at), (), titles[q] if q != p else None, country)
                   for p, q, country, at in read)
    return Comparison(answer, Asked((titles[read[0][0]], titles[read[1][0]]), "country", False, relation, ()), values)
