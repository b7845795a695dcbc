"""Hop mixing (drkit.reason.mixing): Z* = sum_t pi_t Z_t against a dense loop, gradients through pi and each
Z_t, the multi-label loss against a dense reference, the fixed-hop option, persistence, and a toy whose
questions need 0, 1 or 2 hops where a learned mixture beats every fixed hop count."""

import numpy as np
import pytest
import torch

from drkit.errors import ConfigError
from drkit.reason.entity_set import EntitySet
from drkit.reason.mixing import MixConfig, mix, mixture_loss, on_pages, pages_or_all, weigh_named
from drkit.util.runs import as_saved


def random_set(rng, batch, n_entities, dtype=torch.float64, requires_grad=False) -> EntitySet:
    rows, ids = [], []
    for b in range(batch):
        k = int(rng.integers(0, 6))  # an empty row now and then
        chosen = np.sort(rng.choice(n_entities, size=k, replace=False))
        rows += [b] * k
        ids += chosen.tolist()
    probs = torch.tensor(rng.random(len(ids)) + 0.1, dtype=dtype, requires_grad=requires_grad)
    return EntitySet(torch.tensor(rows, dtype=torch.int64), torch.tensor(ids, dtype=torch.int64), probs, batch)


def dense_mix(sets, pi, n_entities):
    out = torch.zeros(pi.shape[0], n_entities, dtype=pi.dtype)
    for t, z in enumerate(sets):
        for i in range(len(z.ids)):
            b, e = int(z.rows[i]), int(z.ids[i])
            out[b, e] = out[b, e] + pi[b, t] * z.probs[i]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_mix_matches_a_dense_loop(seed):
    rng = np.random.default_rng(seed)
    batch, n = 4, 12
    sets = [random_set(rng, batch, n) for _ in range(3)]
    pi = torch.softmax(torch.tensor(rng.normal(size=(batch, 3))), -1)
    z = mix(sets, pi)
    torch.testing.assert_close(z.to_dense(n), dense_mix(sets, pi, n))
    keys = z.rows * n + z.ids  # sorted by (row, id), unique: a valid EntitySet
    assert torch.all(keys[1:] > keys[:-1])
    torch.testing.assert_close(z.logits.exp(), z.probs)


def dense_on_pages(z_dense, has_page):
    """Each row over the entities with a page, renormalised: the obvious way."""
    out = torch.zeros_like(z_dense)
    for b in range(z_dense.shape[0]):
        total = sum(float(z_dense[b, e]) for e in range(z_dense.shape[1]) if has_page[e])
        for e in range(z_dense.shape[1]):
            if has_page[e] and total > 0:
                out[b, e] = z_dense[b, e] / total
    return out


@pytest.mark.parametrize("seed", range(6))
def test_mix_over_pages_matches_a_dense_loop(seed):
    rng = np.random.default_rng(seed)
    batch, n = 4, 12
    sets = [random_set(rng, batch, n) for _ in range(3)]
    pi = torch.softmax(torch.tensor(rng.normal(size=(batch, 3))), -1)
    has_page = rng.random(n) < 0.5
    z = mix(sets, pi, has_page)
    expected = torch.zeros(batch, n, dtype=pi.dtype)
    for t, zt in enumerate(sets):
        expected += pi[:, t:t + 1] * dense_on_pages(zt.to_dense(n), has_page)
    torch.testing.assert_close(z.to_dense(n), expected)
    assert not z.to_dense(n)[:, ~has_page].any()
    torch.testing.assert_close(z.logits.exp(), z.probs)
    for zt in sets:  # each hop alone sums to 1 over the pages of a row that reaches one
        dense = on_pages(zt, has_page).to_dense(n)
        reached = dense_on_pages(zt.to_dense(n), has_page).sum(1) > 0
        torch.testing.assert_close(dense.sum(1)[reached], torch.ones(int(reached.sum()), dtype=dense.dtype))
    # every entity with a page: the plain mixture of distributions (rows summing to 1, as a follow's)
    normed = [on_pages(z, np.ones(n, bool)) for z in sets]
    torch.testing.assert_close(mix(normed, pi, np.ones(n, bool)).to_dense(n), mix(normed, pi).to_dense(n))


