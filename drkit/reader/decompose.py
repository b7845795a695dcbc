"""A two-hop question read as two one-hop questions, from its own phrase structure.

"Where was the director of film Blood Street born?" names an entity (Blood Street, the title of a passage
read) inside a relational noun phrase ("the director of film Blood Street"; "Blood Street's director" with
a possessive). The reader then reads

1. the inner question, "What is the director of film Blood Street?" (the form of the single-hop questions
   it is trained on, `drkit.data.kb.kb_question`), in the named entity's own passages when some
   were read (else in all of them): its span is the bridge, "Leo Fong": the reader's best span that names
   another passage read (holds its title or is held by it), where one of its best spans does, else its best,
   snapped to that title (`snap`);
2. the outer question, the question with the phrase replaced by the bridge, "Where was Leo Fong born?",
   in the bridge's own passages when some were read (else in all of them).

The answer is the outer reading's; the evidence is both readings' supporting sentences. The phrase is found
by spaCy's English parser (the pipeline `--entities ner` installs; without it questions are read whole): the
named entity (a placeholder word while parsing) is the object of the "of" of a noun with "the" / "a" ("the
director of film X"; X the object, or an apposition the parser hangs on the noun), or the possessor of a noun
("X's father"). A question that asks only for a kinship that is two relations and says which ("Who is X's
paternal grandfather?", "... mother-in-law?": `KINSHIP`) is read as those two: "What is the father of X?", then
"Who is the father of {bridge}?" (asked inside a longer question, "Where was X's paternal grandmother born?",
a kinship is read as one hop). A question whose outer part asks nothing else of the bridge ("Who is the
father of X?": "Who is {bridge}?"), that joins two entities by "and", or whose inner reading finds no span, is
read whole, as are the questions the comparison rules settle. `ReadConfig.decompose` (``--no-decompose``) turns it off.
"""

from __future__ import annotations

import dataclasses
import re
import threading
from dataclasses import dataclass
from typing import Sequence

from drkit.reader.clues import held_title, is_title_of, without_suffix
from drkit.reader.examples import SPAN, ReaderExample, ReaderPassage, Source, answer_type
from drkit.reader.text import find_all, normalize_answer
from drkit.util.hardware import say

PLACEHOLDERS = ("Smith", "Jones", "Brown")  # what the parser reads in place of the named entity: plain proper nouns
SLOT = "\0"  # where the bridge goes in the outer question
NOUNS = ("NN", "NNS")
CLAUSES = ("acl", "relcl", "punct")  # what follows a relational noun without being part of its name ("punct": "?")
QUOTES = "\"'“”‘’«»"
MIN_NAME = 3  # shorter titles are not looked for in a question
# a kinship word that is two relations and says which: the first read of the named entity, the second of the
# bridge ("grandfather" alone, "brother-in-law" or "uncle" could be either of two compositions: read whole)
KINSHIP = {"paternal grandfather": ("father", "father"), "paternal grandmother": ("father", "mother"),
           "maternal grandfather": ("mother", "father"), "maternal grandmother": ("mother", "mother"),
           "father-in-law": ("spouse", "father"), "mother-in-law": ("spouse", "mother")}
NOTHING_ASKED = re.compile(rf"\s*(?:who|what|which)\s+(?:is|was|are|were)\s+(?:the\s+(?:full\s+)?name\s+of\s+)?"
                           rf"{SLOT}\s*\??\s*", re.I)


@dataclass(frozen=True)
class Decomposition:
    named: str  # the entity the question names, as written in it
    inner: str  # the inner question: "What is the director of film X?"
    frame: str  # the question with the inner phrase replaced by `SLOT`

    def outer(self, bridge: str) -> str:
        return self.frame.replace(SLOT, bridge)


@dataclass(frozen=True)
class Steps:
    """How a question was read in two steps (`Reading.steps`)."""

    inner: str
    bridge: str
    outer: str

    def to_dict(self) -> dict:
        return {"inner": self.inner, "bridge": self.bridge, "outer": self.outer}


