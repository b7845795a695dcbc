"""Question linking (Z_0 of plain questions) against a slow reference, and its recall against a BFS."""

import math
import re
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from drkit.data.text import fold
from drkit.index.linking import EntityLinker
from drkit.index.question_linking import QuestionLinkConfig, QuestionLinker, linking_recall
from drkit.index.tfidf import STOPWORDS

WORDS = ["blood", "street", "wanted", "film", "of", "the", "river", "king", "john", "smith", "paris", "18", "and"]


def _grams(text):
    words = re.findall(r"\w+", fold(text))
    out = [w for w in words if w not in STOPWORDS]
    out += [f"{a} {b}" for a, b in zip(words, words[1:]) if a not in STOPWORDS and b not in STOPWORDS]
    return Counter(out)


def _reference(names, question, top, bonus, min_length=3):
    """Cosine of log(1+tf) * BM25-idf vectors over un-hashed grams, by dictionaries; exact matches by a scan."""
    name_grams = [_grams(n) for n in names]
    df = Counter(g for c in name_grams for g in c)
    N = len(names)
    idf = {g: math.log1p((N - d + 0.5) / (d + 0.5)) for g, d in df.items()}

    def vec(c):  # a gram of no name has df 0 (it still counts in the question's norm)
        v = {g: math.log1p(n) * idf.get(g, math.log1p((N + 0.5) / 0.5)) for g, n in c.items()}
        norm = math.sqrt(sum(x * x for x in v.values()))
        return {g: x / norm for g, x in v.items()} if norm else {}

    qv = vec(_grams(question))
    exact = {e for _, _, e in EntityLinker([fold(n) for n in names], min_length).find(question)}
    scores = {}
    for e, c in enumerate(name_grams):
        nv = vec(c)
        cos = sum(x * nv.get(g, 0.0) for g, x in qv.items())
        s = cos + (bonus if e in exact else 0.0)
        if s > 0 or e in exact:
            scores[e] = s
    ranked = sorted(scores, key=lambda e: (-scores[e], e))
    keep = set(ranked[:top]) | exact
    total = sum(scores[e] for e in keep)
    return {e: scores[e] / total if total else 0.0 for e in keep}, exact


@pytest.mark.parametrize("seed", range(6))
def test_linker_matches_the_slow_reference(seed):
    rng = np.random.default_rng(seed)
    names = sorted({" ".join(rng.choice(WORDS, rng.integers(1, 4))) for _ in range(40)})
    questions = [" ".join(rng.choice(WORDS + ["who", "is", "what"], rng.integers(3, 9))) for _ in range(12)]
    questions.append(f"Which came first, {names[3].upper()} or {names[7]}?")
    for top, bonus in [(5, 1.0), (3, 0.0), (50, 0.5), (20, 4.0)]:
        linker = QuestionLinker(names, EntityLinker([fold(n) for n in names], 3),
                                QuestionLinkConfig(top=top, exact_bonus=bonus))
        linked = linker.link(questions)
        for b, q in enumerate(questions):
            want, exact = _reference(names, q, top, bonus)
            ids, weights = linked.row(b)
            assert set(ids.tolist()) == set(want), (q, top)
            for e, w in zip(ids, weights):
                assert w == pytest.approx(want[int(e)], rel=1e-4, abs=1e-6)
            assert exact <= set(ids.tolist())
            named = linked.named()[b]
            assert set(named[named >= 0].tolist()) == exact and (named >= 0).sum() == len(exact)


def test_exact_matches_are_always_in_and_case_does_not_matter():
    names = ["God's Gift to Women", "Women", "Gift", "The Wanted 18", "Blood Street"]
    linker = QuestionLinker(names, EntityLinker([fold(n) for n in names], 3), QuestionLinkConfig(top=1))
    linked = linker.link(["Which film has the director who is older, God'S Gift To Women or The Wanted 18?"])
    ids, _ = linked.row(0)
    assert set(ids.tolist()) == {0, 3}  # the two names found verbatim; top 1 adds nothing else
    assert linked.exact.all()
    assert (np.diff(linked.rows) >= 0).all() and linked.batch_size == 1
    assert linked.weights.sum() == pytest.approx(1.0)


def test_a_model_saved_without_the_bonus_keeps_the_one_it_had():
    from drkit.util.runs import as_saved

    assert QuestionLinkConfig().exact_bonus == 4.0  # the default since 2026-11-27
    assert as_saved(QuestionLinkConfig, {}).exact_bonus == 1.0  # a manifest without "link": the old default
    assert as_saved(QuestionLinkConfig, {"top": 20, "exact_bonus": 2.5}).exact_bonus == 2.5


def test_a_question_naming_nothing_gets_an_empty_row():
    names = ["Blood Street", "Paris"]
    linked = QuestionLinker(names, EntityLinker([fold(n) for n in names], 3)).link(["who is it?", "Paris"])
    assert linked.row(0)[0].tolist() == [] and linked.row(1)[0].tolist() == [1]
    assert linked.named().tolist() == [[-1], [1]]


def test_recall_against_a_bfs_with_literal_shares():
    # 0 - 1 - 2 - 3, 4 isolated
    edges = [(0, 1), (1, 2), (2, 3)]
    E = 5
    hops = sp.csr_matrix((np.ones(2 * len(edges), np.float32),
                          ([a for a, b in edges] + [b for a, b in edges], [b for a, b in edges] + [a for a, b in edges])),
                         shape=(E, E))
    from drkit.index.question_linking import LinkedQuestions

    # question 0: Z_0 = {0}, gold {0, 2}; question 1: Z_0 = {1}, gold {3, 4}; question 2: Z_0 = {4}, no gold
    linked = LinkedQuestions(np.array([0, 1, 2]), np.array([0, 1, 4]), np.ones(3), np.ones(3), np.zeros(3, bool), 3)
    got = linking_recall(linked, [[0, 2], [3, 4], []], hops, ["a", "b", "a"])
    assert got["overall"] == {"questions": 2, "no_gold": 1,
                              "all@0": 0.0, "entities@0": 0.25, "reached@0": 1.0,
                              "all@1": 0.0, "entities@1": 0.25, "reached@1": 2.5,
                              "all@2": 0.5, "entities@2": 0.75, "reached@2": 3.5}
    assert got["by_type"]["a"]["all@2"] == 1.0 and got["by_type"]["a"]["no_gold"] == 1
    assert got["by_type"]["b"]["entities@2"] == 0.5


def test_a_question_in_decomposed_form_links_as_the_composed_one():
    import unicodedata

    names = ["Zoë Müller", "Zoe Miller", "Quiet Harbour"]
    linker = QuestionLinker(names, EntityLinker([fold(n) for n in names], 3), QuestionLinkConfig(top=2))
    question = "Where was Zoë Müller born?"
    a, b = (linker.link([q]) for q in (question, unicodedata.normalize("NFD", question)))
    assert a.row(0)[0].tolist() == b.row(0)[0].tolist() and 0 in a.row(0)[0].tolist()
    assert np.allclose(a.weights, b.weights) and b.exact[a.row(0)[0].tolist().index(0)]
