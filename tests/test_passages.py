import numpy as np

from drkit.qa.passages import PageRanker

# entities 0..4; pages: 0 -> [0], 1 -> [1, 2] (a page of two articles), 2 -> none (a date), 3 -> [3], 4 -> [4]
INDPTR = np.array([0, 1, 3, 3, 4, 5])
ARTICLES = np.array([0, 1, 2, 3, 4])
KEYS = ["c0", "c1", "c2", "c3", "c4"]
TITLES = ["Zero", "One", "One", "Three", "Four"]


def _ranker():
    return PageRanker(INDPTR, ARTICLES, KEYS, TITLES)


def test_pages_take_their_entity_place_and_entities_without_a_page_none():
    got = _ranker().rank(np.array([1, 2, 3]), np.array([0.5, 0.3, 0.2]), k=10)
    assert [(p.key, p.title, p.score, p.entity, p.fallback) for p in got] == [
        ("c1", "One", 0.5, 1, False), ("c2", "One", 0.5, 1, False), ("c3", "Three", 0.2, 3, False)]


def test_fallback_fills_up_to_k_below_every_score_without_repeats():
    got = _ranker().rank(np.array([3]), np.array([0.9]), k=4, fallback=np.array([3, 2, 4, 0, 1]))
    assert [(p.key, p.score, p.fallback) for p in got] == [
        ("c3", 0.9, False), ("c4", -1.0, True), ("c0", -2.0, True), ("c1", -3.0, True)]
    assert _ranker().has_page(np.array([0, 1, 2, 3, 4])).tolist() == [True, True, False, True, True]


def test_k_cuts_inside_a_page_and_fewer_when_the_corpus_runs_out():
    got = _ranker().rank(np.array([1]), np.array([1.0]), k=1)
    assert [p.key for p in got] == ["c1"]
    got = _ranker().rank(np.array([0, 1, 3, 4]), np.array([0.4, 0.3, 0.2, 0.1]), k=20, fallback=np.arange(5))
    assert [p.key for p in got] == ["c0", "c1", "c2", "c3", "c4"]
