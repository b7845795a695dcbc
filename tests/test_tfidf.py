"""Hashed unigram+bigram TF-IDF against a naive pure-Python recomputation, and top_passages against dense numpy."""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter

import numpy as np
import pytest
import scipy.sparse as sp

from drkit.errors import ConfigError
from drkit.index.sparse import SparseConfig, top_passages
from drkit.index.tfidf import STOPWORDS, NgramHasher, document_frequency, idf_weights, keep_columns, tfidf

# ---------------------------------------------------------------------------------------------
# Naive reference of the formulas in drkit.index.tfidf's docstring


def ref_grams(text: str, ngram: int = 2) -> list[str]:
    words = re.findall(r"\w+", text.lower())
    out = [w for w in words if w not in STOPWORDS]
    for n in range(2, ngram + 1):
        for i in range(len(words) - n + 1):
            gram = words[i : i + n]
            if not any(w in STOPWORDS for w in gram):
                out.append(" ".join(gram))
    return out


def ref_bucket(gram: str, buckets: int) -> int:
    return int.from_bytes(hashlib.blake2b(gram.encode("utf-8"), digest_size=8).digest(), "little") % buckets


def ref_counts(texts, buckets, ngram=2) -> list[Counter]:
    return [Counter(ref_bucket(g, buckets) for g in ref_grams(t, ngram)) for t in texts]


def ref_idf(df: int, n: int) -> float:
    # idf(t) = log(1 + (N - df(t) + 0.5) / (df(t) + 0.5))
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


def ref_tfidf(passages, names, buckets, ngram=2):
    """Dense F (P, H) and G (E, H) in float64, from dictionaries of counts."""
    pc = ref_counts(passages, buckets, ngram)
    n = len(passages)
    df = Counter()
    for c in pc:
        for t in c:
            df[t] += 1
    F = np.zeros((len(passages), buckets))
    for d, c in enumerate(pc):
        for t, k in c.items():
            F[d, t] = math.log(1 + k) * ref_idf(df[t], n)
    G = np.zeros((len(names), buckets))
    for e, c in enumerate(ref_counts(names, buckets, ngram)):
        for t, k in c.items():
            G[e, t] = math.log(1 + k) * ref_idf(df[t], n)
        norm = math.sqrt(sum(v * v for v in G[e]))
        if norm > 0:
            G[e] /= norm
    return F, G, df


CORPUS = [
    "Kismet is a 1944 film directed by William Dieterle.",
    "Kismet stars Marlene Dietrich and Ronald Colman. Kismet, kismet!",
    "The Mark of Zorro is a 1940 film; Zorro rides again and again.",
    "William Dieterle directed The Hunchback of Notre Dame.",
    "",
    "the of and a is",  # only stopwords
    "Marlene Dietrich. Marlene Dietrich. Marlene Dietrich.",
]
NAMES = ["Kismet", "William Dieterle", "Marlene Dietrich", "The Mark of Zorro", "The Who", "Notre Dame", "Unseen Name"]


# ---------------------------------------------------------------------------------------------
# NgramHasher


def test_stopword_list_is_nltk_english():
    assert {"the", "a", "of", "and", "is", "who", "don", "t", "s"} <= STOPWORDS
    assert not {"kismet", "film", "mark"} & STOPWORDS


def test_grams_filter_stopwords_and_make_bigrams():
    h = NgramHasher(hash_buckets=97)
    assert h.grams("The Mark of Zorro") == ["mark", "zorro"]  # "mark of", "of zorro": stopword in the bigram
    assert h.grams("New York City, at night") == ["new", "york", "city", "night", "new york", "york city"]
    assert h.grams("don't STOP") == ["stop"]
    assert h.grams("Kismet's") == ["kismet"]
    assert h.grams("") == [] and h.grams("the of a") == []
    assert h.grams("Place Vendôme") == ["place", "vendôme", "place vendôme"]


def test_grams_unigrams_only_and_trigrams():
    assert NgramHasher(97, ngram=1).grams("new york city") == ["new", "york", "city"]
    assert NgramHasher(97, ngram=3).grams("new york city of x") == [
        "new", "york", "city", "x", "new york", "york city", "new york city"]


@pytest.mark.parametrize("text", CORPUS + NAMES + ["Ünïcödé wörds_with_underscore 12ab", "a\tb\nc  d"])
def test_grams_match_reference(text):
    for ngram in (1, 2, 3):
        assert NgramHasher(1 << 20, ngram).grams(text) == ref_grams(text, ngram)