def named_in(question: str, titles: Sequence[str]) -> tuple[int, int] | None:
    """Where the question names the longest of `titles` (with or without a "(...)" suffix, case aside) as
    whole words; None when it names none."""
    best = None
    for title in titles:
        for form in {title, without_suffix(title)}:
            if len(form) < MIN_NAME:
                continue
            m = re.search(rf"(?<!\w){re.escape(form)}(?!\w)", question, re.I)
            if m and (best is None or m.end() - m.start() > best[1] - best[0]):
                best = (m.start(), m.end())
    return best


def _determined(token) -> bool:
    return any(c.dep_ == "det" and c.lower_ in ("the", "a", "an") for c in token.children)


def _relation(x):
    """The relational noun whose phrase holds the named entity's token `x`, and the possessor token when the
    phrase is a possessive ("X's father"); (None, None) when there is none."""
    while x.dep_ == "compound" and x.head is not x:
        x = x.head
    if x.dep_ == "conj" or any(c.dep_ in ("conj", "cc") for c in x.children):  # "A and B": two entities compared
        return None, None
    if x.dep_ == "poss" and x.head.tag_ in NOUNS:
        head = x.head
        if head.dep_ == "ROOT" and any(c.dep_ == "aux" for c in head.children):
            # "Where did X's father study?": the verb taken for a noun, the relation its compound after X
            after = [c for c in head.children if c.dep_ == "compound" and c.i > x.i]
            return (after[-1], x) if after else (None, None)
        return head, x
    if x.dep_ in ("pobj", "appos") and x.head is not x:
        head = x.head.head if x.dep_ == "pobj" and x.head.lower_ == "of" else x.head
        # "the place of birth of X": climb from "birth" to the noun with the determiner
        while head.tag_ in NOUNS and not _determined(head) and head.dep_ == "pobj" and head.head.lower_ == "of":
            head = head.head.head
        # the noun's own "of" stands between it and X ("the composer of film X", not "the company X is part of")
        if head.tag_ in NOUNS and _determined(head) and any(
                c.lower_ == "of" and head.i < c.i < x.i for c in head.children):
            return head, None
    return None, None


class Decomposer:
    """A question's `Decomposition` (None: read it whole), by spaCy's parser, loaded once (`Decomposer.shared`)."""

    _shared: "Decomposer | None" = None
    _missing = False
    _lock = threading.Lock()  # spaCy does not promise thread safety: the server's watcher thread reads too

    def __init__(self, nlp):
        self.nlp = nlp

    @classmethod
    def shared(cls) -> "Decomposer | None":
        """The process's decomposer; None (said once in the log) when spaCy's English pipeline is not installed
        or does not load."""
        with cls._lock:
            if cls._shared is None and not cls._missing:
                try:
                    import spacy

                    from drkit.index.ner import PIPELINE

                    cls._shared = cls(spacy.load(PIPELINE, exclude=["ner", "lemmatizer"]))
                except (ImportError, OSError, ValueError) as exc:
                    cls._missing = True
                    say(f"reader: two-hop questions are read whole: decomposing them needs spaCy's English pipeline "
                        f"(pip install 'drkit[ner]'; {type(exc).__name__}: {exc})")
        return cls._shared

    def __call__(self, question: str, titles: Sequence[str]) -> Decomposition | None:
        at = named_in(question, titles)
        placeholder = next((w for w in PLACEHOLDERS if w.lower() not in question.lower()), None)
        if at is None or placeholder is None or SLOT in question:
            return None
        named = question[at[0]:at[1]]
        text = question[:at[0]] + placeholder + question[at[1]:]
        with self._lock:
            doc = self.nlp(text)
        x = next((t for t in doc if t.idx == at[0]), None)
        if x is None:
            return None
        noun, possessor = _relation(x)
        if noun is None:
            return None
        # the phrase: from the noun's first word to the named entity's end ("the director of film X", whatever the
        # parser hangs on X: "... film X study?"), or to the noun's last word in a possessive ("X's mother-in-law",
        # but "X's mother" of "X's mother's birthday", "X's film director" of "X's film director born")
        last = max((t.i for c in noun.rights if c.dep_ not in CLAUSES for t in c.subtree), default=noun.i) \
            if possessor is not None else x.i
        while last > noun.i and doc[last].tag_ == "POS":
            last -= 1
        start = doc[min(noun.left_edge.i, x.left_edge.i)].idx
        end = doc[last].idx + len(doc[last])
        x0, x1 = at[0], at[0] + len(placeholder)  # the placeholder's place in `text`
        if possessor is None and 0 < x0 and x1 < len(text) and text[x0 - 1] in QUOTES and text[x1] in QUOTES:
            end = max(end, x1 + 1)  # 'film "X"': the closing quote goes with the name
        if not start <= x0 < x1 <= end:
            return None
        frame = text[:start] + SLOT + text[end:]
        if not re.search(r"\w", frame):  # the phrase is the whole question
            return None
        if possessor is not None:
            first = possessor.i + 1
            while doc[first].tag_ == "POS":  # the "'s"
                first += 1
            inner = f"What is the {text[doc[first].idx:end]} of {named}?"
        else:
            inner = f"What is {text[start:x0] + named + text[x1:end]}?"
        if NOTHING_ASKED.fullmatch(frame):
            return kinship(named, inner, frame)
        return Decomposition(named, inner, frame)


