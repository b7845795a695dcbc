"""Z_0 rescored by an encoding of the question (paper, section 3.3) against a dense loop-by-loop reference."""

import numpy as np
import pytest
import torch
from follow_reference import cancelling_graph, random_graph

from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import FollowConfig, rescore
from drkit.reason.graph import FollowGraph


def dense_rescore_reference(z: torch.Tensor, queries: torch.Tensor, F: torch.Tensor, mention_entity: np.ndarray,
                            config: FollowConfig) -> torch.Tensor:
    """Z (B, E) -> Z' (B, E), loop by loop: softmax over the row's support of log Z + d, with d the max (or
    log-sum-exp) of the entity's mention scores / lambda, and the row's lowest d for an unmentioned entity
    (0 when no entity of the row is mentioned)."""
    B, E = z.shape
    out = torch.zeros(B, E, dtype=queries.dtype)
    for b in range(B):
        support = [e for e in range(E) if z[b, e] > 0]
        if not support:
            continue
        d = {}
        for e in support:
            scores = [F[m].to(queries.dtype) @ queries[b] / config.temperature
                      for m in range(len(mention_entity)) if mention_entity[m] == e]
            if scores:
                d[e] = torch.stack(scores).max() if config.aggregate == "max" else torch.logsumexp(torch.stack(scores), 0)
        lowest = torch.stack(list(d.values())).min() if d else torch.zeros((), dtype=queries.dtype)
        logits = torch.stack([torch.log(z[b, e]).to(queries.dtype) + d.get(e, lowest) for e in support])
        for e, p in zip(support, torch.softmax(logits, 0)):
            out[b, e] = p
    return out


def mixed_z(graph, seed, dtype=torch.float64):
    """Rows of mentioned and unmentioned entities: random; one unmentioned among mentioned ones; only
    unmentioned ones; a single mentioned entity; an empty row."""
    rng = np.random.default_rng(seed)
    counts = np.bincount(graph.mention_entity, minlength=graph.n_entities)
    mentioned, unmentioned = np.flatnonzero(counts > 0), np.flatnonzero(counts == 0)
    assert len(unmentioned) >= 2 and len(mentioned) >= 3
    rows = [rng.choice(graph.n_entities, 4, replace=False),
            np.concatenate([rng.choice(mentioned, 2, replace=False), unmentioned[:1]]),
            unmentioned[:2], mentioned[:1], np.zeros(0, np.int64)]
    r = np.concatenate([np.full(len(e), b) for b, e in enumerate(rows)])
    ids = np.concatenate([np.sort(e) for e in rows])
    probs = rng.random(len(ids)) + 0.1
    probs /= np.bincount(r, weights=probs)[r]
    return EntitySet(torch.from_numpy(r), torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(probs).to(dtype), len(rows))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("config", [FollowConfig(temperature=2.0), FollowConfig(temperature=0.5, aggregate="sum")],
                         ids=lambda c: c.aggregate)
def test_rescore_matches_dense_reference_with_gradients(seed, config):
    graph, _ = random_graph(seed, n_entities=20, n_passages=6, n_mentions=25)
    z = mixed_z(graph, seed)
    q = torch.from_numpy(np.random.default_rng(50 + seed).normal(size=(z.batch_size, 5))).requires_grad_()
    probs = z.probs.clone().requires_grad_()
    weights = torch.from_numpy(np.random.default_rng(seed).normal(size=(z.batch_size, graph.n_entities)))

    got = rescore(EntitySet(z.rows, z.ids, probs, z.batch_size), q, graph, config)
    assert torch.equal(got.rows, z.rows) and torch.equal(got.ids, z.ids)  # the support of Z, in Z's order
    torch.testing.assert_close(got.logits, torch.log(got.probs))
    dense = got.to_dense(graph.n_entities)
    g_q, g_p = torch.autograd.grad((dense * weights).sum(), (q, probs))

    q2, probs2 = q.detach().clone().requires_grad_(), z.probs.clone().requires_grad_()
    z_dense = torch.zeros(z.batch_size, graph.n_entities, dtype=torch.float64).index_put((z.rows, z.ids), probs2)
    want = dense_rescore_reference(z_dense, q2, graph.vectors, graph.mention_entity, config)
    w_q, w_p = torch.autograd.grad((want * weights).sum(), (q2, probs2))
    torch.testing.assert_close(dense, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g_q, w_q, rtol=1e-8, atol=1e-10)
    torch.testing.assert_close(g_p, w_p, rtol=1e-8, atol=1e-10)
    # the row of unmentioned entities keeps Z; the row of one entity gives it probability 1
    torch.testing.assert_close(got.probs[z.rows == 2], z.probs[z.rows == 2])
    assert got.probs[z.rows == 3].tolist() == [1.0]


