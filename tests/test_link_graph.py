"""The paper's link-graph A (title-entity corpora) against loops, and the index's title-entity arrays."""

import json

import numpy as np
import pytest

from drkit.index.link_graph import link_graph, pages


def _reference(mention_entity, mention_passage, passage_entity, E):
    """Dense L by the definition: e on x's page (some mention of e in a passage whose title entity is x) or x on e's."""
    on_page = np.zeros((E, E), dtype=bool)  # on_page[e, x]: e is mentioned on x's page
    for m in range(len(mention_entity)):
        x = passage_entity[mention_passage[m]]
        if x >= 0:
            on_page[mention_entity[m], x] = True
    L = on_page | on_page.T
    np.fill_diagonal(L, False)
    return L


@pytest.mark.parametrize("seed", range(8))
def test_link_graph_equals_the_definition(seed):
    rng = np.random.default_rng(seed)
    E, P, M = 12, 9, 40
    passage_entity = rng.integers(-1, E, P)  # some passages without a title entity; pages of several passages
    passage_entity[0] = passage_entity[1]
    mention_passage = np.sort(rng.integers(0, P, M))
    mention_entity = rng.integers(0, E, M)
    mention_entity[0] = passage_entity[mention_passage[0]] if passage_entity[mention_passage[0]] >= 0 else 0
    indptr, indices = link_graph(mention_entity, mention_passage, passage_entity, E)
    got = np.zeros((E, E), dtype=bool)
    for e in range(E):
        row = indices[indptr[e]:indptr[e + 1]]
        assert (np.diff(row) > 0).all()
        got[e, row] = True
    np.testing.assert_array_equal(got, _reference(mention_entity, mention_passage, passage_entity, E))
    # A_link = L B^T: A[e, m] = L[e, entity(m)], by a loop over (e, m)
    A = np.array([[got[e, mention_entity[m]] for m in range(M)] for e in range(E)])
    B = np.zeros((M, E), dtype=int)
    B[np.arange(M), mention_entity] = 1
    np.testing.assert_array_equal(A, (got.astype(int) @ B.T) > 0)


def test_pages_keep_corpus_order():
    indptr, articles = pages(np.array([2, -1, 0, 2, 2]), 4)
    assert indptr.tolist() == [0, 1, 1, 4, 4] and articles.tolist() == [2, 0, 3, 4]


def test_title_entity_arrays_of_a_built_index(tmp_path):
    from drkit.index.build import build_index

    rows = [{"id": "p1", "title": "Blood Street", "text": "Blood Street is a film directed by Leo Fong."},
            {"id": "p2", "title": "Leo Fong", "text": "Leo Fong was born in Canton."},
            {"id": "p3", "title": "Blood Street", "text": "Blood Street was released in 1988."},
            {"id": "p4", "title": "Nowhere", "text": "A place far from Canton."}]
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    (tmp_path / "e.txt").write_text("Blood Street\nLeo Fong\nCanton\n1988\n", encoding="utf-8")
    index = build_index(corpus, tmp_path / "index", entities=tmp_path / "e.txt", log=lambda *a: None)
    ids = {n: index.entities.lookup(n) for n in ["Blood Street", "Leo Fong", "Canton", "1988"]}
    assert index.article_keys == ["p1", "p2", "p3", "p4"]
    assert index.article_entity.tolist() == [ids["Blood Street"], ids["Leo Fong"], ids["Blood Street"], -1]
    indptr, articles = index.entity_pages
    page = lambda n: articles[indptr[ids[n]]:indptr[ids[n] + 1]].tolist()  # noqa: E731
    assert page("Blood Street") == [0, 2] and page("Leo Fong") == [1] and page("Canton") == []
    L = {(int(e), int(x)) for e in range(index.n_entities)
         for x in index.entity_link[index.entity_link_indptr[e]:index.entity_link_indptr[e + 1]]}
    b, f, c, y = ids["Blood Street"], ids["Leo Fong"], ids["Canton"], ids["1988"]
    # Leo Fong on Blood Street's page; Canton on Leo Fong's; 1988 on Blood Street's (second passage);
    # Canton on "Nowhere", which is no entity's page: no link
    assert L == {(b, f), (f, b), (f, c), (c, f), (b, y), (y, b)}
    em, ms = index.entity_mention_indptr, index.entity_mentions
    for e in range(index.n_entities):
        assert (index.mention_entity[ms[em[e]:em[e + 1]]] == e).all()
    assert sorted(ms.tolist()) == list(range(index.n_mentions))