def kinship(named: str, inner: str, frame: str) -> Decomposition | None:
    """A question that asks only for a kinship of the named entity that is two relations (`KINSHIP`): "Who is
    X's paternal grandfather?" read as "What is the father of X?", then "Who is the father of {bridge}?"; None
    (read it whole) for any other."""
    m = re.fullmatch(rf"What is the (.+?) of [{QUOTES}]?{re.escape(named)}[{QUOTES}]?\?", inner)
    relation = re.sub(r"\s*-\s*", "-", " ".join(m.group(1).lower().split())) if m else None
    if relation not in KINSHIP:
        return None
    first, second = KINSHIP[relation]
    return Decomposition(named, f"What is the {first} of {named}?", frame.replace(SLOT, f"the {second} of {SLOT}"))


def about(passages: Sequence[ReaderPassage], name: str) -> tuple[int, ...]:
    """The numbers of the passages whose title is `name` (case, punctuation and a "(...)" suffix aside); all of
    them when none is."""
    own = tuple(i for i, p in enumerate(passages) if is_title_of(p.title, name))
    return own or tuple(range(len(passages)))


def snap(span: str, passages: Sequence[ReaderPassage], named: str) -> str:
    """The bridge: the longest title (without its suffix) of a passage read, other than the named entity's, that
    the span holds as whole words ("Leo Fong, who directed it" -> "Leo Fong") or, for a span longer than
    `MIN_NAME` characters, that holds the span ("Fong" -> "Leo Fong"); else the span itself."""
    return held_title(span, others(passages, named), MIN_NAME) or span


def others(passages: Sequence[ReaderPassage], named: str) -> tuple[str, ...]:
    """The titles of `passages` other than the named entity's (`about`'s complement)."""
    return tuple(p.title for p in passages if not is_title_of(p.title, named))


def sub_example(example: ReaderExample, question: str, keep: Sequence[int], start: str,
                among: Sequence[str] = ()) -> ReaderExample:
    """`example` asked `question` over its passages `keep` (numbers into ``example.passages``); its answer is not
    `start`, the entity the hop starts from, and is best one of `among` (`ReaderExample.answer_among`)."""
    return ReaderExample(example.id, question, tuple(example.passages[i] for i in keep), not_answers=(start,),
                         answer_among=tuple(among))


