"""Distant supervision from a KB for pretraining the mention encoder (paper, 2.3).

Each KB fact (e1, R, e2) gives two slot-filling queries: ``(e1, R, ?)`` with answers every e2 such
that (e1, R, e2) holds, and the inverse ``(e2, R^-1, ?)``. A query's text is the subject's name and
a description of the relation, e.g. ``"Kismet, directed by, ?"`` or ``"William Dieterle, directed, ?"``.

For a query q and a passage d (``label``):

* positive: d mentions the subject and at least one answer; the answer mentions are the gold spans;
* negative ("no answer"): d mentions no answer;
* ignored: d mentions an answer but not the subject (the text may or may not state the fact).

Hard negatives for q (``negative``), each a passage with no answer of q:

* ``shared_entity``: mentions the subject of q;
* ``shared_relation``: a passage another training query with the same relation and direction is
  trained on as a positive, not mentioning the subject of q;
* ``random``: any passage.

Held-out queries, for the slot-filling evaluation, are held out with their facts. A *fact* is a KB
triple (e1, R, e2) between two distinct entities of the index; it is stated by exactly two queries,
``(e1, R, ?)`` (as its answer e2) and ``(e2, R^-1, ?)`` (as its answer e1), and a query states one fact
per answer. A seeded draw of ``holdout`` of the queries that have a positive passage (at most
``max_holdout``) is held out, and every fact they state is held out with them, in both directions:

* a held-out query is never trained on (and keeps all its answers, for the evaluation);
* in every other query, the answers whose fact is held out are *withheld*: never gold, and a passage
  mentioning one is ignored for that query (neither a positive nor a negative). So the inverse query
  ``(e2, R^-1, ?)`` of a held-out ``(e1, R, ?)`` is still trained on its other answers (``"1944, films
  released in, ?"`` loses only the held-out films), and is not trained on if no positive is left.

So no held-out fact is seen by training, in either direction, and training loses only the held-out
facts (and, for a query with a withheld answer, the passages mentioning it). ``holdout`` is the
fraction of the queries held out (the same draw as when queries were held out alone); as a fact is
held out when either of its two queries is, up to twice that fraction of the facts is. On MetaQA:
2,000 of the 110,150 queries with a passage, 4,702 of the 129,540 facts (3.6%); 105,624 queries are
trained on, 2.3% fewer than with the queries alone held out.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

import numpy as np

from drkit.data.kb import Triple
from drkit.errors import ConfigError, InputFormatError
from drkit.index.csr import concat_ranges
from drkit.index.sparse import SparseIndex
from drkit.util.sampling import sample_rows
from drkit.util.warnlog import WarningLog

NEGATIVE_KINDS = ("shared_entity", "shared_relation", "random")
POSITIVE, NEGATIVE, IGNORED = 1, 0, -1

# Forward and inverse descriptions of the MetaQA relations.
METAQA_RELATIONS = {
    "directed_by": ("directed by", "directed"),
    "written_by": ("written by", "wrote"),
    "starred_actors": ("starring", "starred in"),
    "release_year": ("release year", "films released in"),
    "in_language": ("in language", "films in language"),
    "has_genre": ("genre", "films of genre"),
    "has_tags": ("tagged", "films tagged"),
    "has_imdb_rating": ("imdb rating", "films rated"),
    "has_imdb_votes": ("imdb votes", "films with imdb votes"),
}


@dataclass(frozen=True)
class DistantConfig:
    """How slot-filling queries are made from the KB and which are held out."""

    holdout: float = field(default=0.02, metadata={"help": "fraction of the queries held out for evaluation, "
                           "with their facts (withheld from training in both directions)"})
    max_holdout: int = field(default=2000, metadata={"help": "at most this many held-out queries"})
    relation_text: str = field(default="", metadata={"help": "JSON file {relation: [forward text, inverse text]} "
                               "(default: built-in MetaQA descriptions, else the relation's name)"})
    split_seed: int = field(default=0, metadata={"help": "seed of the held-out split"})

    def __post_init__(self):
        if not 0 <= self.holdout < 1 or self.max_holdout < 0:
            raise ConfigError("holdout must be in [0, 1) and max_holdout >= 0")


def relation_descriptions(relations: Iterable[str], path: str | Path | None, warnings: WarningLog) -> dict:
    """``{relation: (forward text, inverse text)}`` from `path`, the built-in table, or the name."""
    table = dict(METAQA_RELATIONS)
    if path:
        try:
            user = json.loads(Path(path).read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise InputFormatError(path, exc.lineno, f"not valid JSON: {exc.msg}") from exc
        except UnicodeDecodeError as exc:
            raise InputFormatError(path, None, f"not UTF-8: byte 0x{exc.object[exc.start]:02x} at byte {exc.start}") from None
        if not isinstance(user, dict):
            raise InputFormatError(path, None, "expected a JSON object {relation: [forward text, inverse text]}")
        for rel, texts in user.items():
            if not (isinstance(texts, list) and len(texts) == 2 and all(isinstance(t, str) and t.strip() for t in texts)):
                raise InputFormatError(path, None, "expected [forward text, inverse text]", field=rel)
            table[rel] = tuple(texts)
    out = {}
    for rel in sorted(set(relations)):
        if rel not in table:
            name = rel.replace("_", " ")
            table[rel] = (name, f"inverse of {name}")
            warnings.add("relation_without_description", f"{rel!r} is described as {table[rel]}")
        out[rel] = table[rel]
    return out


def relation_key(relation: str, inverse: bool) -> str:
    """``"directed_by"`` or ``"directed_by^-1"``: how results are grouped by relation and direction."""
    return f"{relation}^-1" if inverse else relation


@dataclass
class SlotQueries:
    """All slot-filling queries, in CSR form. Query i has subject ``subject[i]``, relation
    ``relations[relation[i]]``, direction ``inverse[i]`` and answers ``answers(i)``, that is
    ``answers_flat[answer_indptr[i]:answer_indptr[i+1]]`` (sorted entity ids)."""

    subject: np.ndarray
    relation: np.ndarray
    inverse: np.ndarray
    answer_indptr: np.ndarray
    answers_flat: np.ndarray
    relations: list[str]
    texts: list[str]

    def __len__(self) -> int:
        return len(self.subject)

    def answers(self, q: int) -> np.ndarray:
        return self.answers_flat[self.answer_indptr[q] : self.answer_indptr[q + 1]]


def _contains_any(sorted_values: np.ndarray, items: np.ndarray) -> bool:
    """Whether any of `items` is in `sorted_values` (sorted)."""
    if len(sorted_values) == 0 or len(items) == 0:
        return False
    pos = np.searchsorted(sorted_values, items)
    pos = np.minimum(pos, len(sorted_values) - 1)
    return bool((sorted_values[pos] == items).any())


class DistantSupervision:
    """Queries, positive passages, labels and hard negatives over a sparse index and a KB."""

    negative_kinds = NEGATIVE_KINDS

    def __init__(self, index: SparseIndex, triples: Iterable[Triple], config: DistantConfig = DistantConfig(),
                 warnings: WarningLog | None = None):
        self.index = index
        self.config = config
        self.warnings = warnings if warnings is not None else WarningLog()
        self.mention_indptr = index.passage_mention_indptr  # passage p holds mentions [mention_indptr[p], mention_indptr[p+1])
        # the distinct entities each passage mentions, and the passages mentioning each entity: CSR, sorted
        by_entity = index.mention_incidence  # (E, P)
        by_passage = by_entity.T.tocsr()  # (P, E)
        self.passage_entity_indptr = by_passage.indptr.astype(np.int64)
        self.passage_entity = by_passage.indices.astype(np.int64)
        self.mentioning_passage_indptr = by_entity.indptr.astype(np.int64)
        self.mentioning_passage = by_entity.indices.astype(np.int64)
        self.queries = self._make_queries(triples)
        self._find_positives()
        self._split()

    # -- building ------------------------------------------------------------------------------
    def _make_queries(self, triples: Iterable[Triple]) -> SlotQueries:
        ents = self.index.entities
        facts: dict[tuple[int, str, bool], set[int]] = {}
        missing: list[str] = []
        n_facts = 0
        for t in triples:
            n_facts += 1
            s, o = ents.lookup(t.subject), ents.lookup(t.object)
            if s is None or o is None:
                missing.append(f"line {t.line}: {t.subject if s is None else t.object!r}")
                continue
            if s == o:
                continue
            facts.setdefault((s, t.relation, False), set()).add(o)
            facts.setdefault((o, t.relation, True), set()).add(s)
        if n_facts == 0:
            raise ConfigError("the KB has no facts")
        if missing:
            self.warnings.add("kb_entity_not_in_index", "facts whose subject or object is not an entity of the index "
                              f"are skipped, e.g. {missing[:3]}", count=len(missing))
        relations = sorted({k[1] for k in facts})
        texts = relation_descriptions(relations, self.config.relation_text or None, self.warnings)
        rel_id = {r: i for i, r in enumerate(relations)}
        keys = sorted(facts, key=lambda k: (k[0], rel_id[k[1]], k[2]))
        answer_lists = [np.array(sorted(facts[k]), dtype=np.int64) for k in keys]
        indptr = np.zeros(len(keys) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(a) for a in answer_lists])
        return SlotQueries(
            subject=np.array([k[0] for k in keys], dtype=np.int64),
            relation=np.array([rel_id[k[1]] for k in keys], dtype=np.int64),
            inverse=np.array([k[2] for k in keys], dtype=bool),
            answer_indptr=indptr,
            answers_flat=np.concatenate(answer_lists) if answer_lists else np.zeros(0, np.int64),
            relations=relations,
            texts=[f"{ents.names[k[0]]}, {texts[k[1]][1 if k[2] else 0]}, ?" for k in keys],
        )

    def _mentions_any(self, passages: np.ndarray, entities: np.ndarray) -> np.ndarray:
        """Whether each of `passages` mentions one of `entities`: (len(passages),) bool."""
        starts = self.passage_entity_indptr[passages]
        lengths = self.passage_entity_indptr[passages + 1] - starts
        hit = np.isin(self.passage_entity[concat_ranges(starts, lengths)], entities)
        owner = np.repeat(np.arange(len(passages)), lengths)
        return np.bincount(owner[hit], minlength=len(passages)) > 0

    def passage_entities(self, p: int) -> np.ndarray:
        return self.passage_entity[self.passage_entity_indptr[p] : self.passage_entity_indptr[p + 1]]

    def entity_passages(self, e: int) -> np.ndarray:
        return self.mentioning_passage[self.mentioning_passage_indptr[e] : self.mentioning_passage_indptr[e + 1]]

    def _find_positives(self) -> None:
        """Positive passages of every query: those mentioning its subject and one of its answers."""
        q = self.queries
        pos_lists = []
        for i in range(len(q)):
            cands = self.entity_passages(int(q.subject[i]))
            pos_lists.append(cands[self._mentions_any(cands, q.answers(i))])
        self.pos_indptr = np.zeros(len(q) + 1, dtype=np.int64)
        self.pos_indptr[1:] = np.cumsum([len(p) for p in pos_lists])
        self.pos_passages = np.concatenate(pos_lists) if pos_lists else np.zeros(0, np.int64)
        has_pos = np.diff(self.pos_indptr) > 0
        self.has_positive = has_pos
        unmentioned = np.diff(self.mentioning_passage_indptr)[q.subject] == 0
        if unmentioned.any():
            self.warnings.add("query_subject_never_mentioned", "queries whose subject has no mention in the "
                              f"corpus cannot be trained on, e.g. {q.texts[int(np.flatnonzero(unmentioned)[0])]!r}",
                              count=int(unmentioned.sum()))
        no_text = ~has_pos & ~unmentioned
        if no_text.any():
            self.warnings.add("query_without_passage", "queries with no passage mentioning the subject and an answer "
                              f"cannot be trained on, e.g. {q.texts[int(np.flatnonzero(no_text)[0])]!r}",
                              count=int(no_text.sum()))
        for r, rel in enumerate(q.relations):
            if not has_pos[q.relation == r].any():
                self.warnings.add("relation_not_in_text", f"no passage states any fact of {rel!r}; it gets no training data")

    def _split(self) -> None:
        """Hold out queries with their facts (module docstring): `heldout`, `withheld(q)`, the training
        (query, passage) pairs ``pos_passages[pos_trained]``, `train` and the passage -> query map."""
        cfg = self.config
        q = self.queries
        candidates = np.flatnonzero(self.has_positive)
        n_hold = min(cfg.max_holdout, int(round(cfg.holdout * len(candidates))))
        held = candidates[sample_rows(len(candidates), n_hold, cfg.split_seed)]
        self.is_heldout = np.zeros(len(q), dtype=bool)
        self.is_heldout[held] = True
        self.heldout = held
        self._withhold_facts_of(held)
        # the positive pairs training uses: not of a held-out query, no withheld answer in the passage
        qs = np.repeat(np.arange(len(q)), np.diff(self.pos_indptr))
        self.pos_trained = ~self.is_heldout[qs]
        for i in np.flatnonzero(np.diff(self.withheld_indptr)):
            lo, hi = self.pos_indptr[i], self.pos_indptr[i + 1]
            self.pos_trained[lo:hi] &= ~self._mentions_any(self.pos_passages[lo:hi], self.withheld(i))
        self.train = np.unique(qs[self.pos_trained])
        # training queries sharing a relation and direction, for shared-relation negatives
        group = q.relation * 2 + q.inverse.astype(np.int64)
        self.group_of = group
        self.group_members = {int(g): self.train[group[self.train] == g] for g in np.unique(group)}
        # passage -> its training queries (queries for which it is a positive)
        ps, qs = self.pos_passages[self.pos_trained], qs[self.pos_trained]
        order = np.lexsort((qs, ps))
        self.anchor_queries = qs[order]
        self.anchor_indptr = np.searchsorted(ps[order], np.arange(self.index.n_passages + 1)).astype(np.int64)
        self.anchors = np.flatnonzero(np.diff(self.anchor_indptr) > 0)

    def _withhold_facts_of(self, held: np.ndarray) -> None:
        """``withheld(q)``: the answers of each query q not in `held` whose fact a query in `held` states."""
        q = self.queries
        n_rel, n_ent = len(q.relations), len(self.index.entities)
        # a query's key, by which _make_queries sorted them
        keys = (q.subject * n_rel + q.relation) * 2 + q.inverse
        counts = np.diff(q.answer_indptr)[held]
        h = np.repeat(held, counts)
        answers = q.answers_flat[concat_ranges(q.answer_indptr[held], counts)]
        # the other query stating fact (subject[h], relation[h], answer): it exists, as every fact has both
        other = np.searchsorted(keys, (answers * n_rel + q.relation[h]) * 2 + ~q.inverse[h])
        keep = ~self.is_heldout[other]
        pairs = np.unique(other[keep] * n_ent + q.subject[h][keep])  # (query, withheld answer), sorted
        self.withheld_answers = pairs % n_ent
        self.withheld_indptr = np.searchsorted(pairs // n_ent, np.arange(len(q) + 1)).astype(np.int64)
        e1 = np.where(q.inverse[h], answers, q.subject[h])  # the held-out facts (e1, R, e2)
        e2 = np.where(q.inverse[h], q.subject[h], answers)
        self.heldout_facts = len(np.unique((e1 * n_ent + e2) * n_rel + q.relation[h]))

    # -- queries against passages ----------------------------------------------------------------
    def positives(self, q: int) -> np.ndarray:
        """Passages mentioning the subject of q and one of its answers (all of them, held out or not)."""
        return self.pos_passages[self.pos_indptr[q] : self.pos_indptr[q + 1]]

    def training_positives(self, q: int) -> np.ndarray:
        """The positives of q that training uses: none for a held-out query, else those mentioning no
        withheld answer of q."""
        lo, hi = self.pos_indptr[q], self.pos_indptr[q + 1]
        return self.pos_passages[lo:hi][self.pos_trained[lo:hi]]

    def withheld(self, q: int) -> np.ndarray:
        """Answers of q (sorted) whose fact is held out with a held-out query; empty for a held-out q."""
        return self.withheld_answers[self.withheld_indptr[q] : self.withheld_indptr[q + 1]]

    def training_queries(self, p: int) -> np.ndarray:
        """Training queries for which passage p is a positive."""
        return self.anchor_queries[self.anchor_indptr[p] : self.anchor_indptr[p + 1]]

    def label(self, q: int, p: int) -> int:
        """POSITIVE, NEGATIVE or IGNORED (module docstring); IGNORED also when p mentions a withheld answer."""
        ents = self.passage_entities(p)
        if not _contains_any(ents, self.queries.answers(q)):
            return NEGATIVE
        if _contains_any(ents, self.withheld(q)):
            return IGNORED
        return POSITIVE if _contains_any(ents, self.queries.subject[q : q + 1]) else IGNORED

    def gold_mentions(self, q: int, p: int) -> np.ndarray:
        """Rows of ``index.mentions`` in passage p whose entity is an answer of q (not a withheld one)."""
        lo, hi = self.mention_indptr[p], self.mention_indptr[p + 1]
        ents = np.asarray(self.index.mentions[lo:hi, 0])
        gold = np.isin(ents, self.queries.answers(q)) & ~np.isin(ents, self.withheld(q))
        return lo + np.flatnonzero(gold)

    def negative(self, q: int, kind: str, rng: np.random.Generator, tries: int = 20) -> int | None:
        """A passage that is a `kind` negative of query q, or None if none was found in `tries` draws."""
        subject = int(self.queries.subject[q])
        answers = self.queries.answers(q)
        for _ in range(tries):
            if kind == "shared_entity":
                pool = self.entity_passages(subject)
                if len(pool) == 0:
                    return None
                p = int(pool[rng.integers(len(pool))])
            elif kind == "shared_relation":
                members = self.group_members.get(int(self.group_of[q]), np.zeros(0, np.int64))
                if len(members) == 0:
                    return None
                other = int(members[rng.integers(len(members))])
                if self.queries.subject[other] == subject:
                    continue
                pool = self.training_positives(other)
                p = int(pool[rng.integers(len(pool))])
                if _contains_any(self.passage_entities(p), np.array([subject])):
                    continue
            elif kind == "random":
                p = int(rng.integers(self.index.n_passages))
            else:
                raise ValueError(f"unknown negative kind {kind!r}; expected one of {NEGATIVE_KINDS}")
            if not _contains_any(self.passage_entities(p), answers):
                return p
        return None

    def query_record(self, q: int) -> dict:
        qs = self.queries
        ents = self.index.entities
        return {"query": int(q), "text": qs.texts[q], "subject": ents.names[int(qs.subject[q])],
                "relation": qs.relations[int(qs.relation[q])], "inverse": bool(qs.inverse[q]),
                "answers": [ents.names[int(a)] for a in qs.answers(q)]}

    def summary(self) -> dict:
        qs = self.queries
        by_rel = {}
        for r, rel in enumerate(qs.relations):
            for inv in (False, True):
                sel = (qs.relation == r) & (qs.inverse == inv)
                by_rel[relation_key(rel, inv)] = {
                    "queries": int(sel.sum()), "with_passage": int((sel & self.has_positive).sum()),
                    "heldout": int((sel & self.is_heldout).sum()), "train": int(sel[self.train].sum())}
        return {"queries": len(qs), "with_passage": int(self.has_positive.sum()), "train": len(self.train),
                "heldout": len(self.heldout), "heldout_facts": self.heldout_facts,
                "withheld_answers": len(self.withheld_answers), "positive_pairs": int(len(self.pos_passages)),
                "training_pairs": int(self.pos_trained.sum()), "anchor_passages": len(self.anchors),
                "by_relation": by_rel}
