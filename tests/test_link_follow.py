"""The follow over the link graph (the paper's HotpotQA A_link[e, m] = L[e, entity(m)], section 3.3) and over
the sum of the TF-IDF and link adjacencies, against the dense loop-by-loop reference, with gradients."""

import dataclasses
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from follow_reference import (
    cancelling_graph,
    dense_follow_reference,
    exact_search,
    gradcheck_follow,
    link_arrays,
    random_graph,
    random_z,
    weighted,
)

from drkit.errors import ArtifactError, ConfigError
from drkit.reason.entity_set import EntitySet
from drkit.reason.expansion import EntityWeights, Expansion
from drkit.reason.follow import FollowConfig, follow
from drkit.reason.graph import FollowGraph

SIZES = {"n_entities": 12, "n_passages": 8, "n_mentions": 30}

CONFIGS = [
    FollowConfig(top_k=10, adjacency="links", retrieval="global"),
    FollowConfig(top_k=10, adjacency="links", retrieval="global", self_loops=True, aggregate="sum"),
    FollowConfig(top_k=30, adjacency="both", retrieval="global", tfidf_power=2.5, aggregate="sum"),
    FollowConfig(top_k=10, adjacency="both", retrieval="global", tfidf_power=0.0, self_loops=True, remove_topic="never"),
    FollowConfig(top_k=4, adjacency="links"),
    FollowConfig(top_k=6, adjacency="links", min_weight=0.5, aggregate="sum"),
    FollowConfig(top_k=100, adjacency="links", min_weight=0.0, self_loops=True, remove_topic="never"),
    FollowConfig(top_k=5, adjacency="both"),
    FollowConfig(top_k=8, adjacency="both", min_weight=0.3, aggregate="sum"),
    FollowConfig(top_k=12, adjacency="both", min_weight=0.6, tfidf_power=1.0),
    FollowConfig(top_k=100, adjacency="both", min_weight=0.0, tfidf_power=0.0, self_loops=True),
    FollowConfig(top_k=8, adjacency="links", tfidf=False),
]


def reference(graph, A_rel, L, z, q, config, topic=None):
    return dense_follow_reference(z.to_dense(graph.n_entities), q, weighted(A_rel, config.tfidf_power), graph.vectors,
                                  graph.mention_entity, config, topic, L=L)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.adjacency}-{c.retrieval}-k{c.top_k}-{c.aggregate}"
                         f"-tfidf{c.tfidf}-pow{c.tfidf_power}-rm{c.remove_topic}-self{c.self_loops}-min{c.min_weight}")
def test_link_follow_matches_dense_reference(seed, config):
    graph, A_rel, L = random_graph(seed, links=True, **SIZES)
    z = random_z(seed, batch=4, n_entities=graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(100 + seed).normal(size=(4, 5)))
    topic = np.array([int(z.ids[z.rows == b][0]) for b in range(4)])
    got = follow(z, q, graph, exact_search(graph), config, topic).to_dense(graph.n_entities)
    want = reference(graph, A_rel, L, z, q, config, topic)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    assert torch.allclose(got.sum(1)[got.sum(1) > 0], torch.ones(1, dtype=got.dtype))


def test_the_adjacencies_differ():
    """links, both and tfidf give different Z_1 on the same data, and the reference tells them apart (a
    follow that ignored `adjacency` would fail the reference test above)."""
    graph, A_rel, L = random_graph(3, links=True, **SIZES)
    z = random_z(3, 4, graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(7).normal(size=(4, 5)))
    out = {a: follow(z, q, graph, exact_search(graph), FollowConfig(top_k=30, adjacency=a, min_weight=0.0))
           .to_dense(graph.n_entities) for a in ("tfidf", "links", "both")}
    assert not torch.allclose(out["tfidf"], out["links"])
    assert not torch.allclose(out["links"], out["both"])
    assert not torch.allclose(out["tfidf"], out["both"])


