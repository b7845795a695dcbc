"""The reader's examples, and its training data built by distant supervision (the paper's appendix).

An example is a question and the passages the reader reads (each with its corpus id and title); for
training it also has the gold answers, the gold passages and the strings that mark a supporting sentence.
Labels are found in the text, not given:

* the answer type: "yes" or "no" when the answer is one of them, else "span";
* the span: every occurrence of an answer in the gold passages (title or text; case-insensitive, not
  inside a longer word), or in any passage when the gold ones have none; the loss is the likelihood of
  all of them (`drkit.reader.model`);
* supporting sentences: the gold passages' sentences that contain the answer or an evidence triple's
  object (2Wiki's ``evidence``), as HotpotQA's are the sentences a human marked.

Two sources, neither of which may hold a question scored later:

* `question_sources`: multi-hop questions with answers and gold passages (2Wiki's ``train.jsonl`` format);
* `kb_sources`: one templated single-hop question per KB triple, "What is the {relation} of {subject}?",
  whose answer is the object found in the subject's passage (a triple whose object is not there is left out).

Each source has distractors: the BM25 top passages of its question that are not gold. Each epoch draws
its examples again (`epoch_examples`): the gold passages plus distractors up to N passages, gold passages
first in 60% of examples and all shuffled otherwise (the appendix's order trick, so that the reader
neither ignores order nor relies on it).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

from drkit.data.corpus import iter_json_objects, plain_id
from drkit.data.kb import chain_question, in_turn, kb_question
from drkit.errors import ConfigError, InputFormatError
from drkit.index.found import MONTHS as MONTH_NAMES
from drkit.reader.text import normalize_answer
from drkit.util.sampling import generator

SPAN, YES, NO = "span", "yes", "no"
ANSWER_TYPES = (SPAN, YES, NO)


def answer_type(answers: Sequence[str]) -> str:
    """"yes" or "no" when the gold answers are that word, else "span"."""
    norm = {normalize_answer(a) for a in answers}
    return YES if norm == {"yes"} else NO if norm == {"no"} else SPAN


@dataclass(frozen=True)
class ReaderPassage:
    id: str  # the corpus id
    title: str
    text: str


@dataclass(frozen=True)
class ReaderExample:
    id: str
    question: str
    passages: tuple[ReaderPassage, ...]
    answers: tuple[str, ...] = ()  # gold answers (aliases); empty at question time
    gold: frozenset = frozenset()  # ids of the gold passages
    support: tuple[str, ...] = ()  # a sentence holding one of these (or an answer) is supporting
    qtype: str = ""
    not_answers: tuple[str, ...] = ()  # names the answer is not (a hop's start: `drkit.reader.decompose`)
    # names the answer is best one of (holding one or held by one; the inner hop's: the titles read), where one of
    # the reader's best spans is (`drkit.reader.decode.decode`)
    answer_among: tuple[str, ...] = ()

    @property
    def answer_type(self) -> str:
        return answer_type(self.answers)


@dataclass(frozen=True)
class Source:
    """A training question before its passages are drawn: gold passages and distractors, best first."""

    id: str
    question: str
    answers: tuple[str, ...]
    gold: tuple[ReaderPassage, ...]
    distractors: tuple[ReaderPassage, ...]
    support: tuple[str, ...] = ()
    qtype: str = ""
    subject: str = ""  # a KB source's triple: its subject and relation
    relation: str = ""
    alone: bool = False  # read on its gold passages alone, as a hop of a question read in two steps is


@dataclass(frozen=True)
class OrderConfig:
    passages: int = field(default=5, metadata={"help": "passages the reader reads per question (N)"})
    gold_first: float = field(default=0.6, metadata={"help": "share of training examples with the gold passages first "
                                                             "(the others are shuffled)"})
    own_page: float = field(default=0.0, metadata={
        "help": "share of the single-hop KB questions read on their subject's own passage alone, as a question read "
                "in two steps reads each hop (drkit.reader.decompose); chosen once by the seed, batched apart (short "
                "batches train faster); the others get distractors up to N passages"})

    def __post_init__(self):
        if self.passages < 1:
            raise ConfigError(f"passages must be at least 1, got {self.passages}")
        for name in ("gold_first", "own_page"):
            if not 0 <= getattr(self, name) <= 1:
                raise ConfigError(f"{name} must be in [0, 1], got {getattr(self, name)}")


def read_passages(path: str | Path) -> list[ReaderPassage]:
    """The passages of a corpus file, ``{"id", "title", "text"}`` per line (an error names file, line and field)."""
    out, seen = [], set()
    for line_no, obj in iter_json_objects(path, "corpus file"):
        for key in ("id", "title", "text"):
            if not isinstance(obj.get(key), (str, int)) or isinstance(obj.get(key), bool):
                raise InputFormatError(path, line_no, "missing or not a string", field=key)
        pid = str(obj["id"])
        if pid in seen:
            raise InputFormatError(path, line_no, f"id {pid!r} appears twice", field="id")
        seen.add(pid)
        out.append(ReaderPassage(pid, str(obj["title"]), str(obj["text"])))
    if not out:
        raise ConfigError(f"{path} holds no passages")
    return out


def read_questions(path: str | Path, need_gold: bool = False, bad: list | None = None) -> list[dict]:
    """The question objects of a JSONL file (``{"id", "question"}``, and ``answers``, ``supporting``,
    ``evidence``, ``type`` where given), each with its ``line`` and its ``id`` as a string (a whole number is
    taken, as `drkit retrieve` takes it); `need_gold`: answers and supporting are required.
    A line that is not such an object is an `InputFormatError`, or with `bad` (a list) its message appended there
    and the line passed over; a file with no question is a `ConfigError`."""
    out = []
    for line_no, obj in iter_json_objects(path, "question file", bad):
        try:
            qid = str(obj["id"]) if plain_id(obj.get("id")) else None
            if qid is None or not qid.strip():
                raise InputFormatError(path, line_no, "must be a non-empty string or a whole number", field="id")
            if not isinstance(obj.get("question"), str) or not obj["question"].strip():
                raise InputFormatError(path, line_no, "must be a non-empty string", field="question")
            for key in ("answers", "supporting"):
                value = obj.get(key)
                if value is None and not need_gold:
                    continue
                if not isinstance(value, list) or not value or not all(plain_id(v) for v in value):
                    raise InputFormatError(path, line_no, "must be a non-empty list of strings (or whole numbers)",
                                           field=key)
        except InputFormatError as exc:
            if bad is None:
                raise
            bad.append(str(exc))
            continue
        out.append({**obj, "id": qid, "line": line_no})
    if not out:
        raise ConfigError(f"{path} holds no questions" + (f" that can be read ({len(bad)} bad lines: {bad[0]}"
                                                           f"{', ...' if len(bad) > 1 else ''})" if bad else ""))
    return out


class Distractors:
    """BM25 over the passages (title and text): a question's best passages that are not gold."""

    def __init__(self, passages: Sequence[ReaderPassage]):
        from drkit.index.bm25 import BM25

        self.passages = list(passages)
        self.bm25 = BM25([f"{p.title}\n{p.text}" for p in self.passages])

    def __call__(self, questions: Sequence[str], gold: Sequence[set], k: int) -> list[tuple[ReaderPassage, ...]]:
        found, _ = self.bm25.top(list(questions), k + max((len(g) for g in gold), default=0))
        return [tuple(self.passages[int(a)] for a in row if self.passages[int(a)].id not in g)[:k]
                for row, g in zip(found, gold)]


