import math

import numpy as np

from drkit.reason.passages import PageRanker, softmax_shares

# entities 0..4; pages: 0 -> [0], 1 -> [1, 2] (a page of two articles), 2 -> none (a date), 3 -> [3], 4 -> [4]
INDPTR = np.array([0, 1, 3, 3, 4, 5])
ARTICLES = np.array([0, 1, 2, 3, 4])
KEYS = ["c0", "c1", "c2", "c3", "c4"]
TITLES = ["Zero", "One", "One", "Three", "Four"]


def _ranker():
    return PageRanker(INDPTR, ARTICLES, KEYS, TITLES)


def test_pages_take_their_entity_place_and_entities_without_a_page_none():
    got = _ranker().rank(np.array([0, 2, 3]), np.array([0.5, 0.3, 0.2]), k=10)
    assert [(p.key, p.title, p.score, p.entity, p.reached) for p in got] == [
        ("c0", "Zero", 0.5, 0, True), ("c3", "Three", 0.2, 3, True)]


def test_a_page_of_several_passages_is_divided_by_the_question_not_by_file_order():
    # nothing known of the passages: the page's score is shared equally (ties in page order)
    got = _ranker().rank(np.array([1, 3]), np.array([0.5, 0.2]), k=10)
    assert [(p.key, p.score) for p in got] == [("c1", 0.25), ("c2", 0.25), ("c3", 0.2)]
    # the second passage is the relevant one: it comes first, with most of the page's score, and the first
    # one falls below another entity's page
    got = _ranker().rank(np.array([1, 3]), np.array([0.5, 0.2]), k=10, relevance={1: 0.0, 2: 3.0})
    share = 1 / (1 + math.exp(-3.0))
    assert [p.key for p in got] == ["c2", "c3", "c1"]
    assert math.isclose(got[0].score, 0.5 * share) and math.isclose(got[2].score, 0.5 * (1 - share))
    # a passage of unknown relevance is read as the page's lowest known one
    assert np.allclose(softmax_shares(np.array([-np.inf, 1.0, 1.0])), [1 / 3] * 3)


def test_fallback_fills_up_to_k_below_every_reached_passage_marked_unreached():
    got = _ranker().rank(np.array([3]), np.array([0.9]), k=4, fallback=np.array([3, 2, 4, 0, 1]))
    assert [(p.key, p.score, p.reached) for p in got] == [
        ("c3", 0.9, True), ("c4", -1.0, False), ("c0", -2.0, False), ("c1", -3.0, False)]
    # the fallback's pages are ordered by relevance too
    got = _ranker().rank(np.array([3]), np.array([0.9]), k=3, fallback=np.array([1]), relevance={2: 1.0})
    assert [p.key for p in got] == ["c3", "c2", "c1"]
    assert _ranker().has_page(np.array([0, 1, 2, 3, 4])).tolist() == [True, True, False, True, True]


def test_k_cuts_and_fewer_when_the_corpus_runs_out():
    got = _ranker().rank(np.array([1]), np.array([1.0]), k=1, relevance={1: 0.0, 2: 5.0})
    assert [p.key for p in got] == ["c2"]
    got = _ranker().rank(np.array([0, 1, 3, 4]), np.array([0.4, 0.3, 0.2, 0.1]), k=20, fallback=np.arange(5))
    assert sorted(p.key for p in got) == ["c0", "c1", "c2", "c3", "c4"] and all(p.reached for p in got)


