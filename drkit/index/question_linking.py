"""Linking plain questions to a weighted set of entities Z_0 (the paper, section 3.3).

"For entity linking over the questions, we retrieve the top 20 entities based on the match between a
bigram based TFIDF vector of the question with a similar vector derived from the surface form of the
entity." `QuestionLinker` does that, over the hashed word unigrams and bigrams of `drkit.index.tfidf`
(case-folded, stopwords dropped): each entity name is a TF-IDF vector, L2-normalised, with IDF computed
over the names; a question's vector likewise; the score of an entity is the cosine of the two. The
names found verbatim in the question (`EntityLinker.find`, as in the corpus) are always in Z_0, their
score raised by `exact_bonus`. Z_0 is the top `top` entities by score, weights proportional to the
scores (summing to 1 per question), ties broken by the lower entity id.

The output is coordinates, `LinkedQuestions` (rows, entity ids, weights; sorted by row then id), which
map one to one onto `drkit.reason.entity_set.EntitySet` (the reasoning stage imports this one, not the
other way round).

`linking_recall` measures what the paper reports ("the gold entities that need to be retrieved are
within 2 hops of the entities linked in this manner for 87% of the dev examples"): for questions with
gold entities, the share whose gold entities are all in Z_0, all within 1 hop and all within 2 hops of
Z_0, over the TF-IDF A, the link graph, or both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import scipy.sparse as sp

from drkit.errors import ConfigError
from drkit.index.csr import ADJACENCIES
from drkit.index.linking import EntityLinker
from drkit.index.tfidf import NgramHasher, document_frequency, idf_weights, tfidf


@dataclass(frozen=True)
class QuestionLinkConfig:
    """Settings of question linking (Z_0 of a plain question)."""

    top: int = field(default=20, metadata={"help": "entities in Z_0: the best by TF-IDF cosine of name and question (paper: 20)"})
    ngram: int = field(default=2, metadata={"help": "word n-grams of the TF-IDF vectors (paper: bigrams)"})
    exact_bonus: float = field(default=4.0, metadata={"help": "added to the cosine of a name found verbatim in the "
                                                       "question (such names are always in Z_0): with 4, such a name "
                                                       "outweighs several names that only share words with the question"})
    hash_buckets: int = field(default=1 << 22, metadata={"help": "hash buckets of the n-grams"})

    # what a field absent from a model saved before it existed meant: the bonus was 1.0 until 2026-11-27
    ABSENT_MEANT = {"exact_bonus": 1.0}

    def __post_init__(self):
        if self.top < 1 or self.ngram < 1 or self.hash_buckets < 1:
            raise ConfigError("top, ngram and hash_buckets must be at least 1")
        if not self.exact_bonus >= 0:
            raise ConfigError(f"exact_bonus must be >= 0, got {self.exact_bonus}")


@dataclass
class LinkedQuestions:
    """Z_0 of a batch: ``Z_0[rows[i], ids[i]] = weights[i]``, sorted by (row, id); `scores` the raw scores
    (cosine, plus the bonus of an exact match); `exact` whether the name was found verbatim."""

    rows: np.ndarray
    ids: np.ndarray
    weights: np.ndarray
    scores: np.ndarray
    exact: np.ndarray
    batch_size: int

    def named(self) -> np.ndarray:
        """(batch, k) ids of the entities each question names verbatim, -1 padded (k >= 1)."""
        rows, ids = self.rows[self.exact], self.ids[self.exact]
        counts = np.bincount(rows, minlength=self.batch_size)
        out = np.full((self.batch_size, max(int(counts.max(initial=0)), 1)), -1, dtype=np.int64)
        order = np.lexsort((ids, rows))
        rows, ids = rows[order], ids[order]
        out[rows, np.arange(len(rows)) - np.searchsorted(rows, rows)] = ids
        return out

    def row(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Entity ids and weights of question `b`, best first (ties: lower id first)."""
        sel = np.flatnonzero(self.rows == b)
        order = np.lexsort((self.ids[sel], -self.scores[sel]))
        return self.ids[sel][order], self.weights[sel][order]