def question_sources(records: Sequence[dict], passages: Sequence[ReaderPassage], distractors: Distractors,
                     k: int = 8, path: str = "questions") -> list[Source]:
    """Training sources from questions with ``answers`` and ``supporting`` (corpus ids); an evidence triple's
    object marks supporting sentences too."""
    by_id = {p.id: p for p in passages}
    golds = []
    for r in records:
        missing = [str(s) for s in r["supporting"] if str(s) not in by_id]
        if missing:
            raise InputFormatError(path, r.get("line"), f"supporting passages {missing[:3]} are not in the corpus",
                                   field="supporting")
        golds.append(tuple(by_id[str(s)] for s in r["supporting"]))
    extra = distractors([r["question"] for r in records], [{p.id for p in g} for g in golds], k)
    out = []
    for r, g, d in zip(records, golds, extra):
        objects = tuple(str(e[2]) for e in r.get("evidence") or () if isinstance(e, (list, tuple)) and len(e) == 3)
        out.append(Source(r["id"], r["question"], tuple(str(a) for a in r["answers"]), g, d, objects,
                          str(r.get("type", ""))))
    return out


def kb_sources(triples, passages: Sequence[ReaderPassage], distractors: Distractors, k: int = 8,
               prefix: str = "kb") -> list[Source]:
    """One single-hop source per triple (subject, relation, object) whose object is in the subject's passage
    (the passage whose title is the subject; the first such passage when a title has several); its id is
    ``<prefix>-<the triple's line>``."""
    from drkit.reader.text import find_all

    by_title: dict[str, ReaderPassage] = {}
    for p in passages:
        by_title.setdefault(p.title, p)
    kept = []
    for t in triples:
        p = by_title.get(t.subject)
        if p is not None and (find_all(p.text, t.object) or find_all(p.title, t.object)):
            kept.append((t, p))
    questions = [kb_question(t.subject, t.relation) for t, _ in kept]
    extra = distractors(questions, [{p.id} for _, p in kept], k) if kept else []
    return [Source(f"{prefix}-{t.line}", q, (t.object,), (p,), d, (t.object,), "kb", t.subject, t.relation)
            for (t, p), q, d in zip(kept, questions, extra)]


