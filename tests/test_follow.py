"""The textual follow against a dense, loop-by-loop implementation of equation 5, and its gradients."""

import dataclasses

import numpy as np
import pytest
import torch
from follow_reference import cancelling_graph, dense_follow_reference, exact_search, random_graph, random_z, weighted

from drkit.reason.entity_set import EntitySet, entity_set_mean
from drkit.reason.expansion import PassageWeights
from drkit.reason.follow import FollowConfig, follow

CONFIGS = [
    FollowConfig(top_k=10, temperature=4.0, tfidf_power=0.0, self_loops=True, retrieval="global"),
    FollowConfig(top_k=10, temperature=4.0, tfidf_power=0.0, retrieval="global"),
    FollowConfig(top_k=10, temperature=4.0, retrieval="global"),
    FollowConfig(top_k=30, temperature=1.0, aggregate="sum", tfidf_power=2.5, retrieval="global"),
    FollowConfig(top_k=8, temperature=2.0, tfidf=False),
    FollowConfig(top_k=12, temperature=3.0, aggregate="sum", remove_topic="never", tfidf_power=0.0, retrieval="global"),
    FollowConfig(top_k=4, temperature=4.0),
    FollowConfig(top_k=4, temperature=4.0, min_weight=0.3),
    FollowConfig(top_k=6, temperature=2.0, aggregate="sum", tfidf_power=0.0, self_loops=True, min_weight=0.0),
    FollowConfig(top_k=100, temperature=3.0, remove_topic="never", min_weight=0.0),
]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("config", CONFIGS,
                         ids=lambda c: f"{c.retrieval}-k{c.top_k}-{c.aggregate}-tfidf{c.tfidf}-pow{c.tfidf_power}"
                         f"-rm{c.remove_topic}-self{c.self_loops}-min{c.min_weight}")
def test_follow_matches_dense_reference(seed, config):
    graph, A = random_graph(seed)
    z = random_z(seed, batch=4, n_entities=graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(100 + seed).normal(size=(4, 5)))
    topic = np.array([int(z.ids[z.rows == b][0]) for b in range(4)])
    got = follow(z, q, graph, exact_search(graph), config, topic).to_dense(graph.n_entities)
    want = dense_follow_reference(z.to_dense(graph.n_entities), q, weighted(A, config.tfidf_power), graph.vectors,
                                  graph.mention_entity, config, topic)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert torch.allclose(got.sum(1)[got.sum(1) > 0], torch.ones(1, dtype=got.dtype))


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("config", [CONFIGS[2], CONFIGS[4], CONFIGS[6], CONFIGS[8]],
                         ids=["global", "no-tfidf", "restricted", "restricted-sum-self"])
def test_several_removed_entities_per_row_match_the_dense_reference(seed, config):
    from drkit.reason.follow import not_topic

    graph, A = random_graph(seed)
    z = random_z(seed, batch=4, n_entities=graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(100 + seed).normal(size=(4, 5)))
    rng = np.random.default_rng(seed)
    topic = np.stack([rng.choice(graph.n_entities, 3, replace=False) for _ in range(4)])
    topic[1, 2] = topic[3, 1:] = -1  # padding
    got = follow(z, q, graph, exact_search(graph), config, topic).to_dense(graph.n_entities)
    want = dense_follow_reference(z.to_dense(graph.n_entities), q, weighted(A, config.tfidf_power), graph.vectors,
                                  graph.mention_entity, config, topic)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    for b in range(4):
        assert (got[b, topic[b][topic[b] >= 0]] == 0).all()
    # one entity per row, as a column, is the one-entity removal
    one = topic[:, 0]
    torch.testing.assert_close(follow(z, q, graph, exact_search(graph), config, one[:, None]).to_dense(graph.n_entities),
                               follow(z, q, graph, exact_search(graph), config, one).to_dense(graph.n_entities))
    entities, rows = np.array([5, 1, 0, 2]), np.array([0, 1, 3, 3])
    assert not_topic(entities, rows, np.array([[5, -1], [0, 1], [2, 2], [-1, -1]])).tolist() == [False, False, True, True]


