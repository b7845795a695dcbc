"""The textual follow against a dense, loop-by-loop implementation of equation 5, and its gradients."""

import dataclasses

import numpy as np
import pytest
import torch
from follow_reference import dense_follow_reference

from drkit.reason.entity_set import EntitySet, entity_set_mean
from drkit.reason.expansion import PassageWeights
from drkit.reason.follow import FollowConfig, follow
from drkit.reason.graph import FollowGraph


def random_graph(seed, n_entities=7, n_passages=6, n_mentions=30, dim=5, mu=3, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    ep = [np.sort(rng.choice(n_passages, size=rng.integers(0, mu + 1), replace=False)) for _ in range(n_entities)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in ep])])
    mention_passage = np.sort(rng.integers(0, n_passages, n_mentions))
    mention_entity = rng.integers(0, n_entities, n_mentions)
    vectors = torch.from_numpy(rng.normal(size=(n_mentions, dim))).to(dtype)
    graph = FollowGraph(indptr, np.concatenate(ep + [np.zeros(0, np.int64)]), mention_passage, mention_entity,
                        n_entities, n_passages, vectors)
    scores = [rng.random(len(r)) + 0.05 for r in ep]
    graph.set_passage_scores(np.concatenate(scores + [np.zeros(0)]))
    # A_rel[e, m] = score(e, passage of m) / e's best score where m's passage is one of e's, else 0
    A_rel = torch.zeros(n_entities, n_mentions, dtype=dtype)
    for e, (row, sc) in enumerate(zip(ep, scores)):
        for p, v in zip(row, sc):
            A_rel[e, mention_passage == p] = float(v / sc.max())
    return graph, A_rel


def weighted(A_rel, power):
    """A as the follow uses it: 0/1 for power 0, else the relative score to the power."""
    return torch.where(A_rel > 0, A_rel ** power, torch.zeros_like(A_rel))


def exact_search(graph):
    """Exact MIPS in float64: the reference search (ties broken by mention id)."""
    def search(q, k):
        scores = np.asarray(q, dtype=np.float64) @ graph.vectors.double().numpy().T
        order = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)[:, :k]
        return np.take_along_axis(scores, order, 1), order
    return search


def random_z(seed, batch, n_entities, dtype=torch.float64):
    rng = np.random.default_rng(seed)
    rows, ids, probs = [], [], []
    for b in range(batch):
        e = np.sort(rng.choice(n_entities, size=rng.integers(1, 4), replace=False))
        p = rng.random(len(e)) + 0.1
        rows += [b] * len(e)
        ids += list(e)
        probs += list(p / p.sum())
    return EntitySet(torch.tensor(rows), torch.tensor(ids), torch.tensor(probs, dtype=dtype), batch)


CONFIGS = [
    FollowConfig(top_k=10, temperature=4.0, tfidf_power=0.0, self_loops=True, retrieval="global"),
    FollowConfig(top_k=10, temperature=4.0, tfidf_power=0.0, retrieval="global"),
    FollowConfig(top_k=10, temperature=4.0, retrieval="global"),
    FollowConfig(top_k=30, temperature=1.0, aggregate="sum", tfidf_power=2.5, retrieval="global"),
    FollowConfig(top_k=8, temperature=2.0, tfidf=False),
    FollowConfig(top_k=12, temperature=3.0, aggregate="sum", remove_topic=False, tfidf_power=0.0, retrieval="global"),
    FollowConfig(top_k=4, temperature=4.0),
    FollowConfig(top_k=4, temperature=4.0, min_weight=0.3),
    FollowConfig(top_k=6, temperature=2.0, aggregate="sum", tfidf_power=0.0, self_loops=True, min_weight=0.0),
    FollowConfig(top_k=100, temperature=3.0, remove_topic=False, min_weight=0.0),
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


def test_question_entity_is_removed():
    graph, A = random_graph(1)
    z = EntitySet.one_hot([0, 1, 2])
    z.probs = z.probs.double()
    q = torch.from_numpy(np.random.default_rng(0).normal(size=(3, 5)))
    config = FollowConfig(top_k=30, tfidf=False)
    kept = follow(z, q, graph, exact_search(graph), dataclasses.replace(config, remove_topic=False), np.array([0, 1, 2]))
    removed = follow(z, q, graph, exact_search(graph), config, np.array([0, 1, 2]))
    dense_kept, dense_removed = kept.to_dense(graph.n_entities), removed.to_dense(graph.n_entities)
    for b in range(3):
        assert dense_removed[b, b] == 0
        if b in set(graph.mention_entity):  # the entity is mentioned, so without removal it is an answer
            assert dense_kept[b, b] > 0
    assert (dense_kept > 0).sum() > (dense_removed > 0).sum()


def test_max_and_sum_aggregation():
    """Sum (log-sum-exp of mention logits) is at least max for every entity, equal where it has one mention."""
    graph, _ = random_graph(3, n_mentions=40)
    z = random_z(3, 2, graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(1).normal(size=(2, 5)))
    search = exact_search(graph)
    out_max, tr_max = follow(z, q, graph, search, FollowConfig(top_k=40), trace=True)
    out_sum, tr_sum = follow(z, q, graph, search, FollowConfig(top_k=40, aggregate="sum"), trace=True)
    assert torch.equal(out_max.ids, out_sum.ids)
    # un-normalised entity logits: log-prob + the row's log-normaliser; compare via the mentions per slot
    n_per_slot = np.bincount(tr_max.slot, minlength=len(out_max))
    for s in range(len(out_max)):
        lm = tr_max.logits[tr_max.slot == s]
        lse = np.log(np.exp(lm - lm.max()).sum()) + lm.max()
        assert lse >= lm.max() - 1e-12
        assert (n_per_slot[s] == 1) == np.isclose(lse, lm.max())
    assert not torch.allclose(out_max.probs, out_sum.probs)


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
    torch.testing.assert_close(w1, w2)
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
    config = FollowConfig(top_k=40, remove_topic=False)
    with_self = follow(z, q, graph, exact_search(graph), dataclasses.replace(config, self_loops=True)).to_dense(graph.n_entities)
    without = follow(z, q, graph, exact_search(graph), config).to_dense(graph.n_entities)
    assert with_self[0, e] > 0 and without[0, e] == 0


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_pair_scores_gather_and_dense_paths_agree(dtype):
    graph, _ = random_graph(9, n_mentions=50, dim=16, dtype=torch.float16 if dtype == torch.float32 else dtype)
    rng = np.random.default_rng(0)
    q = torch.from_numpy(rng.normal(size=(3, 16))).to(dtype)
    rows, mentions = rng.integers(0, 3, 40), rng.integers(0, 50, 40)
    gathered = graph.pair_scores(q, rows, mentions, dense=False, chunk=7)
    dense = graph.pair_scores(q, rows, mentions, dense=True)
    want = (graph.vectors.double()[mentions] * q.double()[rows]).sum(-1).numpy()
    if dtype == torch.float64:
        np.testing.assert_allclose(gathered, want, rtol=1e-12)
        np.testing.assert_allclose(dense, want, rtol=1e-12)
    else:  # bf16 inputs, as exact MIPS: both paths within bf16 rounding of the exact score
        np.testing.assert_allclose(gathered, dense, rtol=1e-2, atol=1e-2)
        np.testing.assert_allclose(gathered, want, rtol=3e-2, atol=5e-2)
