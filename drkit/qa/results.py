"""What the front door (`drkit.qa.pipeline.DrKIT`) returns: typed answers, reasoning chains with their
evidence, and retrieved passages, each JSON-ready."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Sequence


@dataclass(frozen=True)
class Answer:
    entity: str
    entity_id: int
    prob: float


@dataclass(frozen=True)
class Evidence:
    """The mention that supports an entity of a hop, in its passage."""

    mention_id: int
    passage_id: int
    title: str  # title of the passage's article
    text: str  # the passage text
    start: int  # character offsets of the mention in `text`
    end: int
    via: str | None  # the Z_{t-1} entity whose row of A weighs most at this passage

    def snippet(self, width: int = 110) -> str:
        """The passage around the mention, the mention marked ``[[...]]``, on one line."""
        lo, hi = max(0, self.start - width), min(len(self.text), self.end + width)
        return (("..." if lo else "") + self.text[lo:self.start] + "[[" + self.text[self.start:self.end] + "]]"
                + self.text[self.end:hi] + ("..." if hi < len(self.text) else "")).replace("\n", " ")


def evidence_of(index, mention: int, via: str | None = None) -> Evidence:
    """Mention `mention` of a `SparseIndex` in its passage."""
    _, passage, _, _, c0, c1 = (int(x) for x in index.mentions[mention])
    title = index.article_titles[int(index.passage_article[passage])]
    return Evidence(int(mention), passage, title, index.passage_text(passage), c0, c1, via)


@dataclass(frozen=True)
class HopEntity:
    entity: str
    entity_id: int
    prob: float
    evidence: Evidence | None  # None: no mention of it scored in this hop (e.g. a linked entity never mentioned)


@dataclass(frozen=True)
class Passage:
    """A retrieved passage: one line of the corpus."""

    id: str  # the corpus id
    title: str
    text: str
    score: float
    reached: bool  # reached by the model's hops (False: the question linker's ranking, listed after them)
    hop: int | None  # the hop that gave it most of its score (0: the question's own entities), when reached
    entity: str | None  # the entity that placed it (its title entity, or the entity whose mention it holds)
    article: int  # the index's article id

    def to_dict(self, text: bool = True) -> dict:
        out = dataclasses.asdict(self)
        if not text:
            out.pop("text")
        return out


@dataclass(frozen=True)
class Hop:
    hop: int  # a multi-hop model's from 1; a hop-mixing model's from 0 (Z_0, the linked entities rescored)
    n_entities: int  # entities with non-zero probability in Z_t
    top: tuple[HopEntity, ...]  # the most probable, best first


@dataclass(frozen=True)
class SupportingSentence:
    """A sentence the reader marked as evidence."""

    passage_id: str  # the corpus id of its passage
    title: str
    sentence: int  # its number in the passage's sentences (`drkit.reader.text.split_sentences`)
    text: str
    prob: float | None  # None: a sentence the comparison rules read (the reader's transformer did not run)
    start: int  # its character offsets in the passage's text
    end: int


@dataclass(frozen=True)
class ReaderAnswer:
    """The reader's answer (`drkit.reader`), read from the top passages."""

    text: str  # the span, or "yes" / "no"
    type: str  # span | yes | no
    prob: float | None  # the reader's probability of that type; None when the comparison rules answered unread
    passage_id: str | None  # the passage the span is in (None for yes / no)
    in_title: bool  # the span is in that passage's title (else in its text)
    start: int | None  # character offsets of the span in the title or text
    end: int | None
    supporting: tuple[SupportingSentence, ...]
    evidence: tuple  # the passages read that hold the span or a supporting sentence (`ReaderPassage`: id, title, text)
    # or a compared date
    comparison: dict | None = None  # when the dates or countries read settled a comparison question: what was
    # compared, each option's dates or country, passage and sentence (`drkit.reader.compare.Comparison.to_dict`)
    steps: dict | None = None  # when a two-hop question was read as two one-hop questions: {"inner", "bridge",
    # "outer"} (`drkit.reader.decompose`)


def rounded_prob(prob: float | None) -> float | None:
    """A probability to 4 places; None (the comparison rules answered, the transformer unread) stays None."""
    return None if prob is None else round(prob, 4)


def held_first(order: Sequence, held: set, key=lambda x: x) -> list:
    """`order` with the items whose `key` is in `held` first, each group in its order."""
    return [p for p in order if key(p) in held] + [p for p in order if key(p) not in held]


def reader_answer(reading, passages) -> ReaderAnswer:
    """A `drkit.reader.model.Reading` of `passages` (what was read, in order) as a `ReaderAnswer`."""
    from drkit.data.text import split_sentences
    from drkit.reader.reading import TITLE

    span = reading.span if reading.answer_type == "span" else None
    support, sentences = [], {}  # sentences: passage -> its sentences' offsets, split once
    for s in reading.supporting:
        if s.passage not in sentences:
            sentences[s.passage] = split_sentences(passages[s.passage].text)
        a, b = sentences[s.passage][s.sentence]
        support.append(SupportingSentence(s.passage_id, passages[s.passage].title, s.sentence, s.text,
                                          rounded_prob(s.prob), a, b))
    held = {s.passage for s in reading.supporting} | ({span.passage} if span else set())
    comparison = reading.comparison.to_dict(passages) if reading.comparison is not None else None
    held |= {v["passage"] for v in comparison["values"]} if comparison else set()
    return ReaderAnswer(reading.answer, reading.answer_type, rounded_prob(reading.type_prob),
                        passages[span.passage].id if span else None, bool(span and span.sentence == TITLE),
                        span.start if span else None, span.end if span else None, tuple(support),
                        tuple(passages[i] for i in sorted(held)), comparison,
                        reading.steps.to_dict() if reading.steps is not None else None)


@dataclass(frozen=True)
class Result:
    question: str  # as asked
    text: str  # what the encoder read (brackets removed)
    question_entity: str
    question_entity_id: int
    found_by: str  # "bracketed", or "linked ..." for a plain question
    hops: int
    answers: tuple[Answer, ...]  # best first
    chain: tuple[Hop, ...]  # empty when not asked for
    pi: tuple[float, ...] | None = None  # a hop-mixing model's weights of 0..T hops
    passages: tuple[Passage, ...] = ()  # when asked for: the best passages (a hop-mixing model's ranking; a
    # multi-hop model's: those holding its chain's supporting mentions); with a reader, those it read that hold one
    # of its supporting sentences first (each group in the retriever's order, with the retriever's scores)
    reading: ReaderAnswer | None = None  # with a reader: its answer from the top passages, with its evidence

    def to_dict(self) -> dict:
        """JSON-ready, with each mention's passage shortened to a snippet and the retrieved passages' texts left out
        (the reader's `evidence` passages keep theirs: they are what its offsets point into)."""
        out = dataclasses.asdict(self)
        for hop, hop_out in zip(self.chain, out["chain"]):
            for entity, entity_out in zip(hop.top, hop_out["top"]):
                ev = entity_out.pop("evidence")
                if ev is not None:
                    entity_out.update(mention_id=ev["mention_id"], passage_id=ev["passage_id"], title=ev["title"],
                                      start=ev["start"], end=ev["end"], via=ev["via"], snippet=entity.evidence.snippet())
        out["passages"] = [p.to_dict(text=False) for p in self.passages]
        return out