class QuestionLinker:
    """Z_0 of plain questions by bigram TF-IDF match against entity names, plus exact name matches."""

    def __init__(self, names: Sequence[str], linker: EntityLinker | None = None,
                 config: QuestionLinkConfig = QuestionLinkConfig()):
        self.config = config
        self.n_entities = len(names)
        self.hasher = NgramHasher(config.hash_buckets, config.ngram)
        counts = self.hasher.count_matrix(names)  # (E, buckets)
        self.idf = idf_weights(document_frequency(counts), max(len(names), 1))
        # bucket -> names postings, so a question touches only the names that share one of its n-grams
        self.postings = sp.csr_matrix(tfidf(counts, self.idf, normalize=True).T)  # (buckets, E)
        self.linker = linker

    @classmethod
    def from_index(cls, index, config: QuestionLinkConfig = QuestionLinkConfig(), min_name_length: int | None = None):
        """Over the entities of a `SparseIndex`, with exact matches as the index's linker finds them."""
        min_length = min_name_length or index.manifest["config"]["link"].get("min_name_length", 3)
        return cls(index.entities.names, EntityLinker.of_table(index.entities, min_length), config)

    def scores(self, questions: Sequence[str]) -> sp.csr_matrix:
        """(B, E) cosine of each question's TF-IDF vector with each name's (zeros not stored)."""
        q = tfidf(self.hasher.count_matrix(questions), self.idf)  # (B, buckets)
        # rows L2-normalised here, not by tfidf(normalize=True), whose diagonal product costs O(buckets) a call
        row = np.repeat(np.arange(q.shape[0]), np.diff(q.indptr))
        norms = np.sqrt(np.bincount(row, weights=q.data.astype(np.float64) ** 2, minlength=q.shape[0]))
        q.data = (q.data / norms[row]).astype(np.float32)
        return sp.csr_matrix(q @ self.postings)

    def link(self, questions: Sequence[str], top: int | None = None) -> LinkedQuestions:
        """Z_0 of each question: its `top` (default `config.top`) best entities and every exact match."""
        top = top or self.config.top
        cos = self.scores(questions)
        rows, ids, scores, exact = [], [], [], []
        for b, q in enumerate(questions):
            cand = cos.indices[cos.indptr[b]:cos.indptr[b + 1]].astype(np.int64)
            s = cos.data[cos.indptr[b]:cos.indptr[b + 1]].astype(np.float64)
            found = np.array(sorted({e for _, _, e in self.linker.find(q)}), dtype=np.int64) \
                if self.linker is not None else np.zeros(0, np.int64)
            missing = np.setdiff1d(found, cand)  # an exact name whose n-grams are all stopwords has cosine 0
            cand, s = np.concatenate([cand, missing]), np.concatenate([s, np.zeros(len(missing))])
            is_exact = np.isin(cand, found)
            s = s + self.config.exact_bonus * is_exact
            order = np.lexsort((cand, -s))
            keep = order[:max(top, 0)]
            keep = np.union1d(keep, np.flatnonzero(is_exact))  # exact matches are always in
            rows.append(np.full(len(keep), b, np.int64))
            ids.append(cand[keep])
            scores.append(s[keep])
            exact.append(is_exact[keep])
        rows, ids = np.concatenate(rows or [np.zeros(0, np.int64)]), np.concatenate(ids or [np.zeros(0, np.int64)])
        scores = np.concatenate(scores or [np.zeros(0)])
        exact = np.concatenate(exact or [np.zeros(0, bool)])
        order = np.lexsort((ids, rows))
        rows, ids, scores, exact = rows[order], ids[order], scores[order], exact[order]
        totals = np.bincount(rows, weights=scores, minlength=len(questions))
        weights = scores / np.where(totals[rows] > 0, totals[rows], 1.0)
        return LinkedQuestions(rows, ids, weights, scores, exact, len(questions))