def test_question_entity_is_removed():
    graph, A = random_graph(1)
    z = EntitySet.one_hot([0, 1, 2])
    z.probs = z.probs.double()
    q = torch.from_numpy(np.random.default_rng(0).normal(size=(3, 5)))
    config = FollowConfig(top_k=30, tfidf=False)
    kept = follow(z, q, graph, exact_search(graph), dataclasses.replace(config, remove_topic="never"), np.array([0, 1, 2]))
    removed = follow(z, q, graph, exact_search(graph), config, np.array([0, 1, 2]))
    dense_kept, dense_removed = kept.to_dense(graph.n_entities), removed.to_dense(graph.n_entities)
    for b in range(3):
        assert dense_removed[b, b] == 0
        if b in set(graph.mention_entity):  # the entity is mentioned, so without removal it is an answer
            assert dense_kept[b, b] > 0
    assert (dense_kept > 0).sum() > (dense_removed > 0).sum()


@pytest.mark.parametrize("seed", range(4))
def test_max_and_sum_aggregation(seed):
    """An entity's logit is the max (aggregate="max") or the log-sum-exp ("sum") of its surviving mentions'
    logits, then a softmax over the row: checked entity by entity from the trace, and against the dense
    reference, on data where entities have several mentions, so the two aggregations differ."""
    graph, A = random_graph(seed, n_mentions=40)
    z = random_z(seed, 2, graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(seed).normal(size=(2, 5)))
    out = {}
    for aggregate in ("max", "sum"):
        config = FollowConfig(top_k=40, aggregate=aggregate, min_weight=0.0)
        got, tr = follow(z, q, graph, exact_search(graph), config, trace=True)
        entity_logit = np.array([np.max(tr.logits[tr.slot == s]) if aggregate == "max" else
                                 np.logaddexp.reduce(tr.logits[tr.slot == s]) for s in range(len(got))])
        rows = got.rows.numpy()
        normaliser = np.array([np.logaddexp.reduce(entity_logit[rows == r]) for r in range(2)])
        np.testing.assert_allclose(got.probs.numpy(), np.exp(entity_logit - normaliser[rows]), rtol=1e-5)  # float32 trace
        want = dense_follow_reference(z.to_dense(graph.n_entities), q, weighted(A, config.tfidf_power), graph.vectors,
                                      graph.mention_entity, config)
        torch.testing.assert_close(got.to_dense(graph.n_entities), want, rtol=1e-10, atol=1e-12)
        out[aggregate] = got
        assert (np.bincount(tr.slot) > 1).any()  # some entity has several mentions
    assert torch.equal(out["max"].ids, out["sum"].ids)
    assert not torch.allclose(out["max"].probs, out["sum"].probs)


def test_follow_gradcheck():
    graph, _ = random_graph(5)
    search = exact_search(graph)
    z0 = random_z(5, 3, graph.n_entities)
    topic = np.array([0, 1, 2])
    table = torch.from_numpy(np.random.default_rng(2).normal(size=(graph.n_entities, 5)))
    for config in (FollowConfig(top_k=20, temperature=2.0, retrieval="global"), FollowConfig(top_k=20, aggregate="sum"),
                   FollowConfig(top_k=5, temperature=2.0)):
        def fn(q, probs, power):
            z = EntitySet(z0.rows, z0.ids, probs, 3)
            z1 = follow(z, q + 0.1 * entity_set_mean(z, table), graph, search, config, topic, tfidf_power=power)
            return z1.probs

        q = torch.from_numpy(np.random.default_rng(3).normal(size=(3, 5))).requires_grad_()
        probs = z0.probs.clone().requires_grad_()
        power = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
        assert torch.autograd.gradcheck(fn, (q, probs, power), eps=1e-6, atol=1e-6)


