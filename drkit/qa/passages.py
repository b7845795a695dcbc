"""From a ranking of entities to a ranking of passages, in a title-entity corpus (the paper, 3.3).

Each passage of such a corpus is about its title entity, "and hence retrieving passages is the same as
identifying the title entities of those passages". So the passages of an entity's page share the entity's
score. A page of one passage (2WikiMultiHopQA, HotpotQA) takes the whole of it; the passages of a page of
several (a long article, MuSiQue's paragraphs under one title) divide it by what the question finds in
each (`page_shares`)::

    score(a) = Z*[x] * share_x(a),    share_x(a) = softmax over the passages a' of x's page of r(a')

where r(a) is the passage's relevance to the question (the retriever's: the best hop query's best mention
there), so the passages of a page are ordered by the question, never by file order, and a page's
irrelevant passages fall below other entities' relevant ones. An entity without a page (a date, a place
named only in the text) takes no place. The ranking stops there: a passage no entity reached is not
listed, unless a `fallback` ranking is given (e.g. the question linker's, beyond Z_0): its passages
follow, below every reached one and marked ``reached=False``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RankedPassage:
    article: int  # article id in the index (one corpus line: a "passage" to a caller)
    key: str  # the corpus id
    title: str
    score: float  # reached: the title entity's score times the passage's share of its page (>= 0);
    # a fallback passage: minus its rank among the fallback passages (-1, -2, ...)
    entity: int  # the title entity whose score placed it
    reached: bool  # placed by the entity ranking (False: by the fallback ranking)


def softmax_shares(relevance: np.ndarray) -> np.ndarray:
    """``softmax(relevance)`` with -inf (no relevance known) read as the lowest finite value given (all
    equal where none is finite)."""
    r = np.asarray(relevance, dtype=np.float64)
    finite = np.isfinite(r)
    if not finite.any():
        return np.full(len(r), 1.0 / len(r))
    r = np.where(finite, r, r[finite].min())
    e = np.exp(r - r.max())
    return e / e.sum()


class PageRanker:
    """Passages of title entities, from the index's `entity_pages` (indptr, article ids)."""

    def __init__(self, page_indptr: np.ndarray, page_articles: np.ndarray, article_keys: list[str],
                 article_titles: list[str]):
        self.indptr = np.asarray(page_indptr, dtype=np.int64)
        self.articles = np.asarray(page_articles, dtype=np.int64)
        self.keys, self.titles = article_keys, article_titles

    @classmethod
    def from_index(cls, index) -> "PageRanker":
        indptr, articles = index.entity_pages
        return cls(indptr, articles, index.article_keys, index.article_titles)

    def has_page(self, entities: np.ndarray) -> np.ndarray:
        entities = np.asarray(entities, dtype=np.int64)
        return self.indptr[entities + 1] > self.indptr[entities]

    def page(self, entity: int) -> np.ndarray:
        return self.articles[self.indptr[entity]:self.indptr[entity + 1]]

    def page_sizes(self, entities: np.ndarray) -> np.ndarray:
        entities = np.asarray(entities, dtype=np.int64)
        return self.indptr[entities + 1] - self.indptr[entities]

    def rank(self, entities: np.ndarray, scores: np.ndarray, k: int, fallback: np.ndarray | None = None,
             relevance: dict[int, float] | None = None) -> list[RankedPassage]:
        """At most `k` passages for one question: those of the pages of `entities` (with their `scores`),
        each ``score * share`` (module docstring; `relevance`: article -> r(a), -inf or missing where
        unknown; None: every share of a page equal), best first, ties in the entities' order and then the
        page's; then those of `fallback`'s pages (best first, ``reached=False``) not listed yet. Each
        article once, at its best."""
        relevance = relevance or {}
        best: dict[int, tuple[float, int, int, int]] = {}  # article -> (score, entity rank, page position, entity)
        for rank, (e, s) in enumerate(zip(np.asarray(entities, dtype=np.int64), np.asarray(scores, dtype=np.float64))):
            if e < 0:
                continue
            page = self.page(int(e))
            if len(page) == 0:
                continue
            shares = softmax_shares(np.array([relevance.get(int(a), -np.inf) for a in page])) if len(page) > 1 \
                else np.ones(1)
            for pos, (a, share) in enumerate(zip(page.tolist(), shares)):
                cand = (float(s) * float(share), rank, pos, int(e))
                if a not in best or (-cand[0], cand[1], cand[2]) < (-best[a][0], best[a][1], best[a][2]):
                    best[a] = cand
        order = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[1][2]))[:k]
        out = [RankedPassage(a, self.keys[a], self.titles[a], sc, e, True) for a, (sc, _, _, e) in order]
        if fallback is not None and len(out) < k:
            seen = set(best)
            entered = set(int(e) for e in np.asarray(entities, dtype=np.int64))
            for e in np.asarray(fallback, dtype=np.int64):
                if e < 0 or int(e) in entered:
                    continue
                page = self.page(int(e)).tolist()  # the page's passages by relevance where known (stable)
                for a in sorted(page, key=lambda a: -relevance.get(a, -np.inf)):
                    if a in seen:
                        continue
                    seen.add(a)
                    out.append(RankedPassage(a, self.keys[a], self.titles[a], -float(len(out) - len(order) + 1),
                                             int(e), False))
                    if len(out) >= k:
                        return out
        return out