def test_bucket_is_blake2b_and_stable():
    h = NgramHasher(hash_buckets=1 << 24)
    for gram in ["kismet", "new york", "vendôme", ""]:
        assert h.bucket(gram) == ref_bucket(gram, 1 << 24)
        assert h.bucket(gram) == h.bucket(gram)  # cached
    # a fixed value: the buckets must not change between versions (indexes store df per bucket)
    assert h.bucket("kismet") == int.from_bytes(hashlib.blake2b(b"kismet", digest_size=8).digest(), "little") % (1 << 24)
    assert NgramHasher(7).bucket("kismet") < 7


@pytest.mark.parametrize("buckets", [16, 1 << 20])
def test_count_matrix_matches_reference(buckets):
    h = NgramHasher(buckets)
    counts = h.count_matrix(iter(CORPUS))  # a generator is accepted
    assert counts.shape == (len(CORPUS), buckets) and counts.dtype == np.float32
    dense = np.zeros((len(CORPUS), buckets))
    for d, c in enumerate(ref_counts(CORPUS, buckets)):
        for t, k in c.items():
            dense[d, t] = k
    assert np.array_equal(counts.toarray(), dense)
    assert counts.nnz == np.count_nonzero(dense)  # no explicit zeros, one entry per bucket
    assert np.array_equal(document_frequency(counts), (dense > 0).sum(axis=0))


def test_count_matrix_in_blocks(monkeypatch):
    """Texts counted a few at a time (empty ones at a block's edges too) give the same matrix as all at once."""
    texts = ["", *CORPUS, "", "the of and", *CORPUS[:2], ""]
    whole = NgramHasher(1 << 20).count_matrix(texts)
    monkeypatch.setattr(NgramHasher, "BLOCK", 3)
    blocks = NgramHasher(1 << 20).count_matrix(iter(texts))
    monkeypatch.setattr(NgramHasher, "BLOCK", 1 << 16)
    monkeypatch.setattr(NgramHasher, "BLOCK_BUCKETS", 5)  # blocks ended by their buckets instead
    capped = NgramHasher(1 << 20).count_matrix(texts)
    for got in (blocks, capped):
        assert got.shape == whole.shape == (len(texts), 1 << 20)
        for a, b in ((got.indptr, whole.indptr), (got.indices, whole.indices), (got.data, whole.data)):
            assert np.array_equal(a, b)
    dense = np.zeros((len(texts), 1 << 20))
    for d, c in enumerate(ref_counts(texts, 1 << 20)):
        for t, k in c.items():
            dense[d, t] = k
    assert np.array_equal(blocks.toarray(), dense)


def test_count_matrix_of_nothing():
    counts = NgramHasher(16).count_matrix([])
    assert counts.shape == (0, 16) and counts.nnz == 0


# ---------------------------------------------------------------------------------------------
# tf-idf


@pytest.mark.parametrize("buckets", [16, 64, 1 << 14])
def test_tfidf_matches_naive_reference(buckets):
    h = NgramHasher(buckets)
    counts = h.count_matrix(CORPUS)
    df = document_frequency(counts)
    idf = idf_weights(df, len(CORPUS))
    F = tfidf(counts, idf)
    G = tfidf(h.count_matrix(NAMES), idf, normalize=True)
    F_ref, G_ref, df_ref = ref_tfidf(CORPUS, NAMES, buckets)
    assert df.tolist() == [df_ref.get(t, 0) for t in range(buckets)]
    assert F.dtype == np.float32 and G.dtype == np.float32
    np.testing.assert_allclose(F.toarray(), F_ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(G.toarray(), G_ref, rtol=1e-6, atol=1e-7)
    assert F.nnz == np.count_nonzero(F_ref) and G.nnz == np.count_nonzero(G_ref)
    # G rows are unit vectors, except names with no term at all
    norms = np.linalg.norm(G.toarray().astype(np.float64), axis=1)
    assert np.allclose(norms[[0, 1, 2, 3, 5, 6]], 1.0, atol=1e-6)
    assert norms[4] == 0.0  # "The Who": stopwords only
    # the scores G F^T
    np.testing.assert_allclose((G @ F.T).toarray(), G_ref @ F_ref.T, rtol=1e-5, atol=1e-6)


def test_idf_weights_formula():
    df = np.array([0, 1, 2, 5, 10])
    got = idf_weights(df, 10)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [ref_idf(int(d), 10) for d in df], rtol=1e-6)
    assert np.all(got > 0)