def test_min_weight_prunes_link_entities():
    """Restricted retrieval with min_weight skips the entities x with u[x] below the fraction of the row's
    largest u: here it changes the answer, and the reference (which prunes per entity) agrees."""
    changed = 0
    for seed in range(6):
        graph, A_rel, L = random_graph(seed, links=True, **SIZES)
        z = random_z(seed, 4, graph.n_entities)
        q = torch.from_numpy(np.random.default_rng(seed).normal(size=(4, 5)))
        pruned, kept = (follow(z, q, graph, exact_search(graph), FollowConfig(top_k=100, adjacency="links", min_weight=w))
                        .to_dense(graph.n_entities) for w in (0.7, 0.0))
        changed += not torch.allclose(pruned, kept)
        config = FollowConfig(top_k=100, adjacency="links", min_weight=0.7)
        torch.testing.assert_close(pruned, reference(graph, A_rel, L, z, q, config), rtol=1e-10, atol=1e-12)
    assert changed >= 3


def test_hand_made_link_graph():
    """Pages: passage 0 is a's, 1 is b's, 2 has no title. a mentions b, b mentions c, passage 2 mentions d
    and a. So L links a-b and b-c; d is linked to nothing. From Z = {a}: only b's mentions are reached,
    and with self-loops a's own too; from Z = {d}: nothing."""
    a, b, c, d = 0, 1, 2, 3
    mention_passage = np.array([0, 0, 1, 1, 2, 2])
    mention_entity = np.array([a, b, b, c, d, a])
    L, kw = link_arrays(mention_entity, mention_passage, np.array([a, b, -1]), 4)
    assert kw["entity_link"].tolist() == [b, a, c, b] and kw["entity_link_indptr"].tolist() == [0, 1, 3, 4, 4]
    vectors = torch.eye(6, dtype=torch.float64)  # f(m) . g = g[m]
    graph = FollowGraph(np.zeros(5, np.int64), np.zeros(0, np.int64), mention_passage, mention_entity, 4, 3, vectors, **kw)
    q = torch.tensor([[0.0, 1.0, 2.0, 3.0, 4.0, 0.5]], dtype=torch.float64)
    config = FollowConfig(top_k=10, adjacency="links", temperature=1.0, remove_topic="never")
    z_a = EntitySet(torch.tensor([0]), torch.tensor([a]), torch.ones(1, dtype=torch.float64), 1)
    out, tr = follow(z_a, q, graph, exact_search(graph), config, trace=True)
    assert out.ids.tolist() == [b] and out.probs.tolist() == [1.0]
    assert sorted(tr.mentions.tolist()) == [1, 2]  # b's two mentions, weight u[b] = 1: logits 1 and 2
    np.testing.assert_allclose(sorted(tr.logits.tolist()), [1.0, 2.0])
    with_self = follow(z_a, q, graph, exact_search(graph), dataclasses.replace(config, self_loops=True))
    # a: max(q[0], q[5]) = 0.5, b: max(q[1], q[2]) = 2 (both with weight 1)
    torch.testing.assert_close(with_self.probs, torch.softmax(torch.tensor([0.5, 2.0], dtype=torch.float64), 0))
    assert with_self.ids.tolist() == [a, b]
    z_d = EntitySet(torch.tensor([0]), torch.tensor([d]), torch.ones(1, dtype=torch.float64), 1)
    assert len(follow(z_d, q, graph, exact_search(graph), config)) == 0
    for retrieval in ("global", "restricted"):  # Z = {a: 0.25, c: 0.75}: u[b] = 1, u[a] = u[c] = 0
        z = EntitySet(torch.tensor([0, 0]), torch.tensor([a, c]), torch.tensor([0.25, 0.75], dtype=torch.float64), 1)
        out, tr = follow(z, q, graph, exact_search(graph), dataclasses.replace(config, retrieval=retrieval), trace=True)
        assert out.ids.tolist() == [b] and sorted(tr.mentions.tolist()) == [1, 2]


def test_tfidf_power_weighs_the_tfidf_part_only():
    graph, A_rel, L = random_graph(2, links=True, **SIZES)
    z = random_z(2, 3, graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(1).normal(size=(3, 5)))
    config = FollowConfig(top_k=30, adjacency="links", min_weight=0.0)
    runs = [follow(z, q, graph, exact_search(graph), config, tfidf_power=torch.tensor(p, dtype=torch.float64))
            for p in (0.0, 5.0)]
    assert torch.equal(runs[0].probs, runs[1].probs)
    both = dataclasses.replace(config, adjacency="both")
    runs = [follow(z, q, graph, exact_search(graph), both, tfidf_power=torch.tensor(p, dtype=torch.float64))
            for p in (0.0, 5.0)]
    assert not torch.allclose(runs[0].probs, runs[1].probs)