def balanced_facts(triples, n: int, seed: int, known=frozenset()) -> list:
    """At most `n` of `triples` (`drkit.data.kb.Triple`) whose (subject, relation, object) is not in `known`, taken
    in turn from each relation (relations by name, each one's facts in a seeded order), so that a relation the
    patterns find thousands of facts of does not crowd out one they find a few of."""
    by_relation: dict[str, list] = {}
    for t in triples:
        if (t.subject, t.relation, t.object) not in known:
            by_relation.setdefault(t.relation, []).append(t)
    rng = generator(seed, 2, 2)  # neither an epoch's stream nor own_page_sources'
    return in_turn([[facts[i] for i in rng.permutation(len(facts))] for _, facts in sorted(by_relation.items())], n)


MONTHS = {m.lower(): i for i, m in enumerate(MONTH_NAMES, 1)}  # "january" -> 1


def parse_date(text: str) -> tuple[int, int, int] | None:
    """(year, month, day) of a date written with its year in digits ("December 24, 1886", "15 November 1911",
    "1322"); 0 where the month or the day is not given; None without a year."""
    years = re.findall(r"\b(\d{3,4})\b", text)
    if not years:
        return None
    words = re.findall(r"[a-z]+", text.lower())
    month = next((MONTHS[w] for w in words if w in MONTHS), 0)
    days = [int(d) for d in re.findall(r"\b(\d{1,2})\b", text) if 1 <= int(d) <= 31]
    return int(years[-1]), month, days[0] if days and month else 0


def earlier(a: tuple[int, int, int], b: tuple[int, int, int]) -> bool | None:
    """Whether date `a` is before date `b`; None when what both give does not tell (equal, or a missing part)."""
    for x, y in zip(a, b):
        if not x or not y:
            return None
        if x != y:
            return x < y
    return None


