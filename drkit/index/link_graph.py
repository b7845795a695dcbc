"""The paper's link-graph A for title-entity corpora (section 3.3, HotpotQA).

"We set A_{E->M}[e, m] = 1 if either the entity e is mentioned on the page of the entity denoted by m,
or vice versa." The page of entity x is the passages of the articles whose title is x. So A_link is an
entity graph L lifted to mentions, ``A_link[e, m] = L[e, entity(m)]``, with

    L[e, x] = 1  iff  e has a mention in a passage of x's page, or x has one in a passage of e's page

symmetric and without its diagonal (an entity is not its own neighbour; the follow's self-loop option
decides whether an entity reaches its own mentions). Entities without a page (dates, places named only
in text) have links only through the pages that mention them.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def link_graph(mention_entity: np.ndarray, mention_passage: np.ndarray, passage_entity: np.ndarray,
               n_entities: int) -> tuple[np.ndarray, np.ndarray]:
    """L as CSR arrays ``(indptr (E+1,), indices)``, indices sorted within each row.

    `passage_entity[p]` is the title entity of passage p (-1: its title is not an entity)."""
    mention_entity = np.asarray(mention_entity, dtype=np.int64)
    page = np.asarray(passage_entity, dtype=np.int64)[np.asarray(mention_passage, dtype=np.int64)]  # (M,)
    keep = (page >= 0) & (page != mention_entity)
    src, dst = mention_entity[keep], page[keep]  # src is mentioned on dst's page
    E = int(n_entities)
    m = sp.coo_matrix((np.ones(2 * len(src), np.int8), (np.concatenate([src, dst]), np.concatenate([dst, src]))),
                      shape=(E, E)).tocsr()
    m.sum_duplicates()
    m.sort_indices()
    return m.indptr.astype(np.int64), m.indices.astype(np.int64)


def title_entities(titles: list[str], lookup) -> np.ndarray:
    """(A,) the entity each article title names (`lookup(title)`: an entity id or None), -1 for none."""
    return np.array([-1 if (e := lookup(t)) is None else int(e) for t in titles], dtype=np.int64)


def pages(article_entity: np.ndarray, n_entities: int) -> tuple[np.ndarray, np.ndarray]:
    """Each entity's page as CSR ``(indptr (E+1,), article ids)``, articles in corpus order."""
    article_entity = np.asarray(article_entity, dtype=np.int64)
    articles = np.flatnonzero(article_entity >= 0)
    owners = article_entity[articles]
    order = np.argsort(owners, kind="stable")
    indptr = np.zeros(int(n_entities) + 1, dtype=np.int64)
    np.cumsum(np.bincount(owners, minlength=int(n_entities)), out=indptr[1:])
    return indptr, articles[order].astype(np.int64)
