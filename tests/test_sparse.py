"""A_{E->M}: ragged_expand against dense products, build_sparse_matrices against loops, SparseIndex.expand."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

from drkit.data.kb import EntityTable
from drkit.index.csr import _sum_by_key, a_indptr, concat_ranges, mention_incidence, ragged_expand
from drkit.index.linking import LinkedCorpus
from drkit.index.sparse import SparseConfig, build_sparse_matrices, top_passages
from drkit.index.tfidf import NgramHasher, document_frequency, idf_weights, tfidf

# ---------------------------------------------------------------------------------------------
# ragged_expand


def random_csr(rng, n_rows, n_cols, density):
    """CSR arrays (indptr int64, indices int32 increasing within a row, data float32); some rows empty."""
    dense = (rng.random((n_rows, n_cols)) < density) * rng.uniform(0.1, 2.0, (n_rows, n_cols))
    dense[rng.random(n_rows) < 0.2] = 0.0
    m = sp.csr_matrix(dense.astype(np.float32))
    return m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data.astype(np.float32), dense.astype(np.float32)


def dense_from_coords(rows, cols, vals, shape):
    out = np.zeros(shape)
    for r, c, v in zip(rows, cols, vals):
        out[r, c] += v
    return out


def check_output(out_rows, out_mentions, out_vals, n_mentions):
    assert len(out_rows) == len(out_mentions) == len(out_vals)
    keys = list(zip(out_rows.tolist(), out_mentions.tolist()))
    assert keys == sorted(keys) and len(set(keys)) == len(keys)  # sorted by (row, mention), one entry per pair
    assert out_vals.dtype == np.float32
    assert np.all(out_mentions < n_mentions) if len(out_mentions) else True


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("binary", [True, False])
def test_ragged_expand_matches_dense_product(seed, binary):
    rng = np.random.default_rng(seed)
    E, M, B = int(rng.integers(1, 40)), int(rng.integers(1, 60)), int(rng.integers(1, 6))
    indptr, indices, data, A = random_csr(rng, E, M, rng.choice([0.05, 0.2, 0.6]))
    # a batch of sparse entity sets, no entity twice in one row, coordinates in random order
    rows, ents, weights = [], [], []
    for b in range(B):
        k = int(rng.integers(0, E + 1))
        chosen = rng.choice(E, size=k, replace=False)
        rows += [b] * k
        ents += chosen.tolist()
        weights += rng.normal(size=k).tolist()
    order = rng.permutation(len(rows))
    rows, ents, weights = (np.asarray(x)[order] for x in (rows, ents, weights))
    Z = np.zeros((B, E))
    Z[rows, ents] = weights

    out = ragged_expand(indptr, indices, None if binary else data, rows, ents, weights.astype(np.float32))
    check_output(*out, M)
    A_used = (A != 0).astype(np.float64) if binary else A.astype(np.float64)
    want = Z @ A_used
    got = dense_from_coords(*out, (B, M))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    # the structure: exactly the pairs (b, m) with some entity e of row b and A[e, m] != 0
    pattern = ((Z != 0).astype(int) @ (A != 0).astype(int)) > 0
    assert set(zip(out[0].tolist(), out[1].tolist())) == set(zip(*np.nonzero(pattern)))


def test_ragged_expand_duplicate_entities_are_summed():
    """The docstring does not forbid a repeated (row, entity); it behaves as a sum, like a COO matrix Z."""
    rng = np.random.default_rng(1)
    indptr, indices, data, A = random_csr(rng, 6, 9, 0.5)
    rows = np.array([0, 0, 1, 0, 1, 1])
    ents = np.array([2, 2, 4, 5, 4, 0])
    weights = np.array([0.5, 1.5, -1.0, 2.0, 3.0, 1.0], dtype=np.float32)
    Z = sp.coo_matrix((weights, (rows, ents)), shape=(2, 6)).toarray()  # duplicates summed
    for binary in (True, False):
        out = ragged_expand(indptr, indices, None if binary else data, rows, ents, weights)
        check_output(*out, 9)
        want = Z @ ((A != 0) if binary else A)
        np.testing.assert_allclose(dense_from_coords(*out, (2, 9)), want, rtol=1e-5, atol=1e-6)


def test_ragged_expand_hand_example():
    # A: e0 -> m1, m3 ; e1 -> (none) ; e2 -> m0, m3
    indptr = np.array([0, 2, 2, 4])
    indices = np.array([1, 3, 0, 3], dtype=np.int32)
    data = np.array([0.5, 0.25, 2.0, 4.0], dtype=np.float32)
    rows, mentions, vals = ragged_expand(indptr, indices, None, [0, 0, 1], [0, 2, 1], [1.0, 10.0, 7.0])
    assert rows.tolist() == [0, 0, 0] and mentions.tolist() == [0, 1, 3] and vals.tolist() == [10.0, 1.0, 11.0]
    rows, mentions, vals = ragged_expand(indptr, indices, data, [0, 0], [0, 2], [1.0, 10.0])
    assert mentions.tolist() == [0, 1, 3] and vals.tolist() == [20.0, 0.5, 40.25]


def test_ragged_expand_empty():
    indptr = np.array([0, 0, 2])
    indices = np.array([0, 1], dtype=np.int32)
    for args in ([[], [], []], [[0], [0], [1.0]]):
        rows, mentions, vals = ragged_expand(indptr, indices, None, *args)
        assert len(rows) == len(mentions) == len(vals) == 0


@pytest.mark.parametrize("max_key", [5, 1000, 1 << 40, (1 << 62) + 12345])
def test_sum_by_key_matches_dict(max_key):
    """All three code paths: dense bincount (small key range), keys packed with their positions into one
    int64 sort, and the argsort fallback (keys too wide to pack)."""
    rng = np.random.default_rng(max_key % 1000)
    for n in (0, 1, 2, 7, 300):
        pool = rng.integers(0, max_key, size=max(1, n // 3), dtype=np.int64)
        keys = rng.choice(pool, size=n) if n else np.zeros(0, np.int64)
        keys[: min(n, 2)] = max_key - 1 if n else keys[:0]
        values = rng.normal(size=n)
        want: dict[int, float] = {}
        for k, v in zip(keys.tolist(), values.tolist()):
            want[k] = want.get(k, 0.0) + v
        got_keys, got_sums = _sum_by_key(keys, values)
        assert got_keys.tolist() == sorted(want)
        assert got_sums.dtype == np.float32
        np.testing.assert_allclose(got_sums, [want[k] for k in sorted(want)], rtol=1e-5, atol=1e-6)


def test_ragged_expand_with_huge_row_ids():
    indptr = np.array([0, 2, 3])
    indices = np.array([4, 9, 4], dtype=np.int32)
    big = (1 << 58) + 3  # rows * n_mentions does not leave room for the position bits
    rows, mentions, vals = ragged_expand(indptr, indices, None, [big, 5, big, 5], [0, 1, 1, 0], [1.0, 2.0, 3.0, 4.0])
    assert rows.tolist() == [5, 5, big, big]
    assert mentions.tolist() == [4, 9, 4, 9]
    assert vals.tolist() == [6.0, 4.0, 4.0, 1.0]


def test_concat_ranges():
    rng = np.random.default_rng(0)
    for _ in range(50):
        n = int(rng.integers(0, 8))
        starts, lengths = rng.integers(0, 100, n), rng.integers(0, 5, n)
        want = [x for s, k in zip(starts, lengths) for x in range(s, s + k)]
        assert concat_ranges(starts, lengths).tolist() == want


@pytest.mark.parametrize("seed", range(5))
def test_mention_incidence_matches_sets(seed):
    rng = np.random.default_rng(seed)
    E, P, M = int(rng.integers(1, 8)), int(rng.integers(1, 6)), int(rng.integers(0, 30))
    mention_passage, mention_entity = np.sort(rng.integers(0, P, M)), rng.integers(0, E, M)
    m = mention_incidence(mention_entity, mention_passage, E, P)
    assert m.shape == (E, P) and set(m.data.tolist()) <= {1.0}
    for e in range(E):  # row e: the passages mentioning e, sorted
        want = sorted({int(p) for p, x in zip(mention_passage, mention_entity) if x == e})
        assert m.indices[m.indptr[e] : m.indptr[e + 1]].tolist() == want
    t = m.T.tocsr()
    for p in range(P):  # and its transpose: the distinct entities of each passage, sorted
        assert t.indices[t.indptr[p] : t.indptr[p + 1]].tolist() == sorted(set(mention_entity[mention_passage == p].tolist()))


# ---------------------------------------------------------------------------------------------
# build_sparse_matrices


def hand_linked(passages, mention_pairs):
    """A LinkedCorpus with the given passage texts and (entity, passage) mentions (sorted by passage)."""
    mention_pairs = sorted(mention_pairs, key=lambda x: x[1])
    mentions = np.array([[e, p, 0, 0, 0, 1] for e, p in mention_pairs], dtype=np.int32).reshape(-1, 6)
    P = len(passages)
    return LinkedCorpus(
        article_keys=[str(i) for i in range(P)], article_titles=["t"] * P, passage_texts=list(passages),
        passage_article=np.arange(P, dtype=np.int32), passage_char_start=np.zeros(P, np.int64),
        piece_offsets=np.arange(P + 1, dtype=np.int64), pieces=np.zeros(P, np.int32), mentions=mentions,
    )


def check_A_against_loops(m, linked, n_entities):
    """A row e = every mention of every kept passage of e, in mention order, valued by the passage score."""
    mention_passage = linked.mentions[:, 1]
    assert m.A_indptr.shape == (n_entities + 1,) and m.A_indptr[0] == 0
    assert m.A_indptr[-1] == len(m.A_indices) == len(m.A_data)
    for e in range(n_entities):
        kept = m.entity_passage[m.entity_passage_indptr[e] : m.entity_passage_indptr[e + 1]].tolist()
        score = dict(zip(kept, m.entity_passage_score[m.entity_passage_indptr[e] : m.entity_passage_indptr[e + 1]].tolist()))
        want_idx, want_val = [], []
        for mention in range(len(mention_passage)):
            p = int(mention_passage[mention])
            if p in score:
                want_idx.append(mention)
                want_val.append(score[p])
        row = slice(m.A_indptr[e], m.A_indptr[e + 1])
        assert m.A_indices[row].tolist() == want_idx
        assert m.A_data[row].tolist() == want_val


def test_build_sparse_matrices_hand_made():
    passages = [
        "Kismet is a 1944 film directed by William Dieterle.",
        "Marlene Dietrich stars in Kismet.",
        "The Mark of Zorro is a film.",
        "Nothing relevant at all.",
        "William Dieterle and Marlene Dietrich.",
    ]
    table = EntityTable.from_names(["Kismet", "William Dieterle", "Marlene Dietrich", "The Mark of Zorro", "The Who", "1944"])
    mentions = [(0, 0), (5, 0), (1, 0), (2, 1), (0, 1), (3, 2), (1, 4), (2, 4)]
    linked = hand_linked(passages, mentions)
    m = build_sparse_matrices(linked, table, SparseConfig(mu=2, hash_buckets=1 << 12))
    check_A_against_loops(m, linked, len(table))
    ep = [m.entity_passage[m.entity_passage_indptr[e] : m.entity_passage_indptr[e + 1]].tolist() for e in range(len(table))]
    assert ep[0] == [0, 1]  # Kismet
    assert ep[1] == [0, 4]  # William Dieterle
    assert ep[2] == [1, 4]  # Marlene Dietrich
    assert ep[3] == [2]  # The Mark of Zorro: "mark", "zorro"
    assert ep[4] == []  # The Who: stopwords only, empty G row
    assert ep[5] == [0]
    assert m.n_entities_without_terms == 1
    # the mentions of A's row 0 (Kismet): passages 0 and 1 hold mentions 0, 1, 2 and 3, 4
    assert m.A_indices[m.A_indptr[0] : m.A_indptr[1]].tolist() == [0, 1, 2, 3, 4]
    # df over the passages
    h = NgramHasher(1 << 12)
    df = document_frequency(h.count_matrix(passages))
    assert m.df_buckets.tolist() == np.flatnonzero(df).tolist()
    assert m.df_counts.tolist() == df[df > 0].tolist()


@pytest.mark.parametrize("seed", range(6))
def test_build_sparse_matrices_random(seed):
    rng = np.random.default_rng(seed)
    vocab = ["kismet", "zorro", "dieterle", "film", "marlene", "mark", "the", "of", "river", "castle", "tower", "1944"]
    P = int(rng.integers(1, 25))
    passages = [" ".join(rng.choice(vocab, size=int(rng.integers(0, 12)))) for _ in range(P)]
    names = sorted({" ".join(rng.choice(vocab, size=int(rng.integers(1, 3)))) for _ in range(12)})
    table = EntityTable.from_names(names)
    E = len(table)
    mentions = [(int(rng.integers(E)), int(rng.integers(P))) for _ in range(int(rng.integers(0, 60)))]
    linked = hand_linked(passages, mentions)
    for mu in (1, 3, 100):
        config = SparseConfig(mu=mu, hash_buckets=1 << 10, epsilon=float(rng.choice([0.0, 0.05])))
        m = build_sparse_matrices(linked, table, config)
        check_A_against_loops(m, linked, E)
        # entity -> passage is top_passages of the tf-idf of the names against the passages
        h = NgramHasher(config.hash_buckets)
        counts = h.count_matrix(passages)
        idf = idf_weights(document_frequency(counts), P)
        G = tfidf(h.count_matrix(table.keys), idf, normalize=True)
        want = top_passages(G, tfidf(counts, idf), mu, config.epsilon)  # the paper's plain TF-IDF
        if mentions:  # linked passages come first (SparseConfig.unlinked_weight)
            want = reference_top_passages(G, tfidf(counts, idf), mentions, mu, config.epsilon, config.unlinked_weight)
        assert np.array_equal(m.entity_passage_indptr, want[0])
        assert np.array_equal(m.entity_passage, want[1])
        assert np.array_equal(m.entity_passage_score, want[2])
        assert m.n_entities_without_terms == int(np.sum(np.diff(G.indptr) == 0))
        assert all(len(m.entity_passage[m.entity_passage_indptr[e] : m.entity_passage_indptr[e + 1]]) <= mu for e in range(E))


def reference_top_passages(G, F, mentions, mu, epsilon, unlinked_weight):
    """`top_passages` with links, loop by loop: in a row with a linked passage the others are scaled."""
    S = (G @ F.T).toarray().astype(np.float32)
    links = np.zeros(S.shape, dtype=bool)
    for e, p in mentions:
        links[e, p] = True
    indptr, cols, vals = [0], [], []
    for e in range(S.shape[0]):
        row = S[e].copy()
        if links[e].any():
            row[~links[e]] *= np.float32(unlinked_weight)
        kept = sorted((p for p in range(S.shape[1]) if row[p] > epsilon), key=lambda p: (-row[p], p))[:mu]
        cols += sorted(kept)
        vals += [row[p] for p in sorted(kept)]
        indptr.append(len(cols))
    return np.array(indptr), np.array(cols, dtype=np.int32), np.array(vals, dtype=np.float32)


@pytest.mark.parametrize("unlinked_weight, top", [(0.0, 1), (0.25, 1), (0.5, 0), (1.0, 0)])
def test_linked_passages_rank_first(unlinked_weight, top):
    passages = ["God Is Brazilian is a comedy film. God Is Brazilian was written by Carlos Diegues. God wins. God again.",
                "God's Not Dead is a drama film directed by Harold Cronk.",
                "Harold Cronk directed a film about the dead.", "Dead Man is a western.", "The dead walk."]
    table = EntityTable.from_names(["God's Not Dead", "God Is Brazilian", "Harold Cronk", "drama"])
    linked = hand_linked(passages, [(1, 0), (0, 1), (3, 1), (2, 1), (2, 2)])
    config = SparseConfig(mu=1, hash_buckets=1 << 12, unlinked_weight=unlinked_weight)
    m = build_sparse_matrices(linked, table, config)
    check_A_against_loops(m, linked, len(table))
    first = m.entity_passage[m.entity_passage_indptr[0] : m.entity_passage_indptr[1]].tolist()
    # plain TF-IDF ranks passage 0 ("god" four times; "dead" is common) above God's Not Dead's own
    # passage, at 1.61 against 0.73; below a weight of 0.45 the linked passage comes first
    assert first == [top]
    counts = NgramHasher(config.hash_buckets).count_matrix(passages)
    idf = idf_weights(document_frequency(counts), len(passages))
    G = tfidf(NgramHasher(config.hash_buckets).count_matrix(table.keys), idf, normalize=True)
    for mu in (1, 2, 3):
        want = reference_top_passages(G, tfidf(counts, idf), [(1, 0), (0, 1), (3, 1), (2, 1), (2, 2)], mu, 0.0,
                                      unlinked_weight)
        got = build_sparse_matrices(linked, table, dataclasses.replace(config, mu=mu))
        assert got.entity_passage_indptr.tolist() == want[0].tolist()
        assert got.entity_passage.tolist() == want[1].tolist()
        np.testing.assert_array_equal(got.entity_passage_score, want[2])


def test_build_sparse_matrices_without_mentions():
    table = EntityTable.from_names(["Kismet", "Zorro"])
    linked = hand_linked(["Kismet film", "Zorro film"], [])
    m = build_sparse_matrices(linked, table, SparseConfig(hash_buckets=64))
    assert m.entity_passage.tolist() == [0, 1]
    assert m.A_indptr.tolist() == [0, 0, 0] and len(m.A_indices) == 0


def test_sparse_config_validation():
    from drkit.errors import ConfigError

    for kwargs in ({"mu": 0}, {"hash_buckets": 1}, {"ngram": 0}, {"unlinked_weight": -0.1}, {"unlinked_weight": 1.5}):
        with pytest.raises(ConfigError):
            SparseConfig(**kwargs)


# ---------------------------------------------------------------------------------------------
# SparseIndex.expand / expand_batch on a built index


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    from drkit.index.build import build_index
    from drkit.index.linking import LinkConfig

    tmp = tmp_path_factory.mktemp("sparse_index")
    (tmp / "wiki.txt").write_text(
        "1 Kismet\n2 Kismet is a 1944 film directed by William Dieterle.\n3 It stars Marlene Dietrich and Ronald Colman.\n\n"
        "1 The Mark of Zorro\n2 The Mark of Zorro is a 1940 film directed by Rouben Mamoulian.\n3 It stars Tyrone Power.\n\n"
        "1 Blood and Sand\n2 Blood and Sand is a 1941 film directed by Rouben Mamoulian, starring Tyrone Power.\n\n"
        "1 Witness for the Prosecution\n2 Witness for the Prosecution stars Marlene Dietrich and Tyrone Power.\n",
        encoding="utf-8")
    (tmp / "kb.txt").write_text(
        "Kismet|directed_by|William Dieterle\nKismet|starred_actors|Marlene Dietrich\nKismet|starred_actors|Ronald Colman\n"
        "Kismet|release_year|1944\nThe Mark of Zorro|directed_by|Rouben Mamoulian\nThe Mark of Zorro|starred_actors|Tyrone Power\n"
        "Blood and Sand|directed_by|Rouben Mamoulian\nBlood and Sand|starred_actors|Tyrone Power\n"
        "Witness for the Prosecution|starred_actors|Marlene Dietrich\nWitness for the Prosecution|starred_actors|Tyrone Power\n",
        encoding="utf-8")
    return build_index(tmp / "wiki.txt", tmp / "index", kb=tmp / "kb.txt", link_config=LinkConfig(max_passage_pieces=16),
                       sparse_config=SparseConfig(mu=3, hash_buckets=1 << 12), log=lambda *a: None)


def test_index_expand_batch_matches_dense(index):
    A = index.A().toarray().astype(np.float64)
    E, M = A.shape
    assert E == index.n_entities and M == index.n_mentions > 10
    assert A.any()
    rng = np.random.default_rng(3)
    for binary in (True, False):
        for _ in range(20):
            B = int(rng.integers(1, 4))
            rows, ents, weights = [], [], []
            for b in range(B):
                chosen = rng.choice(E, size=int(rng.integers(0, E + 1)), replace=False)
                rows += [b] * len(chosen)
                ents += chosen.tolist()
                weights += rng.uniform(0.1, 1.0, len(chosen)).tolist()
            Z = np.zeros((B, E))
            Z[rows, ents] = weights
            out = index.expand_batch(rows, ents, weights, binary=binary)
            check_output(*out, M)
            want = Z @ ((A != 0) if binary else A)
            np.testing.assert_allclose(dense_from_coords(*out, (B, M)), want, rtol=1e-5, atol=1e-6)


def test_index_expand_single_set(index):
    A = index.A().toarray()
    ents = [index.entities.lookup("Tyrone Power"), index.entities.lookup("kismet")]
    assert None not in ents
    mentions, values = index.expand(ents, [1.0, 0.5])
    want = 1.0 * (A[ents[0]] != 0) + 0.5 * (A[ents[1]] != 0)
    assert mentions.tolist() == np.flatnonzero(want).tolist()
    np.testing.assert_allclose(values, want[want != 0], rtol=1e-6)
    # the mentions reached from Tyrone Power's row are in Tyrone Power's kept passages
    kept = set(index.entity_passage[index.entity_passage_indptr[ents[0]] : index.entity_passage_indptr[ents[0] + 1]].tolist())
    row = index.A_indices[index.A_indptr[ents[0]] : index.A_indptr[ents[0] + 1]]
    assert {int(index.mentions[m, 1]) for m in row} <= kept
    assert len(row) == sum(int(np.sum(index.mentions[:, 1] == p)) for p in kept)


def test_index_passage_mentions_and_incidence(index):
    """The passage -> mentions pointers and the mention incidence, computed once by the index, agree with its mentions."""
    indptr = index.passage_mention_indptr
    assert indptr is index.passage_mention_indptr  # cached
    assert len(indptr) == index.n_passages + 1 and indptr[-1] == index.n_mentions
    for p in range(index.n_passages):
        assert (index.mentions[indptr[p] : indptr[p + 1], 1] == p).all()
    incidence = index.mention_incidence.toarray()
    want = np.zeros((index.n_entities, index.n_passages))
    want[index.mentions[:, 0], index.mentions[:, 1]] = 1
    assert np.array_equal(incidence, want)


def test_index_expand_rejects_bad_entity_ids(index):
    with pytest.raises(IndexError):
        index.expand([index.n_entities], [1.0])
    with pytest.raises(IndexError):
        index.expand([-1], [1.0])
    mentions, values = index.expand([], [])
    assert len(mentions) == len(values) == 0


@pytest.mark.parametrize("seed", range(5))
def test_a_indptr_in_chunks_counts_each_rows_mentions(seed):
    """A's row lengths (the mentions of each entity's EP passages), read in chunks of EP entries of any size,
    against a loop; empty rows first, in between and last included."""
    rng = np.random.default_rng(seed)
    n_passages, n_entities = 12, 9
    per_passage = rng.integers(0, 4, n_passages)
    mention_indptr = np.concatenate(([0], np.cumsum(per_passage)))
    lengths = rng.integers(0, 4, n_entities)
    lengths[[0, n_entities // 2, -1]] = 0
    ep_indptr = np.concatenate(([0], np.cumsum(lengths)))
    ep = np.concatenate([np.sort(rng.choice(n_passages, k, replace=False)) for k in lengths]).astype(np.int32)
    want = np.concatenate(([0], np.cumsum([per_passage[ep[ep_indptr[e]:ep_indptr[e + 1]]].sum()
                                           for e in range(n_entities)])))
    for chunk in (1, 2, 3, 5, 1 << 22):
        assert np.array_equal(a_indptr(ep_indptr, ep, mention_indptr, chunk=chunk), want), chunk
    assert np.array_equal(a_indptr(np.zeros(4, np.int64), np.zeros(0, np.int32), mention_indptr), np.zeros(4))