def composed_sources(singles: Sequence[Source], seed: int, k: int = 8) -> list[Source]:
    """Questions composed from the single-hop KB sources (`kb_sources`): for each triple whose object another
    triple of the same relation shares (not a date), two yes/no questions on whether two subjects have the same
    object: one with such a partner (yes), one with a partner of another object (no); for triples whose objects are dates, which of two
    subjects has the earlier (or later) one; and for each chain (s, r1, x), (x, r2, y) of triples, the two-hop
    "What is the r2 of the r1 of s?" (answer y) and, for pairs of chains with the same relations and dated y,
    which s has the r1 with the earlier (later) r2. Templates name the relations as the KB does; no question
    of a benchmark is used."""
    from drkit.reader.text import normalize_answer

    rng = generator(seed, 1)
    by_relation: dict[str, list[Source]] = {}
    for src in singles:
        by_relation.setdefault(src.relation, []).append(src)
    out: list[Source] = []

    def pair(a: Source, b: Source, question: str, answers: tuple, kind: str, gold=None) -> Source:
        gold = gold or (a.gold[0], b.gold[0])
        seen = {p.id for p in gold}
        extra = tuple(p for p in a.distractors + b.distractors if p.id not in seen)[:k]
        return Source(f"{kind}-{len(out)}", question, answers, tuple(gold), extra, a.support + b.support, kind)

    for relation, items in by_relation.items():
        norm = [normalize_answer(x.answers[0]) for x in items]
        same: dict[str, list[int]] = {}
        for i, n in enumerate(norm):
            same.setdefault(n, []).append(i)
        dates = [parse_date(x.answers[0]) for x in items]
        dated = sum(d is not None for d in dates) > len(items) / 2  # a date relation: no "same" questions
        for i, a in enumerate(items):
            twins = [j for j in same[norm[i]] if items[j].subject != a.subject]
            others = [j for j, n in enumerate(norm) if n != norm[i] and items[j].subject != a.subject]
            if twins and others and not dated:  # as many yes as no
                for j, answer in ((twins[int(rng.integers(len(twins)))], "yes"), (others[int(rng.integers(len(others)))], "no")):
                    b = items[j]
                    out.append(pair(a, b, f"Do {a.subject} and {b.subject} have the same {relation}?", (answer,),
                                    "kb-same"))
            if not others:
                continue
            j = others[int(rng.integers(len(others)))]
            b = items[j]
            if dates[i] and dates[j] and earlier(dates[i], dates[j]) is not None:
                first = a if earlier(dates[i], dates[j]) else b
                later = b if first is a else a
                if rng.random() < 0.5:
                    out.append(pair(a, b, f"Which has the earlier {relation}, {a.subject} or {b.subject}?",
                                    (first.subject,), "kb-compare"))
                else:
                    out.append(pair(a, b, f"Which has the later {relation}, {a.subject} or {b.subject}?",
                                    (later.subject,), "kb-compare"))
    by_subject: dict[str, list[Source]] = {}
    for src in singles:
        by_subject.setdefault(src.subject, []).append(src)
    chains = [(a, b) for a in singles for b in by_subject.get(a.answers[0], ()) if b.subject != a.subject]
    for a, b in chains:
        out.append(pair(a, b, chain_question(a.subject, a.relation, b.relation), b.answers, "kb-chain"))
    by_path: dict[tuple[str, str], list[tuple[Source, Source]]] = {}
    for a, b in chains:
        if parse_date(b.answers[0]):
            by_path.setdefault((a.relation, b.relation), []).append((a, b))
    for (r1, r2), found in by_path.items():
        for i, (a1, b1) in enumerate(found):
            a2, b2 = found[int(rng.integers(len(found)))]
            if a2.subject == a1.subject:
                continue
            order = earlier(parse_date(b1.answers[0]), parse_date(b2.answers[0]))
            if order is None:
                continue
            word = "earlier" if rng.random() < 0.5 else "later"
            answer = a1 if (order if word == "earlier" else not order) else a2
            out.append(Source(f"kb-bridge-{len(out)}", f"Which has the {r1} with the {word} {r2}, {a1.subject} or "
                              f"{a2.subject}?", (answer.subject,), (a1.gold[0], b1.gold[0], a2.gold[0], b2.gold[0]),
                              tuple(p for p in a1.distractors if p.id not in {a2.gold[0].id, b1.gold[0].id,
                                                                               b2.gold[0].id})[:k],
                              a1.support + b1.support + a2.support + b2.support, "kb-bridge"))
    return out


def arrange(gold: Sequence[ReaderPassage], distractors: Sequence[ReaderPassage], config: OrderConfig,
            rng) -> tuple[ReaderPassage, ...]:
    """The gold passages (at most N) and the first distractors up to N passages; gold first with probability
    `gold_first`, else all shuffled."""
    gold = list(gold)[: config.passages]
    chosen = gold + list(distractors)[: config.passages - len(gold)]
    if rng.random() < config.gold_first:
        return tuple(chosen)
    return tuple(chosen[i] for i in rng.permutation(len(chosen)))


def epoch_examples(sources: Sequence[Source], config: OrderConfig, seed: int, epoch: int,
                   alone: frozenset = frozenset()) -> list[ReaderExample]:
    """The examples of one pass over `sources`: passages drawn and ordered by a generator of (seed, epoch); the
    sources numbered in `alone` (`own_page_sources`) read their gold passage alone, a source marked ``alone``
    (`drkit.reader.decompose.hop_sources`) its gold passages (at most N)."""
    rng = generator(seed, epoch)
    # drawn for every source, those read alone too, so that the others read what they would without `alone`
    drawn = [arrange(s.gold, s.distractors, config, rng) for s in sources]

    def read(i: int, s: Source, passages: tuple) -> tuple:
        return s.gold[:1] if i in alone else s.gold[:config.passages] if s.alone else passages

    return [ReaderExample(s.id, s.question, read(i, s, passages), s.answers, frozenset(p.id for p in s.gold),
                          s.support, s.qtype)
            for i, (s, passages) in enumerate(zip(sources, drawn))]


def own_page_sources(sources: Sequence[Source], share: float, seed: int) -> frozenset:
    """The numbers of the single-hop KB sources (`kb_sources`) read on their subject's passage alone: `share`
    of them (rounded), chosen by the seed, the same in every pass."""
    singles = [i for i, s in enumerate(sources) if s.qtype == "kb"]
    order = generator(seed, 2, 1).permutation(len(singles))[: round(share * len(singles))]  # not epoch 2's stream
    return frozenset(singles[int(j)] for j in order)