@pytest.mark.parametrize("seed", range(6))
def test_pages_or_all_keeps_a_row_without_pages_whole(seed):
    """The answer head's start: each row over its pages, renormalised, as `on_pages` does; a row with no entity
    with a page keeps all of its entities, renormalised (they already sum to what they summed to)."""
    rng = np.random.default_rng(seed)
    batch, n = 5, 12
    z = random_set(rng, batch, n)
    has_page = rng.random(n) < 0.4
    has_page[z.ids[z.rows == 0].numpy()] = False  # row 0 reaches no page
    dense = z.to_dense(n)
    expected = dense_on_pages(dense, has_page)
    for b in range(batch):
        if not any(has_page[e] and float(dense[b, e]) > 0 for e in range(n)) and float(dense[b].sum()) > 0:
            expected[b] = dense[b] / dense[b].sum()
    got = pages_or_all(z, has_page)
    torch.testing.assert_close(got.to_dense(n), expected)
    assert (got.rows == 0).any() and not (on_pages(z, has_page).rows == 0).any()
    torch.testing.assert_close(got.logits.exp(), got.probs)


@pytest.mark.parametrize("seed, over_pages", [(1, False), (2, True)])
def test_gradcheck_through_pi_and_each_hop(seed, over_pages):
    rng = np.random.default_rng(seed)
    batch, n = 3, 9
    sets = [random_set(rng, batch, n) for _ in range(3)]
    has_page = np.arange(n) % 3 != 0 if over_pages else None
    logits = torch.tensor(rng.normal(size=(batch, 3)), requires_grad=True)
    probs = [z.probs.clone().requires_grad_(True) for z in sets]

    def fn(logits, *probs):
        zs = [EntitySet(z.rows, z.ids, p, z.batch_size) for z, p in zip(sets, probs)]
        return mix(zs, torch.softmax(logits, -1), has_page).probs

    assert torch.autograd.gradcheck(fn, (logits, *probs))


def dense_loss_reference(z_dense, gold):
    per_row = []
    for b, g in enumerate(gold):
        inside = [e for e in np.unique(g) if z_dense[b, e] > 0]
        if inside:
            per_row.append(sum(-torch.log(z_dense[b, e]) for e in inside) / len(inside))
    return torch.stack(per_row).mean() if per_row else None


@pytest.mark.parametrize("seed", range(5))
def test_mixture_loss_matches_dense_reference(seed):
    rng = np.random.default_rng(seed)
    batch, n = 5, 10
    sets = [random_set(rng, batch, n) for _ in range(3)]
    pi = torch.softmax(torch.tensor(rng.normal(size=(batch, 3))), -1)
    z = mix(sets, pi)
    gold = [rng.choice(n + 3, size=int(rng.integers(0, 4))) for _ in range(batch)]  # some outside every set
    loss, found = mixture_loss(z, gold)
    dense = z.to_dense(n)
    ref = dense_loss_reference(dense, [g[g < n] for g in gold])
    assert found.tolist() == [sum(1 for e in np.unique(g) if e < n and dense[b, e] > 0) for b, g in enumerate(gold)]
    if ref is None:
        assert loss is None
    else:
        torch.testing.assert_close(loss, ref)