def test_two_hops_gradcheck():
    graph, _ = random_graph(8, n_mentions=40)
    search = exact_search(graph)
    config = FollowConfig(top_k=25, temperature=2.0)
    topic = np.array([0, 3])
    assert config.retrieval == "restricted"

    def fn(q1, q2):
        z = EntitySet(torch.tensor([0, 1]), torch.tensor([0, 3]), torch.ones(2, dtype=torch.float64), 2)
        z1 = follow(z, q1, graph, search, config, topic)
        return follow(z1, q2, graph, search, config, topic).probs

    rng = np.random.default_rng(4)
    q1 = torch.from_numpy(rng.normal(size=(2, 5))).requires_grad_()
    q2 = torch.from_numpy(rng.normal(size=(2, 5))).requires_grad_()
    out = fn(q1, q2)
    assert len(out) > 0
    assert torch.autograd.gradcheck(fn, (q1, q2), eps=1e-6, atol=1e-6)


def test_passage_weights_dense_and_sparse_paths_agree(monkeypatch):
    import drkit.reason.expansion as expansion_module

    graph, A = random_graph(2)
    z = random_z(2, 4, graph.n_entities)
    rows = np.repeat(np.arange(4), graph.n_passages)
    passages = np.tile(np.arange(graph.n_passages), 4)
    dense = PassageWeights(z, graph, FollowConfig().tfidf_power)
    monkeypatch.setattr(expansion_module, "_DENSE_LIMIT", 0)
    sparse = PassageWeights(z, graph, FollowConfig().tfidf_power)
    assert dense.dense and not sparse.dense
    (p1, w1), (p2, w2) = dense.lookup(rows, passages), sparse.lookup(rows, passages)
    assert np.array_equal(p1, p2)
    # the same sums in the same order, bit for bit: a batch too large for the dense vector scores as a small one
    assert torch.equal(w1, w2)
    # and both equal Z^T A read at any mention of the passage
    expansion = z.to_dense(graph.n_entities) @ weighted(A, FollowConfig().tfidf_power)
    for i, (r, p, present) in enumerate(zip(rows, passages, p1)):
        ms = np.flatnonzero(graph.mention_passage == p)
        if len(ms):
            assert (expansion[r, ms[0]] > 0) == present
            if present:
                assert torch.isclose(w1[int(p1[:i].sum())], expansion[r, ms[0]])


def test_entity_set_top_and_row():
    z = EntitySet(torch.tensor([0, 0, 0, 2]), torch.tensor([1, 4, 7, 3]), torch.tensor([0.2, 0.5, 0.3, 1.0]), 3)
    ids, probs = z.top(2)
    assert ids.tolist() == [[4, 7], [-1, -1], [3, -1]]
    assert np.allclose(probs, [[0.5, 0.3], [0, 0], [1.0, 0]])
    assert z.row(0)[0].tolist() == [4, 7, 1]


def test_follow_config_is_checked():
    from drkit.errors import ConfigError

    for bad in ({"top_k": 0}, {"temperature": 0.0}, {"aggregate": "mean"}, {"tfidf_power": -1.0},
                {"min_weight": -0.1}, {"min_weight": 1.5}):
        with pytest.raises(ConfigError):
            FollowConfig(**bad)


@pytest.mark.parametrize("dense_limit", [None, 0])
def test_passage_weights_without_self_loops(monkeypatch, dense_limit):
    """lookup(..., entities) equals Z^T A with A's self-loops (A[e, m] for m a mention of e) set to 0."""
    import drkit.reason.expansion as expansion_module

    if dense_limit is not None:
        monkeypatch.setattr(expansion_module, "_DENSE_LIMIT", dense_limit)
    graph, A_rel = random_graph(4, n_mentions=40)
    A = weighted(A_rel, 2.0)
    A[torch.as_tensor(graph.mention_entity), torch.arange(A.shape[1])] = 0
    z = random_z(4, 3, graph.n_entities)
    rows = np.repeat(np.arange(3), len(graph.mention_entity))
    mentions = np.tile(np.arange(len(graph.mention_entity)), 3)
    present, w = PassageWeights(z, graph, 2.0).lookup(rows, graph.mention_passage[mentions], graph.mention_entity[mentions])
    want = (z.to_dense(graph.n_entities) @ A)[rows, mentions]
    assert np.array_equal(present, (want > 0).numpy())
    torch.testing.assert_close(w, want[torch.from_numpy(present)])