@pytest.mark.parametrize("adjacency", ["links", "both"])
def test_link_follow_gradcheck(adjacency):
    """Gradients w.r.t. the queries, Z's probabilities and the TF-IDF power, for both retrievals and
    aggregations (the queries also depend on Z, as a hop's query does)."""
    graph, _, _ = random_graph(5, links=True, **SIZES)
    gradcheck_follow(graph, random_z(5, 3, graph.n_entities), adjacency, topic=np.array([0, 1, 2]))


def test_two_link_hops_gradcheck():
    graph, _, _ = random_graph(8, links=True, n_entities=12, n_passages=8, n_mentions=40)
    search = exact_search(graph)
    config = FollowConfig(top_k=25, temperature=2.0, adjacency="links")
    topic = np.array([0, 3])

    def fn(q1, q2):
        z = EntitySet(torch.tensor([0, 1]), torch.tensor([0, 3]), torch.ones(2, dtype=torch.float64), 2)
        z1 = follow(z, q1, graph, search, config, topic)
        return follow(z1, q2, graph, search, config, topic).probs

    rng = np.random.default_rng(4)
    q1 = torch.from_numpy(rng.normal(size=(2, 5))).requires_grad_()
    q2 = torch.from_numpy(rng.normal(size=(2, 5))).requires_grad_()
    assert len(fn(q1, q2)) > 0
    assert torch.autograd.gradcheck(fn, (q1, q2), eps=1e-6, atol=1e-6)


@pytest.mark.parametrize("self_loops", [False, True])
def test_entity_weights_are_z_times_l(monkeypatch, self_loops):
    """EntityWeights.lookup is Z^T L (Z^T (L + I) with self-loops), the dense and sparse paths bit for bit."""
    import drkit.reason.expansion as expansion_module

    graph, _, L = random_graph(4, links=True, **SIZES)
    z = random_z(4, 3, graph.n_entities)
    rows = np.repeat(np.arange(3), graph.n_entities)
    entities = np.tile(np.arange(graph.n_entities), 3)
    dense = EntityWeights(z, graph, self_loops)
    monkeypatch.setattr(expansion_module, "_DENSE_LIMIT", 0)
    sparse = EntityWeights(z, graph, self_loops)
    assert dense.dense and not sparse.dense
    (p1, w1), (p2, w2) = dense.lookup(rows, entities), sparse.lookup(rows, entities)
    assert np.array_equal(p1, p2) and torch.equal(w1, w2)
    want = (z.to_dense(graph.n_entities) @ (L + torch.eye(len(L), dtype=L.dtype) * self_loops))[rows, entities]
    assert np.array_equal(p1, (want > 0).numpy())
    torch.testing.assert_close(w1, want[torch.from_numpy(p1)], rtol=1e-12, atol=0)
    k1, v1 = dense.entries()
    k2, v2 = sparse.entries()
    assert np.array_equal(k1, k2) and torch.equal(v1, v2)


@pytest.mark.parametrize("retrieval", ["restricted", "global"])
def test_dense_and_sparse_expansions_give_the_same_follow(monkeypatch, retrieval):
    import drkit.reason.expansion as expansion_module

    graph, _, _ = random_graph(6, links=True, **SIZES)
    z = random_z(6, 4, graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(6).normal(size=(4, 5)))
    config = FollowConfig(top_k=6, adjacency="both", retrieval=retrieval, min_weight=0.2)
    dense = follow(z, q, graph, exact_search(graph), config)
    monkeypatch.setattr(expansion_module, "_DENSE_LIMIT", 0)
    assert not Expansion(z, graph, "both", 8.0, False).entities.dense
    sparse = follow(z, q, graph, exact_search(graph), config)
    assert torch.equal(dense.ids, sparse.ids) and torch.equal(dense.probs, sparse.probs)


