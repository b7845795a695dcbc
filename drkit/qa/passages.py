"""From a ranking of entities to a ranking of passages, in a title-entity corpus (the paper, 3.3).

Each passage of such a corpus is about its title entity, "and hence retrieving passages is the same as
identifying the title entities of those passages". So passages are ranked by the score of their title
entity: an entity's page (its articles, in corpus order) takes the entity's place in the ranking, and an
entity without a page (a date, a place named only in the text) takes none. When the entities run out
before `k` passages, the ranking goes on with the `fallback` entities (e.g. the question linker's
ranking beyond Z_0), each below every entity of the first ranking, so that a caller always gets `k`
passages when the corpus has them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class RankedPassage:
    article: int  # article id in the index
    key: str  # the corpus id
    title: str
    score: float  # the title entity's score (>= 0); a fallback entity's: minus its rank among the
    # fallback entities that have a page and are not in the first ranking
    entity: int
    fallback: bool


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

    def rank(self, entities: np.ndarray, scores: np.ndarray, k: int,
             fallback: np.ndarray | None = None) -> list[RankedPassage]:
        """At most `k` passages for one question: the pages of `entities` (best first, as given with their
        `scores`), then those of `fallback` (best first) not seen yet; each article once."""
        out: list[RankedPassage] = []
        seen: set[int] = set()

        def add(entity: int, score: float, is_fallback: bool) -> bool:
            for a in self.articles[self.indptr[entity]:self.indptr[entity + 1]]:
                a = int(a)
                if a in seen:
                    continue
                seen.add(a)
                out.append(RankedPassage(a, self.keys[a], self.titles[a], score, int(entity), is_fallback))
                if len(out) >= k:
                    return True
            return False

        for e, s in zip(np.asarray(entities, dtype=np.int64), np.asarray(scores, dtype=np.float64)):
            if e >= 0 and add(int(e), float(s), False):
                return out
        if fallback is not None:
            entered = set(int(e) for e in entities)
            step = 0
            for e in np.asarray(fallback, dtype=np.int64):
                if e < 0 or int(e) in entered or self.indptr[e + 1] == self.indptr[e]:
                    continue
                step += 1
                if add(int(e), float(-step), True):  # -1, -2, ...: below every entity score (>= 0)
                    return out
        return out