def hop_matrix(index, adjacency: str = "tfidf") -> sp.csr_matrix:
    """(E, E) 0/1: x is one hop from e. tfidf: x is mentioned in one of e's top-mu TF-IDF passages (the
    support of A); links: the link graph L of the index (e on x's page or x on e's); both: either; page: x is
    mentioned on e's own page where e has one, else as tfidf."""
    if adjacency not in ADJACENCIES:
        raise ConfigError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
    E, P = index.n_entities, index.n_passages
    out = sp.csr_matrix((E, E), dtype=np.float32)
    if adjacency in ("tfidf", "both", "page"):
        indptr = np.asarray(index.entity_passage_indptr, dtype=np.int64)
        ep = sp.csr_matrix((np.ones(indptr[-1], np.float32), np.asarray(index.entity_passage), indptr), shape=(E, P))
        if adjacency == "page":  # the rows of the entities with a page: their page's passages
            titles = np.asarray(index.passage_entity, dtype=np.int64)
            on = np.flatnonzero(titles >= 0)
            page = sp.csr_matrix((np.ones(len(on), np.float32), (titles[on], on)), shape=(E, P))
            bare = sp.diags((np.diff(page.indptr) == 0).astype(np.float32))
            ep = page + bare @ ep
        out = out + ep @ sp.csr_matrix(index.mention_incidence.T, dtype=np.float32)
    if adjacency in ("links", "both"):
        indptr = getattr(index, "entity_link_indptr", None)
        if indptr is None:
            raise ConfigError(f"the index {index.path} has no link graph; build it again with this drkit")
        indptr = np.asarray(indptr, dtype=np.int64)
        out = out + sp.csr_matrix((np.ones(indptr[-1], np.float32), np.asarray(index.entity_link), indptr), shape=(E, E))
    out = sp.csr_matrix(out)
    out.data[:] = 1.0
    return out


def linking_recall(linked: LinkedQuestions, gold: Sequence[Sequence[int]], hops: sp.csr_matrix,
                   types: Sequence[str] | None = None, max_hops: int = 2) -> dict:
    """For the questions with at least one gold entity: the share whose gold entities are all in Z_0's
    support (``all@0``), all within 1 hop (``all@1``), ..., and the share of gold entities there
    (``entities@h``), and the mean number of entities within h hops (``reached@h``); overall and per type. `hops` is `hop_matrix`; a question without gold is counted
    in ``no_gold`` and left out of the shares."""
    B, E = linked.batch_size, hops.shape[0]
    reach = sp.csr_matrix((np.ones(len(linked.ids), np.float32), (linked.rows, linked.ids)), shape=(B, E))
    levels = [reach]
    for _ in range(max_hops):
        nxt = sp.csr_matrix(levels[-1] + levels[-1] @ hops)
        nxt.data[:] = 1.0
        levels.append(nxt)
    per_question = []  # (type, n gold, [gold reached at each level])
    for b in range(B):
        g = np.unique(np.asarray(gold[b], dtype=np.int64))
        g = g[g >= 0]
        reached = [int(np.isin(g, lv.indices[lv.indptr[b]:lv.indptr[b + 1]]).sum()) for lv in levels]
        sizes = [int(lv.indptr[b + 1] - lv.indptr[b]) for lv in levels]
        per_question.append((types[b] if types is not None else "all", len(g), reached, sizes))

    def shares(items):
        scored = [(n, r, z) for _, n, r, z in items if n > 0]
        out = {"questions": len(scored), "no_gold": sum(1 for _, n, _, _ in items if n == 0)}
        for h in range(max_hops + 1):
            out[f"all@{h}"] = round(sum(r[h] == n for n, r, _ in scored) / len(scored), 4) if scored else None
            total = sum(n for n, _, _ in scored)
            out[f"entities@{h}"] = round(sum(r[h] for _, r, _ in scored) / total, 4) if total else None
            # how many entities that is: reaching everything would be no achievement
            out[f"reached@{h}"] = round(sum(z[h] for _, _, z in scored) / len(scored), 1) if scored else None
        return out

    result = {"overall": shares(per_question)}
    if types is not None:
        result["by_type"] = {t: shares([x for x in per_question if x[0] == t]) for t in sorted(set(types))}
    return result
