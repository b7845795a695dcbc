"""From a ranking of entities to a ranking of passages, in a title-entity corpus (the paper, 3.3).

Each passage of such a corpus is about its title entity, "and hence retrieving passages is the same as
identifying the title entities of those passages". So the passages of an entity's page share the entity's
score. A page of one passage (2WikiMultiHopQA, HotpotQA) takes the whole of it; the passages of a page of
several (a long article, MuSiQue's paragraphs under one title) divide it by what the question finds in
each (`page_shares`)::

    score(a) = Z*[x] * share_x(a),    share_x(a) = softmax over the passages a' of x's page of r(a')

where r(a) is the passage's relevance to the question (`passage_relevance`: the best hop query's best
mention there), so the passages of a page are ordered by the question, never by file order, and a page's
irrelevant passages fall below other entities' relevant ones. An entity without a page (a date, a place
named only in the text) takes no place. The ranking stops there: a passage no entity reached is not
listed, unless a `fallback` ranking is given (e.g. the question linker's, beyond Z_0): its passages
follow, below every reached one and marked ``reached=False``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from drkit.index.csr import concat_ranges

ENTITIES = 200  # entities of Z* whose pages are ranked, best first


@dataclass(frozen=True)
class RankedPassage:
    article: int  # article id in the index (one corpus line: a "passage" to a caller)
    key: str  # the corpus id
    title: str
    score: float  # reached: the title entity's score times the passage's share of its page (>= 0);
    # unreached (placed by the fallback ranking): minus its rank among those (-1, -2, ...)
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
        entities = np.asarray(entities, dtype=np.int64)
        scores = np.asarray(scores, dtype=np.float64)
        rank = np.flatnonzero(entities >= 0)  # each entity's place in the given order
        ents = entities[rank]
        sizes = self.indptr[ents + 1] - self.indptr[ents]
        arts = self.articles[concat_ranges(self.indptr[ents], sizes)]  # every page's passages, entity by entity
        owner = np.repeat(np.arange(len(ents)), sizes)  # (n,) which of `ents` each passage's page is
        first = np.cumsum(sizes) - sizes
        position = np.arange(len(arts)) - first[owner]  # the passage's place in its page
        share = np.ones(len(arts))
        for i in np.flatnonzero(sizes > 1):  # a page of several passages: divided by the question
            lo, hi = first[i], first[i] + sizes[i]
            share[lo:hi] = softmax_shares(np.array([relevance.get(int(a), -np.inf) for a in arts[lo:hi].tolist()]))
        value = scores[rank][owner] * share
        order = np.lexsort((position, rank[owner], -value))  # best first; ties: the entities' order, then the page's
        _, once = np.unique(arts[order], return_index=True)  # each article at its best (first) place
        chosen = order[np.sort(once)[:k]]
        out = [RankedPassage(a, self.keys[a], self.titles[a], v, e, True) for a, v, e in
               zip(arts[chosen].tolist(), value[chosen].tolist(), ents[owner[chosen]].tolist())]
        reached = len(out)
        if fallback is not None and reached < k:
            seen = set(arts.tolist())  # every reached page's passages, listed or cut by k
            entered = set(entities.tolist())
            for e in np.asarray(fallback, dtype=np.int64):
                if e < 0 or int(e) in entered:
                    continue
                page = self.page(int(e)).tolist()  # the page's passages by relevance where known (stable)
                for a in sorted(page, key=lambda a: -relevance.get(a, -np.inf)):
                    if a in seen:
                        continue
                    seen.add(a)
                    out.append(RankedPassage(a, self.keys[a], self.titles[a], -float(len(out) - reached + 1),
                                             int(e), False))
                    if len(out) >= k:
                        return out
        return out


def passage_relevance(out, vkb, pages: PageRanker, temperature: float,
                      candidates: list[np.ndarray]) -> list[dict[int, float]]:
    """Per row of a hop-mixing model's output `out` (`drkit.reason.mixing.MixOutput`), r(a) (module
    docstring) of each passage of the pages of several passages of its `candidates` entities::

        r(a) = max over hops t and the mentions m in a of  log pi_t + f(m) . g_t / lambda
    """
    graph = vkb.graph
    rows_l, arts_l = [], []
    for b, ents in enumerate(candidates):
        ents = np.asarray(ents, dtype=np.int64)
        multi = ents[(ents >= 0)]
        multi = multi[pages.page_sizes(multi) > 1]
        if len(multi):
            arts = np.unique(np.concatenate([pages.page(int(e)) for e in multi]))
            rows_l.append(np.full(len(arts), b, dtype=np.int64))
            arts_l.append(arts)
    result: list[dict[int, float]] = [{} for _ in candidates]
    if not rows_l:
        return result
    rows, arts = np.concatenate(rows_l), np.concatenate(arts_l)
    a_indptr, a_passages = vkb.index.article_passages
    p_len = a_indptr[arts + 1] - a_indptr[arts]
    passages = a_passages[concat_ranges(a_indptr[arts], p_len)]
    pair_of_passage = np.repeat(np.arange(len(arts)), p_len)
    m_indptr = graph.passage_mention_indptr
    m_len = m_indptr[passages + 1] - m_indptr[passages]
    mentions = concat_ranges(m_indptr[passages], m_len)
    pair = np.repeat(pair_of_passage, m_len)  # (n,) the (row, article) pair of each mention
    best = np.full(len(arts), -np.inf)
    log_pi = np.log(np.clip(out.pi.detach().double().numpy(), 1e-30, None))
    for t, q in enumerate(out.queries):
        if len(mentions):
            s = graph.pair_scores(q.detach().float(), rows[pair], mentions) / temperature + log_pi[rows[pair], t]
            np.maximum.at(best, pair, s)
    for r, a, v in zip(rows.tolist(), arts.tolist(), best.tolist()):
        result[r][a] = v
    return result


def rank_passages(out, vkb, pages: PageRanker, top: int, temperature: float, entities: int = ENTITIES,
                  fallback: list[np.ndarray | None] | None = None) -> list[list[RankedPassage]]:
    """Per row of a hop-mixing model's output `out`: the best `entities` entities of Z*, their pages ranked
    (`PageRanker.rank`, each page of several passages divided by `passage_relevance`), then the row's
    `fallback` entities' pages (None: none), at most `top` passages."""
    ids, probs = out.z_star.top(entities)
    fallback = fallback if fallback is not None else [None] * len(ids)
    relevance = passage_relevance(out, vkb, pages, temperature,
                                  [ids[b] if fallback[b] is None else np.concatenate([ids[b], fallback[b]])
                                   for b in range(len(ids))])
    result = []
    for b in range(len(ids)):
        keep = ids[b] >= 0
        result.append(pages.rank(ids[b][keep], probs[b][keep], top, fallback=fallback[b], relevance=relevance[b]))
    return result
