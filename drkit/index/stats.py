"""Statistics of a sparse index: counts, distant-supervision coverage, sparse reachability."""

from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

import numpy as np
import scipy.sparse as sp

from drkit.data.kb import EntityTable, Triple
from drkit.data.questions import Question
from drkit.errors import ConfigError
from drkit.index.csr import concat_ranges, mention_incidence


def index_counts(entities: EntityTable, n_linkable: int, n_articles: int, n_passages: int,
                 mention_entity: np.ndarray, A_indptr: np.ndarray) -> dict:
    """Sizes of the index; ``A_row_*`` count mentions per row of A_{E->M}."""
    row_len = np.diff(A_indptr)
    nonempty = row_len[row_len > 0]
    mentioned = np.unique(mention_entity)
    return {
        "entities": len(entities),
        "entities_linkable": n_linkable,
        "entities_with_mentions": int(len(mentioned)),
        "articles": n_articles,
        "passages": n_passages,
        "mentions": int(len(mention_entity)),
        "A_nnz": int(A_indptr[-1]),
        "A_row_mean": float(row_len.mean()) if len(row_len) else 0.0,
        "A_row_mean_nonempty": float(nonempty.mean()) if len(nonempty) else 0.0,
        "A_row_max": int(row_len.max()) if len(row_len) else 0,
        "A_rows_empty": int(np.sum(row_len == 0)),
    }


def kb_coverage(entities: EntityTable, triples: Iterable[Triple], mention_entity: np.ndarray,
                mention_passage: np.ndarray, n_passages: int) -> dict:
    """Fraction of KB triples (s, r, o) for which one passage mentions both s and o.

    Triples whose subject or object is never mentioned count as not covered, and are counted.
    """
    mentioned_in = mention_incidence(mention_entity, mention_passage, len(entities), n_passages)
    covered, total = defaultdict(int), defaultdict(int)
    for t in triples:
        s, o = entities.lookup(t.subject), entities.lookup(t.object)
        total[t.relation] += 1
        if s is None or o is None:
            continue
        ps = mentioned_in.indices[mentioned_in.indptr[s] : mentioned_in.indptr[s + 1]]
        po = mentioned_in.indices[mentioned_in.indptr[o] : mentioned_in.indptr[o + 1]]
        if len(ps) and len(po) and len(np.intersect1d(ps, po, assume_unique=True)):
            covered[t.relation] += 1
    n, c = sum(total.values()), sum(covered.values())
    return {
        "triples": n,
        "covered": c,
        "fraction": c / n if n else 0.0,
        "by_relation": {r: {"triples": total[r], "covered": covered[r], "fraction": covered[r] / total[r]}
                        for r in sorted(total)},
    }


def sparse_reachability(entities: EntityTable, questions: Sequence[Question], hops: int,
                        entity_passage_indptr: np.ndarray, entity_passage: np.ndarray,
                        mention_entity: np.ndarray, mention_passage: np.ndarray, n_passages: int) -> dict:
    """Whether a gold answer is reachable from the topic entity in exactly `hops` steps of A then B.

    One step maps a set of entities to the entities mentioned in their top-mu passages (A, then B),
    with no dense filtering: the ceiling the sparse constraint puts on the model. Questions whose
    topic entity is not in the entity table count as unreachable, and are counted.
    """
    return sparse_reachability_sets(entities, [(hops, questions)], entity_passage_indptr, entity_passage,
                                    mention_entity, mention_passage, n_passages)[0]


def sparse_reachability_sets(entities: EntityTable, question_sets: Sequence[tuple[int, Sequence[Question]]],
                             entity_passage_indptr: np.ndarray, entity_passage: np.ndarray,
                             mention_entity: np.ndarray, mention_passage: np.ndarray, n_passages: int) -> list[dict]:
    """`sparse_reachability` for several ``(hops, questions)`` sets, building the step graph once."""
    for hops, _ in question_sets:
        if hops < 1:
            raise ConfigError(f"hops must be at least 1, got {hops}")
    n_entities = len(entities)
    ep = sp.csr_matrix((np.ones(len(entity_passage), np.float32), entity_passage, entity_passage_indptr),
                       shape=(n_entities, n_passages))  # (E, P): EP
    mentioned = mention_incidence(mention_entity, mention_passage, n_entities, n_passages)  # (E, P) 0/1
    # one step e -> a is EP[e] then a passage's entities; it is never multiplied out (E x E can be
    # dense where passages mention many entities): the walks read the two factors, O(nnz EP + M) memory
    forward = (ep, sp.csr_matrix(mentioned.T))  # e -> its top-mu passages -> the entities they mention
    backward = (mentioned, sp.csr_matrix(ep.T))  # a -> the passages mentioning it -> entities with them in EP
    return [_reachability(entities, questions, hops, forward, backward) for hops, questions in question_sets]


def _rows(m: sp.csr_matrix, ids: np.ndarray) -> np.ndarray:
    """The distinct column indices of rows `ids` of `m`."""
    ids = np.asarray(ids, dtype=np.int64)
    if not len(ids):
        return np.zeros(0, np.int64)
    return np.unique(m.indices[concat_ranges(m.indptr[ids], m.indptr[ids + 1] - m.indptr[ids])])


def _step(factors: tuple[sp.csr_matrix, sp.csr_matrix], ids: np.ndarray) -> np.ndarray:
    return _rows(factors[1], _rows(factors[0], ids))


def _reachability(entities: EntityTable, questions: Sequence[Question], hops: int,
                  forward: tuple[sp.csr_matrix, sp.csr_matrix], backward: tuple[sp.csr_matrix, sp.csr_matrix]) -> dict:
    """Meet in the middle: walk ``hops - 1`` steps forward from the topic, then ask whether that set
    meets the entities one step *before* an answer."""
    n_entities = len(entities)
    reached: dict[int, np.ndarray] = {}  # topic -> entities reachable in hops - 1 steps
    mask = np.zeros(n_entities, dtype=bool)
    reachable = unknown_topic = unknown_answers = 0
    sizes = []
    for q in questions:
        topic = entities.lookup(q.topic) if q.topic is not None else None  # None: a plain question not linked
        if topic is None:
            unknown_topic += 1
            continue
        answers = [a for a in (entities.lookup(x) for x in q.answers) if a is not None]
        if not answers:
            unknown_answers += 1
            continue
        if topic not in reached:
            frontier = np.array([topic])
            for _ in range(hops - 1):
                frontier = _step(forward, frontier)
            reached[topic] = frontier
            sizes.append(len(frontier))
        frontier = reached[topic]
        mask[frontier] = True
        if mask[_step(backward, np.array(answers))].any():
            reachable += 1
        mask[frontier] = False
    n = len(questions)
    return {
        "hops": hops,
        "questions": n,
        "reachable": reachable,
        "fraction": reachable / n if n else 0.0,
        "topic_not_an_entity": unknown_topic,
        "no_answer_is_an_entity": unknown_answers,
        "mean_entities_after_hops_minus_1": float(np.mean(sizes)) if sizes else 0.0,
    }