def test_tfidf_normalize_of_empty_rows():
    counts = sp.csr_matrix(np.array([[0, 0, 0], [3, 0, 1]], dtype=np.float32))
    idf = np.array([1.0, 2.0, 0.5], dtype=np.float32)
    out = tfidf(counts, idf, normalize=True).toarray()
    row = np.array([math.log(4) * 1.0, 0, math.log(2) * 0.5])
    np.testing.assert_allclose(out, [[0, 0, 0], row / np.linalg.norm(row)], rtol=1e-6)
    np.testing.assert_allclose(tfidf(counts, idf).toarray(), [[0, 0, 0], row], rtol=1e-6)


# ---------------------------------------------------------------------------------------------
# keep_columns


@pytest.mark.parametrize("seed", range(4))
def test_keep_columns_matches_dense_masking(seed):
    rng = np.random.default_rng(seed)
    m = sp.random(9, 13, density=0.3, format="csr", random_state=seed, dtype=np.float32)
    m = sp.vstack([sp.csr_matrix((2, 13), dtype=np.float32), m, sp.csr_matrix((3, 13), dtype=np.float32)], format="csr")
    keep = rng.random(13) < 0.5
    got = keep_columns(m, keep)
    assert got.shape == m.shape and got.has_sorted_indices == m.has_sorted_indices
    assert np.array_equal(got.toarray(), m.toarray() * keep)  # empty leading and trailing rows included
    assert np.all(keep[got.indices])
    assert keep_columns(sp.csr_matrix((4, 5), dtype=np.float32), keep[:5]).nnz == 0


# top_passages


def dense_top(G, F, mu, epsilon):
    """Reference: dense G F^T, keep > epsilon, order by (-score, passage id), first mu, then by passage id."""
    S = G.toarray().astype(np.float64) @ F.toarray().astype(np.float64).T
    indptr, cols, vals = [0], [], []
    for row in S:
        cand = [p for p in range(len(row)) if row[p] > epsilon]
        cand.sort(key=lambda p: (-row[p], p))
        kept = sorted(cand[:mu])
        cols += kept
        vals += [row[p] for p in kept]
        indptr.append(len(cols))
    return np.array(indptr), np.array(cols, dtype=np.int64), np.array(vals)


def random_int_sparse(rng, shape, density, high):
    """Small non-negative integers: products and sums are exact in float32, so ties are real ties."""
    dense = rng.integers(1, high + 1, size=shape) * (rng.random(shape) < density)
    return sp.csr_matrix(dense.astype(np.float32))


@pytest.mark.parametrize("seed", range(8))
def test_top_passages_matches_dense_reference(seed):
    rng = np.random.default_rng(seed)
    E, P, H = rng.integers(1, 30), rng.integers(1, 40), rng.integers(2, 12)
    G = random_int_sparse(rng, (E, H), 0.3, 3)
    F = random_int_sparse(rng, (P, H), 0.3, 3)
    ties = 0
    for mu in (1, 2, 5, 100):
        for epsilon in (0.0, 1.0, 2.5, 4.0):
            want = dense_top(G, F, mu, epsilon)
            for block, budget in ((1, 1 << 24), (3, 1 << 24), (1024, 1 << 24), (1024, 0), (1024, 7)):
                indptr, cols, vals = top_passages(G, F, mu, epsilon, block=block, budget=budget)
                assert indptr.dtype == np.int64 and cols.dtype == np.int32 and vals.dtype == np.float32
                assert np.array_equal(indptr, want[0])
                assert np.array_equal(cols, want[1])
                assert np.array_equal(vals, want[2].astype(np.float32))
        S = (G @ F.T).toarray()
        ties += sum(len(r[r > 0]) - len(np.unique(r[r > 0])) for r in S)
    assert ties > 0 or seed > 0  # ties do occur, so the tie-break is exercised


def test_top_passages_blocks_keep_to_the_budget():
    """Blocks hold consecutive rows, at most `rows` of them, with bounds summing to at most the budget (a
    row over it alone), and cover every row once."""
    from drkit.index.sparse import _blocks

    rng = np.random.default_rng(0)
    bound = rng.integers(0, 50, 200)
    bound[[5, 80]] = 1000  # rows of common words
    for rows, budget in ((1024, 100), (7, 100), (1024, 0), (3, 10**9)):
        starts = _blocks(bound, rows, budget)
        assert starts[0] == 0 and starts[-1] == len(bound) and np.all(np.diff(starts) >= 1)
        for lo, hi in zip(starts[:-1], starts[1:]):
            assert hi - lo <= rows and (hi - lo == 1 or bound[lo:hi].sum() <= budget)
    assert _blocks(np.zeros(0, np.int64), 4, 10).tolist() == [0]