def test_no_self_loops_blocks_copying():
    """An entity set cannot reach its own entity's mentions: Z_1 = {e} never gives e again at hop 2,
    while the paper's A (self_loops) does."""
    graph, _ = random_graph(6, n_mentions=40)
    e = int(np.bincount(graph.mention_entity).argmax())
    z = EntitySet(torch.tensor([0]), torch.tensor([e]), torch.ones(1, dtype=torch.float64), 1)
    q = torch.from_numpy(graph.vectors[graph.mention_entity == e][0].numpy()[None])  # a query that likes e's mention
    config = FollowConfig(top_k=40, remove_topic="never")
    with_self = follow(z, q, graph, exact_search(graph), dataclasses.replace(config, self_loops=True)).to_dense(graph.n_entities)
    without = follow(z, q, graph, exact_search(graph), config).to_dense(graph.n_entities)
    assert with_self[0, e] > 0 and without[0, e] == 0


@pytest.mark.parametrize("dtype, score", [(torch.float64, None), (torch.float32, torch.bfloat16),
                                          (torch.float32, torch.float32)])
def test_pair_scores_are_dot_products(dtype, score):
    """float64: the exact dot product; float32 queries scored in bf16 (the score dtype where bf16 is native):
    that of the bf16-rounded vectors, rounded to bf16; in float32 (elsewhere): the float32 dot product."""
    graph, _ = random_graph(9, n_mentions=50, dim=16, dtype=torch.float16 if dtype == torch.float32 else dtype)
    graph.score_dtype = score or graph.score_dtype
    rng = np.random.default_rng(0)
    q = torch.from_numpy(rng.normal(size=(3, 16))).to(dtype)
    rows, mentions = rng.integers(0, 3, 40), rng.integers(0, 50, 40)
    got = graph.pair_scores(q, rows, mentions, chunk=7)
    assert got.dtype == (np.float64 if dtype == torch.float64 else np.float32)
    if dtype == torch.float64:
        want = (graph.vectors[mentions] * q[rows]).sum(-1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12)
    elif score == torch.float32:
        want = (graph.vectors.double()[mentions] * q.double()[rows]).sum(-1).numpy()
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        terms = graph.vectors.bfloat16().double()[mentions] * q.bfloat16().double()[rows]  # (40, 16), exact
        want = terms.sum(-1).numpy()
        assert np.array_equal(torch.from_numpy(got).bfloat16().float().numpy(), got)  # a bf16 value
        assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + 1e-6 * terms.abs().sum(-1).numpy())


@pytest.mark.parametrize("score", [torch.float32, torch.bfloat16])
def test_a_row_alone_scores_as_among_others(score):
    """A chunk of one row's pairs (a question alone) multiplies by its query broadcast, a mixed chunk by the
    gathered rows: the same products and sums, bit for bit, with random vectors and queries."""
    graph, _ = random_graph(9, n_mentions=300, dim=64, dtype=torch.float16)
    graph.score_dtype = score
    rng = np.random.default_rng(4)
    q = torch.from_numpy(rng.normal(size=(5, 64))).float()
    rows, mentions = rng.integers(0, 5, 900), rng.integers(0, 300, 900)
    mixed = graph.pair_scores(q, rows, mentions, chunk=64)
    for b in range(5):
        at = rows == b
        alone = graph.pair_scores(q[b : b + 1], np.zeros(at.sum(), np.int64), mentions[at], chunk=64)
        assert np.array_equal(alone, mixed[at])
        same_row = graph.pair_scores(q, rows[at], mentions[at], chunk=64)  # one row of a batch: broadcast too
        assert np.array_equal(same_row, mixed[at])