def test_rank_agrees_with_a_brute_force_reference_on_random_pages():
    rng = np.random.default_rng(0)
    for trial in range(50):
        n_entities, n_articles = 12, 30
        owner = rng.integers(0, n_entities, n_articles)  # each article's title entity
        order = np.argsort(owner, kind="stable")
        indptr = np.searchsorted(owner[order], np.arange(n_entities + 1))
        ranker = PageRanker(indptr, order, [f"k{a}" for a in range(n_articles)], [f"t{o}" for o in owner])
        entities = rng.permutation(n_entities)[:rng.integers(1, n_entities)]
        scores = np.sort(rng.random(len(entities)))[::-1]
        relevance = {int(a): float(rng.normal()) for a in rng.choice(n_articles, 15, replace=False)}
        k = int(rng.integers(1, 25))
        got = ranker.rank(entities, scores, k, relevance=relevance)
        want = {}
        for e, s in zip(entities, scores):
            page = [a for a in range(n_articles) if owner[a] == e]
            known = [relevance[a] for a in page if a in relevance]
            r = [relevance.get(a, min(known) if known else 0.0) for a in page]
            z = sum(math.exp(x) for x in r)
            for a, x in zip(page, r):
                want[a] = s * math.exp(x) / z
        best = sorted(want.values(), reverse=True)[:k]
        assert len(got) == min(k, len(want)), trial
        assert np.allclose([p.score for p in got], best), trial
        assert all(math.isclose(p.score, want[p.article]) for p in got), trial


def _rank_reference(ranker, entities, scores, k, fallback=None, relevance=None):
    """The ranking as first written: a dict of each article's best candidate, then a sort (slow, plain)."""
    relevance = relevance or {}
    best = {}  # article -> (score, entity rank, page position, entity)
    for rank, (e, s) in enumerate(zip(np.asarray(entities, dtype=np.int64), np.asarray(scores, dtype=np.float64))):
        if e < 0 or len(ranker.page(int(e))) == 0:
            continue
        page = ranker.page(int(e))
        shares = softmax_shares(np.array([relevance.get(int(a), -np.inf) for a in page])) if len(page) > 1 \
            else np.ones(1)
        for pos, (a, share) in enumerate(zip(page.tolist(), shares)):
            cand = (float(s) * float(share), rank, pos, int(e))
            if a not in best or (-cand[0], cand[1], cand[2]) < (-best[a][0], best[a][1], best[a][2]):
                best[a] = cand
    order = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[1][2]))[:k]
    out = [(a, sc, e, True) for a, (sc, _, _, e) in order]
    if fallback is not None and len(out) < k:
        seen, entered = set(best), set(int(e) for e in entities)
        for e in fallback:
            if e < 0 or int(e) in entered:
                continue
            for a in sorted(ranker.page(int(e)).tolist(), key=lambda a: -relevance.get(a, -np.inf)):
                if a not in seen:
                    seen.add(a)
                    out.append((a, -float(len(out) - len(order) + 1), int(e), False))
                    if len(out) >= k:
                        return out
    return out


def test_rank_is_the_plain_ranking_exactly_with_ties_repeats_and_fallback():
    """Against the plain dict-and-sort ranking, value for value: tied scores, an entity given twice, ids of -1,
    pages of one and of several passages, empty pages and a fallback."""
    rng = np.random.default_rng(1)
    for trial in range(200):
        n_entities, n_articles = 15, 30
        owner = rng.integers(0, n_entities - 3, n_articles)  # the last three entities have no page
        order = np.argsort(owner, kind="stable")
        indptr = np.searchsorted(owner[order], np.arange(n_entities + 1))
        ranker = PageRanker(indptr, order, [f"k{a}" for a in range(n_articles)], [f"t{o}" for o in owner])
        entities = rng.integers(-1, n_entities, rng.integers(0, 12))
        scores = np.round(rng.random(len(entities)), 1)  # ties
        relevance = {int(a): float(rng.integers(-2, 3)) for a in rng.choice(n_articles, 10, replace=False)}
        fallback = rng.integers(-1, n_entities, 6) if trial % 2 else None
        k = int(rng.integers(1, 25))
        got = [(p.article, p.score, p.entity, p.reached) for p in ranker.rank(entities, scores, k, fallback, relevance)]
        assert got == _rank_reference(ranker, entities, scores, k, fallback, relevance), trial