def hop_sources(sources: Sequence[Source], decomposer: "Decomposer") -> list[Source]:
    """Training sources for the two readings a question is read in (`read_in_two_steps`), built from a training
    question with answers and gold passages that `decomposer` splits over its gold passages' titles: the inner
    question, answered by the bridge (the title, without its suffix, of the one other gold passage that the
    named entity's own gold passages name and that is not the answer) on the named entity's passages, and the
    outer question with that bridge, answered by the question's answers on the bridge's passage (where one of
    them is found there). Both read their gold passages alone (``Source.alone``), as the two readings do; a
    question where any of this is not found gives none. So the reader learns each hop in the words questions
    ask it, not only in the KB's template ("What is the {relation} of {subject}?")."""
    out: list[Source] = []
    for src in sources:
        if src.qtype.startswith("kb") or not src.answers or answer_type(src.answers) != SPAN:
            continue
        plan = decomposer(src.question, [p.title for p in src.gold])
        if plan is None:
            continue
        own = [p for p in src.gold if is_title_of(p.title, plan.named)]
        named_text = " ".join(f"{p.title} {p.text}" for p in own)
        answers = {normalize_answer(a) for a in src.answers}
        names = {p.id: without_suffix(p.title) for p in src.gold if p not in own}  # the other gold pages' names
        bridges = {names[p.id] for p in src.gold if p.id in names and normalize_answer(names[p.id]) not in answers
                   and find_all(named_text, names[p.id]) and any(find_all(f"{p.title} {p.text}", a) for a in src.answers)}
        if not own or len(bridges) != 1:
            continue
        [bridge] = bridges
        pages = tuple(p for p in src.gold if names.get(p.id) == bridge)
        out.append(Source(f"{src.id}-inner", plan.inner, (bridge,), tuple(own), src.distractors, (bridge,), "hop-inner",
                          alone=True))
        out.append(Source(f"{src.id}-outer", plan.outer(bridge), src.answers, pages, src.distractors, src.support,
                          "hop-outer", alone=True))
    return out


def _renumbered(reading, keep: Sequence[int]):
    """The span and supporting sentences of a reading of `sub_example(..., keep)`, numbered as in the example."""
    span = dataclasses.replace(reading.span, passage=keep[reading.span.passage]) if reading.span is not None else None
    return span, tuple(dataclasses.replace(s, passage=keep[s.passage]) for s in reading.supporting)


def read_in_two_steps(read, examples: Sequence[ReaderExample], plans: Sequence[Decomposition], read_whole=None) -> list:
    """Each example read as its `Decomposition`: the inner question, then the outer one with the bridge (module
    docstring); `read` reads a list of `ReaderExample` (a hop's question), `read_whole` (default: `read`) an
    example the two steps leave to be read whole. Returns one `drkit.reader.reading.Reading` an
    example: the outer reading's answer, span and type, both readings' supporting sentences, and its `Steps`; an
    example whose inner reading found no span (or only a blank one) is read whole instead."""
    inner_keep = [about(e.passages, plan.named) for e, plan in zip(examples, plans)]
    inner = read([sub_example(e, plan.inner, keep, plan.named, others(e.passages, plan.named))
                  for e, plan, keep in zip(examples, plans, inner_keep)])
    bridges = [snap(r.span.text, e.passages, plan.named) if r.span is not None and r.span.text.strip() else None
               for r, e, plan in zip(inner, examples, plans)]
    two = [i for i, b in enumerate(bridges) if b is not None]
    out: list = [None] * len(examples)
    whole = [i for i, b in enumerate(bridges) if b is None]
    for i, reading in zip(whole, (read_whole or read)([examples[i] for i in whole]) if whole else ()):
        out[i] = reading
    outer_keep = {i: about(examples[i].passages, bridges[i]) for i in two}
    outer = read([sub_example(examples[i], plans[i].outer(bridges[i]), outer_keep[i], bridges[i]) for i in two]) if two else []
    for i, second in zip(two, outer):
        _, support = _renumbered(inner[i], inner_keep[i])
        span, more = _renumbered(second, outer_keep[i])
        seen = {(s.passage, s.sentence) for s in support}
        support += tuple(s for s in more if (s.passage, s.sentence) not in seen)
        out[i] = dataclasses.replace(second, span=span, supporting=support,
                                     steps=Steps(plans[i].inner, bridges[i], plans[i].outer(bridges[i])))
    return out