# -- a question gets the same scores alone and in any batch ------------------------------------------

def test_pair_scores_depend_on_the_pair_only():
    """A pair's score is the same computed alone, in a large batch, in another order or among other pairs."""
    graph = cancelling_graph()
    batch, n_mentions = 8, len(graph.mention_entity)
    q = torch.ones(batch, 64) * torch.tensor([2.0 ** (b % 3 - 1) for b in range(batch)])[:, None]  # (batch, p)
    rows = np.repeat(np.arange(batch), n_mentions)
    mentions = np.tile(np.arange(n_mentions), batch)
    together = graph.pair_scores(q, rows, mentions)  # every (row, mention) pair: a dense batch
    for b in (0, 5):
        alone = graph.pair_scores(q[b : b + 1], np.zeros(n_mentions, np.int64), np.arange(n_mentions))
        assert np.array_equal(alone, together[rows == b])
    few = np.random.default_rng(1).permutation(len(rows))[:50]
    assert np.array_equal(graph.pair_scores(q, rows[few], mentions[few]), together[few])
    assert np.array_equal(graph.pair_scores(q, rows[few], mentions[few], chunk=7), together[few])
    for i in few[:5]:
        assert graph.pair_scores(q, rows[i : i + 1], mentions[i : i + 1]) == together[i]
    # and each is a bf16-rounded float32 dot product of the bf16-rounded vectors (the sums are
    # inexact here by design, so only to within the cancelled terms' rounding)
    exact = (graph.vectors.double()[mentions] * q.double()[rows]).sum(-1).numpy()
    assert np.abs(together - exact).max() < 64


@pytest.mark.parametrize("retrieval", ["restricted", "global"])
def test_a_question_gets_the_same_answer_alone_and_in_a_batch(retrieval):
    """Row 0 (a large Z_{t-1}, every mention co-occurs with it) alone and in a batch of 64 whose other
    rows each reach one passage: the same entities, probabilities and mention logits, bit for bit."""
    graph = cancelling_graph()
    batch = 64
    rows = np.concatenate([np.zeros(10, np.int64), np.arange(1, batch)])
    ids = np.concatenate([np.arange(10), 10 + np.arange(batch - 1) % 50])
    probs = np.concatenate([np.full(10, 0.1), np.ones(batch - 1)]).astype(np.float32)
    z = EntitySet(torch.from_numpy(rows), torch.from_numpy(ids), torch.from_numpy(probs), batch)
    z0 = EntitySet(torch.zeros(10, dtype=torch.int64), torch.arange(10), torch.full((10,), 0.1), 1)
    q = torch.ones(batch, 64) * torch.tensor([2.0 ** (b % 3 - 1) for b in range(batch)])[:, None]
    topic = np.concatenate([[-1], ids[10:]])
    config = FollowConfig(top_k=1000, min_weight=0.0, retrieval=retrieval)

    def search(queries, k):  # exact MIPS whose scores are pair_scores' (so both retrievals are compared)
        n = len(graph.mention_entity)
        r = np.repeat(np.arange(len(queries)), n)
        s = graph.pair_scores(torch.from_numpy(queries), r, np.tile(np.arange(n), len(queries))).reshape(len(queries), n)
        order = np.lexsort((np.broadcast_to(np.arange(n), s.shape), -s), axis=1)[:, :k]
        return np.take_along_axis(s, order, 1), order

    together, tr = follow(z, q, graph, search, config, topic, trace=True)
    alone, tr0 = follow(z0, q[:1], graph, search, config, topic[:1], trace=True)
    assert len(alone) > 20
    for got, want in zip(together.row(0), alone.row(0)):
        assert np.array_equal(got, want)
    assert np.array_equal(tr.mentions[tr.rows == 0], tr0.mentions)
    assert np.array_equal(tr.logits[tr.rows == 0], tr0.logits)