@pytest.mark.parametrize("seed", range(4))
def test_weigh_named_matches_a_dense_loop(seed):
    """Each named entity's weight times exp(w), renormalised per question (a row naming none of its entities keeps
    its Z_0), with the gradient in w and in Z_0's probabilities."""
    rng = np.random.default_rng(seed)
    z = random_set(rng, 5, 12, requires_grad=True)
    named = np.full((5, 2), -1)
    for b in range(4):  # the last row names nothing
        mine = z.ids[z.rows == b].numpy()
        if len(mine):
            named[b, 0] = mine[rng.integers(len(mine))]
    named[1, 1] = 11 if 11 not in z.ids[z.rows == 1].tolist() else -1  # a named entity outside Z_0: no effect
    w = torch.tensor(float(rng.normal()) + 1.0, dtype=torch.float64, requires_grad=True)
    got = weigh_named(z, named, w)
    assert torch.equal(got.rows, z.rows) and torch.equal(got.ids, z.ids)
    for b in range(5):
        at = (z.rows == b).nonzero().flatten()
        if len(at) == 0:
            continue
        raw = torch.stack([z.probs[i] * (torch.exp(w) if int(z.ids[i]) in named[b] else 1.0) for i in at.tolist()])
        torch.testing.assert_close(got.probs[at], raw / raw.sum(), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(weigh_named(z, named, torch.zeros((), dtype=torch.float64)).probs,
                               torch.cat([z.probs[z.rows == b] / z.probs[z.rows == b].sum() for b in range(5)]))
    torch.autograd.gradcheck(lambda p, v: weigh_named(EntitySet(z.rows, z.ids, p, 5), named, v).probs,
                             (z.probs.detach().clone().requires_grad_(True), w.detach().clone().requires_grad_(True)))


def test_named_weight_is_on_for_new_models_and_off_for_old_ones():
    assert MixConfig().named_weight
    assert not as_saved(MixConfig, {"hops": 2, "rescore": True}).named_weight  # saved before the setting


def test_mix_config_checks():
    with pytest.raises(ConfigError, match="hops"):
        MixConfig(hops=0)
    with pytest.raises(ConfigError, match="fixed"):
        MixConfig(hops=2, fixed=3)


def test_a_learned_mixture_beats_every_fixed_hop_count():
    """A toy of three question kinds: the gold entity is in Z_0 (kind 0), Z_1 (kind 1) or Z_2 (kind 2), and
    every Z_t also holds distractors. A mixing classifier on the question's features (its kind, one-hot,
    plus noise), trained with `mixture_loss`, ranks the gold entity first far more often than any fixed
    hop count can (each is right on one kind only: at most about a third)."""
    rng = np.random.default_rng(0)
    torch.manual_seed(0)
    n_q, n, T = 240, 50, 2
    kinds = rng.integers(0, T + 1, size=n_q)
    features = torch.tensor(np.eye(T + 1)[kinds] + 0.1 * rng.normal(size=(n_q, T + 1)), dtype=torch.float32)
    gold, sets_rows = [], [[] for _ in range(T + 1)]
    for q in range(n_q):
        ents = rng.choice(n, size=1 + 2 * (T + 1), replace=False)
        gold.append(ents[:1])
        for t in range(T + 1):  # hop t: the gold entity with prob 0.6 if t is the kind, else two distractors
            if t == kinds[q]:
                sets_rows[t].append([(ents[0], 0.6), (ents[1 + 2 * t], 0.4)])
            else:
                sets_rows[t].append([(ents[1 + 2 * t], 0.7), (ents[2 + 2 * t], 0.3)])

    def entity_set(rows_of, idx):
        rows, ids, probs = [], [], []
        for b, q in enumerate(idx):
            for e, p in sorted(rows_of[q]):
                rows.append(b), ids.append(int(e)), probs.append(p)
        return EntitySet(torch.tensor(rows), torch.tensor(ids), torch.tensor(probs), len(idx))

    train, test = np.arange(160), np.arange(160, n_q)
    head = torch.nn.Linear(T + 1, T + 1)
    opt = torch.optim.Adam(head.parameters(), lr=0.1)
    for _ in range(100):
        pi = torch.softmax(head(features[train]), -1)
        loss, _ = mixture_loss(mix([entity_set(r, train) for r in sets_rows], pi), [gold[q] for q in train])
        opt.zero_grad()
        loss.backward()
        opt.step()

    def hits1(z):
        top, _ = z.top(1)
        return float(np.mean([top[b, 0] == gold[q][0] for b, q in enumerate(test)]))

    with torch.no_grad():
        sets = [entity_set(r, test) for r in sets_rows]
        mixed = hits1(mix(sets, torch.softmax(head(features[test]), -1)))
        fixed = [hits1(z) for z in sets]
        uniform = hits1(mix(sets, torch.full((len(test), T + 1), 1 / (T + 1))))
    assert max(fixed) < 0.45, fixed
    assert mixed > max(fixed) + 0.4, (mixed, fixed)
    assert mixed > uniform + 0.2, (mixed, uniform)