def test_rescore_gradcheck():
    graph, _ = random_graph(3, n_entities=20, n_passages=6, n_mentions=25)
    z0 = mixed_z(graph, 3)
    for config in (FollowConfig(temperature=2.0), FollowConfig(aggregate="sum")):
        def fn(q, probs):
            return rescore(EntitySet(z0.rows, z0.ids, probs, z0.batch_size), q, graph, config).probs

        q = torch.from_numpy(np.random.default_rng(1).normal(size=(z0.batch_size, 5))).requires_grad_()
        probs = z0.probs.clone().requires_grad_()
        assert torch.autograd.gradcheck(fn, (q, probs), eps=1e-6, atol=1e-6)


def test_hand_made_rescore():
    """e0 has mentions 0 and 1, e1 mention 2, e2 none; f(m) . g = g[m] = 1, 3, 2 and lambda 1.
    max: d = 3, 2 and (e2, unmentioned) the row's lowest, 2. sum: d0 = log(e + e^3), d1 = 2, d2 = 2."""
    graph = FollowGraph(np.zeros(4, np.int64), np.zeros(0, np.int64), np.array([0, 0, 1]), np.array([0, 0, 1]),
                        3, 2, torch.eye(3, dtype=torch.float64))
    z = EntitySet(torch.tensor([0, 0, 0]), torch.tensor([0, 1, 2]), torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64), 1)
    q = torch.tensor([[1.0, 3.0, 2.0]], dtype=torch.float64)
    e = np.e
    got = rescore(z, q, graph, FollowConfig(temperature=1.0))
    want = np.array([0.5 * e ** 3, 0.25 * e ** 2, 0.25 * e ** 2])
    np.testing.assert_allclose(got.probs.numpy(), want / want.sum(), rtol=1e-12)
    got, tr = rescore(z, q, graph, FollowConfig(temperature=1.0, aggregate="sum"), trace=True)
    want = np.array([0.5 * (e + e ** 3), 0.25 * e ** 2, 0.25 * e ** 2])
    np.testing.assert_allclose(got.probs.numpy(), want / want.sum(), rtol=1e-12)
    # the trace: each mention of a Z entity with its logit log Z + f(m) . g / lambda and its entity's slot
    assert tr.rows.tolist() == [0, 0, 0] and tr.mentions.tolist() == [0, 1, 2] and tr.slot.tolist() == [0, 0, 1]
    np.testing.assert_allclose(tr.logits, np.log([0.5, 0.5, 0.25]) + [1, 3, 2], rtol=1e-6)
    with pytest.raises(ValueError, match="2 queries"):
        rescore(z, torch.zeros(2, 3, dtype=torch.float64), graph, FollowConfig())


def test_rescore_is_the_same_alone_and_in_a_batch():
    """Row 0 (ten entities) alone and in a batch of 64 other rows: bit for bit (float32 queries, vectors
    whose dot products cancel)."""
    graph = cancelling_graph()
    batch = 64
    rows = np.concatenate([np.zeros(10, np.int64), np.arange(1, batch)])
    ids = np.concatenate([np.arange(10), 10 + np.arange(batch - 1) % 50])
    probs = np.concatenate([np.full(10, 0.1), np.ones(batch - 1)]).astype(np.float32)
    z = EntitySet(torch.from_numpy(rows), torch.from_numpy(ids), torch.from_numpy(probs), batch)
    z0 = EntitySet(torch.zeros(10, dtype=torch.int64), torch.arange(10), torch.full((10,), 0.1), 1)
    q = torch.ones(batch, 64) * torch.tensor([2.0 ** (b % 3 - 1) for b in range(batch)])[:, None]
    for config in (FollowConfig(), FollowConfig(aggregate="sum")):
        together, tr = rescore(z, q, graph, config, trace=True)
        alone, tr0 = rescore(z0, q[:1], graph, config, trace=True)
        assert torch.equal(together.probs[:10], alone.probs) and len(set(alone.probs.tolist())) > 5
        assert np.array_equal(tr.mentions[tr.rows == 0], tr0.mentions)
        assert np.array_equal(tr.logits[tr.rows == 0], tr0.logits)