def test_keyed_sums_follow_the_keys_not_the_space():
    """A space of batch x passages far larger than the terms summed (a big corpus, a small Z) is not
    allocated: the sums live in the sorted distinct keys, and equal a plain dictionary's."""
    from drkit.reason.expansion import _KeyedSums

    rng = np.random.default_rng(0)
    keys = rng.integers(0, 10**12, 500)
    keys[::7] = keys[0]  # repeated keys
    values = torch.from_numpy(rng.random(500))
    big = _KeyedSums()
    big._sum(keys, values, 10**12)
    assert not big.dense and len(big.weights) == len(np.unique(keys))
    want: dict[int, float] = {}
    for k, v in zip(keys.tolist(), values.tolist()):
        want[k] = want.get(k, 0.0) + v
    got_keys, got = big.entries()
    assert got_keys.tolist() == sorted(want)
    torch.testing.assert_close(got, torch.tensor([want[k] for k in sorted(want)], dtype=torch.float64))
    small = _KeyedSums()
    small._sum(keys % 1000, values, 1000)
    assert small.dense


def test_find_entries_and_log_rel_against_whole_arrays():
    """What a hop reads of EP, computed for the entries asked about only, equals the whole-array lookups:
    the position of (entity, passage) in EP and log(score / the entity's best score)."""
    graph, _ = random_graph(9, n_mentions=60)
    keys = graph.entity_passage_keys
    rng = np.random.default_rng(0)
    entities = rng.integers(0, graph.n_entities, 300)
    passages = rng.integers(0, graph.n_passages, 300)
    pos, found = graph.find_entries(entities, passages)
    want = np.minimum(np.searchsorted(keys, entities * graph.n_passages + passages), len(keys) - 1)
    want_found = keys[want] == entities * graph.n_passages + passages
    assert want_found.any() and not want_found.all()
    assert np.array_equal(found, want_found) and np.array_equal(pos[found], want[want_found])
    whole = graph.entity_passage_log_rel
    assert torch.equal(graph.log_rel(pos[found]), whole[torch.from_numpy(pos[found])])
    owner = np.repeat(np.arange(graph.n_entities), np.diff(graph.entity_passage_indptr))
    for e in np.unique(owner):  # the best entry of each entity has log_rel 0, the others below
        assert whole[owner == e].max() == 0.0 and (whole[owner == e] <= 0).all()


def test_restricted_scores_read_the_memory_map_without_a_whole_copy(tmp_path):
    """Scoring given pairs from an fp16 memory map (restricted retrieval) reads only those rows: no copy of
    f(M) is made, and the scores equal, bit for bit, those computed from the whole bf16 copy."""
    graph, _ = random_graph(4, n_entities=9, n_passages=8, n_mentions=80, dim=16, dtype=torch.float16)
    path = tmp_path / "vectors.npy"
    np.save(path, graph.vectors.numpy())
    mapped = np.load(path, mmap_mode="r")
    graph.vectors = mapped
    rng = np.random.default_rng(3)
    q = torch.from_numpy(rng.normal(size=(4, 16))).float()
    rows, mentions = rng.integers(0, 4, 200), rng.integers(0, 80, 200)
    from_map = graph.pair_scores(q, rows, mentions, chunk=9)
    assert graph._cast == {}  # nothing whole was made
    assert torch.equal(graph.rows_as(mentions, torch.bfloat16),
                       torch.from_numpy(np.asarray(mapped[mentions], dtype=np.float32)).bfloat16())
    graph.vectors_as(torch.bfloat16)  # as global exact MIPS makes it
    assert np.array_equal(graph.pair_scores(q, rows, mentions, chunk=9), from_map)
    q64 = q.double()
    graph._cast.clear()
    from_map64 = graph.pair_scores(q64, rows, mentions)
    np.testing.assert_allclose(from_map64, (torch.from_numpy(mapped[mentions].astype(np.float64)) * q64[rows]).sum(-1)
                               .numpy(), rtol=1e-12)