def test_no_self_loops_blocks_copying_through_links():
    """{e} reaches e's own mentions only with self-loops (L has no diagonal)."""
    graph, _, _ = random_graph(6, links=True, n_entities=12, n_passages=8, n_mentions=40)
    counts = np.bincount(graph.mention_entity, minlength=graph.n_entities)
    indptr, linked = graph.entity_link_indptr, graph.entity_link
    e = next(e for e in range(graph.n_entities)
             if counts[e] > 0 and (counts[linked[indptr[e]:indptr[e + 1]]] > 0).any())  # e and a neighbour mentioned
    z = EntitySet(torch.tensor([0]), torch.tensor([e]), torch.ones(1, dtype=torch.float64), 1)
    q = graph.vectors[graph.mention_entity == e][:1].clone()  # a query that likes e's mention
    config = FollowConfig(top_k=40, remove_topic="never", adjacency="links")
    with_self = follow(z, q, graph, exact_search(graph), dataclasses.replace(config, self_loops=True)).to_dense(graph.n_entities)
    without = follow(z, q, graph, exact_search(graph), config).to_dense(graph.n_entities)
    assert with_self[0, e] > 0 and without[0, e] == 0
    assert (without[0] > 0).sum() > 0


@pytest.mark.parametrize("adjacency", ["links", "both"])
@pytest.mark.parametrize("retrieval", ["restricted", "global"])
def test_a_question_gets_the_same_answer_alone_and_in_a_batch(adjacency, retrieval):
    """Row 0 (a large Z_{t-1}) alone and in a batch of 64 whose other rows each hold one entity: the same
    entities, probabilities and mention logits, bit for bit, on vectors whose dot products cancel."""
    graph = cancelling_graph(links=True)
    batch = 64
    rows = np.concatenate([np.zeros(10, np.int64), np.arange(1, batch)])
    ids = np.concatenate([np.arange(10), 10 + np.arange(batch - 1) % 50])
    probs = np.concatenate([np.full(10, 0.1), np.ones(batch - 1)]).astype(np.float32)
    z = EntitySet(torch.from_numpy(rows), torch.from_numpy(ids), torch.from_numpy(probs), batch)
    z0 = EntitySet(torch.zeros(10, dtype=torch.int64), torch.arange(10), torch.full((10,), 0.1), 1)
    q = torch.ones(batch, 64) * torch.tensor([2.0 ** (b % 3 - 1) for b in range(batch)])[:, None]
    topic = np.concatenate([[-1], ids[10:]])
    config = FollowConfig(top_k=1000, min_weight=0.0, retrieval=retrieval, adjacency=adjacency)

    def search(queries, k):  # exact MIPS whose scores are pair_scores'
        n = len(graph.mention_entity)
        r = np.repeat(np.arange(len(queries)), n)
        s = graph.pair_scores(torch.from_numpy(queries), r, np.tile(np.arange(n), len(queries))).reshape(len(queries), n)
        order = np.lexsort((np.broadcast_to(np.arange(n), s.shape), -s), axis=1)[:, :k]
        return np.take_along_axis(s, order, 1), order

    together, tr = follow(z, q, graph, search, config, topic, trace=True)
    alone, tr0 = follow(z0, q[:1], graph, search, config, topic[:1], trace=True)
    assert len(alone) > 20 and len(together) > len(alone)
    for got, want in zip(together.row(0), alone.row(0)):
        assert np.array_equal(got, want)
    assert np.array_equal(tr.mentions[tr.rows == 0], tr0.mentions)
    assert np.array_equal(tr.logits[tr.rows == 0], tr0.logits)


# -- where the link graph comes from -------------------------------------------------------------------

def stand_in_index(graph, kw=None, path="/data/indexes/toy-2wiki"):
    """What FollowGraph.from_index reads of a SparseIndex, with the link arrays `kw` as attributes or none."""
    mentions = np.zeros((len(graph.mention_entity), 6), np.int64)
    mentions[:, 0], mentions[:, 1] = graph.mention_entity, graph.mention_passage
    scores = np.exp(graph.entity_passage_log_rel.numpy())
    return SimpleNamespace(path=path, entity_passage_indptr=graph.entity_passage_indptr, entity_passage=graph.entity_passage,
                           mentions=mentions, n_entities=graph.n_entities, n_passages=graph.n_passages,
                           entity_passage_score=scores, **(kw or {}))