def test_top_passages_tie_break_by_lower_passage_id():
    F = sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 0], [1, 0], [2, 0]], dtype=np.float32))
    G = sp.csr_matrix(np.array([[1, 0], [0, 0]], dtype=np.float32))
    indptr, cols, vals = top_passages(G, F, mu=2, epsilon=0.0)
    assert indptr.tolist() == [0, 2, 2]
    assert cols.tolist() == [0, 4]  # score 2 (passage 4), then the lowest id among the ties at 1
    assert vals.tolist() == [1.0, 2.0]
    indptr, cols, vals = top_passages(G, F, mu=3, epsilon=0.0)
    assert cols.tolist() == [0, 2, 4]
    indptr, cols, vals = top_passages(G, F, mu=3, epsilon=1.0)  # strictly greater than epsilon
    assert cols.tolist() == [4]


def test_top_passages_empty_inputs():
    F = sp.csr_matrix((0, 5), dtype=np.float32)
    G = sp.csr_matrix(np.ones((3, 5), dtype=np.float32))
    indptr, cols, vals = top_passages(G, F, 4, 0.0)
    assert indptr.tolist() == [0, 0, 0, 0] and len(cols) == len(vals) == 0
    indptr, cols, vals = top_passages(sp.csr_matrix((0, 5), dtype=np.float32), G, 4, 0.0)
    assert indptr.tolist() == [0] and len(cols) == 0


def test_top_passages_on_tfidf_of_a_tiny_corpus():
    passages = CORPUS + ["Kismet is a 1944 film directed by William Dieterle."]  # a duplicate of passage 0: a tie
    h = NgramHasher(1 << 16)
    counts = h.count_matrix(passages)
    idf = idf_weights(document_frequency(counts), len(passages))
    F = tfidf(counts, idf)
    G = tfidf(h.count_matrix(NAMES), idf, normalize=True)
    F_ref, G_ref, _ = ref_tfidf(passages, NAMES, 1 << 16)
    S = G_ref @ F_ref.T
    for mu in (1, 2, 3, 50):
        indptr, cols, vals = top_passages(G, F, mu, 0.0)
        for e in range(len(NAMES)):
            kept = cols[indptr[e] : indptr[e + 1]].tolist()
            positive = [p for p in range(len(passages)) if S[e, p] > 1e-9]
            assert len(kept) == min(mu, len(positive))
            assert kept == sorted(kept)
            np.testing.assert_allclose(vals[indptr[e] : indptr[e + 1]], S[e, kept], rtol=1e-5)
            rest = [S[e, p] for p in positive if p not in kept]
            assert all(S[e, p] >= max(rest, default=0) - 1e-6 for p in kept)
    # "Kismet": passages 0 and 7 are identical, the tie goes to passage 0
    indptr, cols, _ = top_passages(G, F, 1, 0.0)
    assert S[0, 0] == S[0, 7]
    assert cols[indptr[0] : indptr[1]].tolist() == [int(np.argmax(S[0]))]


def test_negative_epsilon_is_refused():
    """S(e, d) = 0 for a passage sharing no n-gram with e, and the sparse product never stores it, so
    epsilon < 0 (which would keep such passages) cannot be honoured: it is refused, in the config and in
    top_passages itself."""
    with pytest.raises(ConfigError, match=r"epsilon must be at least 0.*got -0.5"):
        SparseConfig(epsilon=-0.5)
    G = sp.csr_matrix(np.array([[1, 0]], dtype=np.float32))
    F = sp.csr_matrix(np.array([[0, 1], [1, 0], [0, 2]], dtype=np.float32))
    with pytest.raises(ConfigError, match=r"epsilon must be at least 0.*got -0.5"):
        top_passages(G, F, mu=3, epsilon=-0.5)
    assert dense_top(G, F, 3, -0.5)[1].tolist() == [0, 1, 2]  # what honouring it would mean: passages 0 and 2 too
    assert top_passages(G, F, mu=3, epsilon=0.0)[1].tolist() == dense_top(G, F, 3, 0.0)[1].tolist() == [1]