@pytest.mark.parametrize("power", [0.0, 1.7])
def test_own_terms_come_off_exactly(power):
    """`lookup` with entities leaves out each entity's own term: equal, to float64 rounding, to the weights of
    a Z without that entity at that row, summed again from scratch."""
    graph, _ = random_graph(11, n_entities=12, n_passages=9, n_mentions=70, mu=4)
    z = random_z(5, 3, 12)
    w = PassageWeights(z, graph, power)
    rng = np.random.default_rng(2)
    rows, passages = rng.integers(0, 3, 400), rng.integers(0, 9, 400)
    entities = rng.integers(0, 12, 400)
    pick = rng.integers(0, len(z.ids), 200)  # half the pairs: an entity of Z at its row, and one of its passages
    rows[:200], entities[:200] = z.rows.numpy()[pick], z.ids.numpy()[pick]
    present, got = w.lookup(rows, passages, entities)
    own = 0
    for i in range(400):
        keep = ~((z.rows == rows[i]) & (z.ids == entities[i]))
        ep = graph.entity_passage[graph.entity_passage_indptr[entities[i]] : graph.entity_passage_indptr[entities[i] + 1]]
        own += int((~keep).any() and passages[i] in ep)
        alone = EntitySet(z.rows[keep], z.ids[keep], z.probs[keep], z.batch_size)
        p, v = PassageWeights(alone, graph, power).lookup(rows[i : i + 1], passages[i : i + 1])
        assert p[0] == present[i]
        if p[0]:
            torch.testing.assert_close(v[0], got[int(present[: i + 1].sum()) - 1], rtol=1e-12, atol=1e-15)
    assert own > 10  # pairs whose own term was there to leave out


def test_top_is_the_lexsort_ranking_with_ties_and_any_input():
    """`EntitySet.top` against the plain lexsort ranking (row, probability down, id up): sets sorted by (row, id)
    with tied probabilities and rows left empty (its fast path), and unsorted or NaN input (the lexsort path)."""
    def reference(z, k):
        ids = np.full((z.batch_size, k), -1)
        probs = np.zeros((z.batch_size, k), dtype=np.float32)
        r, e, p = z.rows.numpy(), z.ids.numpy(), z.probs.float().numpy()
        for b in range(z.batch_size):
            row = sorted(((-p[i], e[i]) for i in np.flatnonzero(r == b)), key=lambda x: (x[0], x[1]))[:k]
            for j, (negp, ent) in enumerate(row):
                ids[b, j], probs[b, j] = ent, -negp
        return ids, probs

    rng = np.random.default_rng(0)
    for trial in range(60):
        batch, n = int(rng.integers(1, 6)), int(rng.integers(0, 40))
        keys = np.unique(rng.integers(0, batch * 30, n))
        rows, ids = keys // 30, keys % 30
        probs = np.round(rng.random(len(keys)), 1).astype(np.float32)  # ties
        if trial % 3 == 1:  # not sorted by (row, id): the lexsort path
            perm = rng.permutation(len(keys))
            rows, ids, probs = rows[perm], ids[perm], probs[perm]
        if trial % 3 == 2 and len(probs):
            probs[0] = np.nan
        z = EntitySet(torch.from_numpy(rows), torch.from_numpy(ids), torch.from_numpy(probs), batch)
        other = np.ones(batch, dtype=bool)
        if trial % 3 == 2 and len(probs):
            other[rows[0]] = False  # where a NaN ranks is the lexsort's business; every other row must agree
        for k in (1, 3, 50):
            got, want = z.top(k), reference(z, k)
            np.testing.assert_array_equal(got[0][other], want[0][other])
            np.testing.assert_array_equal(got[1][other], want[1][other])