def test_from_index_reads_the_link_graph_when_the_index_has_it():
    graph, _, _ = random_graph(1, links=True, **SIZES)
    L, kw = link_arrays(graph.mention_entity, graph.mention_passage, graph.passage_entity, graph.n_entities)
    loaded = FollowGraph.from_index(stand_in_index(graph, {k: v.astype(np.int32) for k, v in kw.items()}), graph.vectors)
    assert np.array_equal(loaded.entity_link, graph.entity_link) and loaded.entity_link.dtype == np.int64
    assert np.array_equal(loaded.entity_link_indptr, graph.entity_link_indptr)
    assert np.array_equal(loaded.passage_entity, kw["passage_entity"])
    assert np.array_equal(loaded.entity_mentions, kw["entity_mentions"])
    z = random_z(1, 3, graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(0).normal(size=(3, 5)))
    config = FollowConfig(top_k=20, adjacency="both")
    a, b = follow(z, q, graph, None, config), follow(z, q, loaded, None, config)
    assert torch.equal(a.ids, b.ids) and len(a) > 3
    torch.testing.assert_close(a.probs, b.probs)  # the stand-in's TF-IDF scores went through exp(log)


def test_an_index_without_the_link_graph_is_a_clear_error():
    graph, _ = random_graph(1, **SIZES)
    loaded = FollowGraph.from_index(stand_in_index(graph), graph.vectors)
    assert loaded.entity_link is None and loaded.passage_entity is None
    # entity -> mentions is computed from mention -> entity when the index does not have it
    want = [m for e in range(graph.n_entities) for m in range(len(graph.mention_entity)) if graph.mention_entity[m] == e]
    assert loaded.entity_mentions.tolist() == want
    assert np.array_equal(loaded.entity_mention_indptr, np.concatenate([[0], np.cumsum(np.bincount(
        graph.mention_entity, minlength=graph.n_entities))]))
    z = random_z(1, 2, graph.n_entities)
    q = torch.zeros(2, 5, dtype=torch.float64)
    for adjacency in ("links", "both"):
        with pytest.raises(ConfigError, match=f"adjacency='{adjacency}'.*/data/indexes/toy-2wiki"):
            follow(z, q, loaded, exact_search(graph), FollowConfig(adjacency=adjacency))
    follow(z, q, loaded, exact_search(graph), FollowConfig(adjacency="links", tfidf=False))  # no A: no link graph needed
    with pytest.raises(ConfigError, match="adjacency"):
        FollowConfig(adjacency="hyperlinks")


def test_from_index_on_a_built_index(toy_index):
    """A real SparseIndex: the graph has what the index has (getattr, so before and after the index
    grows its link arrays)."""
    index = toy_index
    vectors = torch.zeros(index.n_mentions, 4)
    graph = FollowGraph.from_index(index, vectors)
    for name in ("entity_link_indptr", "entity_link", "passage_entity"):
        have = getattr(index, name, None)
        assert (getattr(graph, name) is None) == (have is None)
        if have is not None:
            assert np.array_equal(getattr(graph, name), have)
    assert np.array_equal(graph.mention_entity[graph.entity_mentions],
                          np.repeat(np.arange(graph.n_entities), np.diff(graph.entity_mention_indptr)))


def test_bad_link_arrays_are_artifact_errors():
    graph, _, _ = random_graph(1, links=True, **SIZES)
    _, kw = link_arrays(graph.mention_entity, graph.mention_passage, graph.passage_entity, graph.n_entities)
    looped = kw["entity_link"].copy()
    r = int(np.flatnonzero(np.diff(kw["entity_link_indptr"]))[0])
    looped[kw["entity_link_indptr"][r]] = r  # entity r linked to itself
    bad = [({"entity_link": looped}, "the link graph entity_link links entity \\d+ to itself"),
           ({"entity_link": kw["entity_link"] + graph.n_entities}, "entity_link holds ids outside"),
           ({"entity_link_indptr": kw["entity_link_indptr"][:-1]}, "entity_link_indptr must be"),
           ({"entity_mentions": kw["entity_mentions"][::-1].copy()}, "entity_mentions does not list"),
           ({"passage_entity": kw["passage_entity"][:-1]}, "passage_entity must be"),
           ({"passage_entity": kw["passage_entity"] - 1}, "passage_entity must be"),
           ({"entity_link": None}, "entity_link_indptr and entity_link must be given together")]

    def read_all(g):  # the optional arrays are read and checked on first use
        return g.entity_link, g.entity_mentions, g.passage_entity

    read_all(FollowGraph.from_index(stand_in_index(graph, kw), graph.vectors))
    for change, message in bad:
        loaded = FollowGraph.from_index(stand_in_index(graph, {**kw, **change}), graph.vectors)
        with pytest.raises(ArtifactError, match=f"toy-2wiki: {message}"):
            read_all(loaded)
