"""Span scoring against slow, loop-by-loop references."""

import math

import numpy as np
import pytest
import torch

from drkit.dense.spans import best_span, log_probs_with_null, span_logits, span_nll, span_scores


def slow_log_probs(logits_row, valid_row, null):
    """log-softmax over the valid positions and null, element by element."""
    items = [x for x, ok in zip(logits_row, valid_row) if ok] + [null]
    top = max(items)
    log_z = top + math.log(sum(math.exp(x - top) for x in items))
    return [x - log_z if ok else -math.inf for x, ok in zip(logits_row, valid_row)] + [null - log_z]


def slow_pair_nll(s_lp, e_lp, gold_s, gold_e, positive):
    if not positive:
        return -(s_lp[-1] + e_lp[-1])
    ps = sum(math.exp(s_lp[i]) for i, g in enumerate(gold_s) if g)
    pe = sum(math.exp(e_lp[i]) for i, g in enumerate(gold_e) if g)
    return -(math.log(ps) + math.log(pe))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_span_likelihood_matches_slow_reference(seed):
    g = torch.Generator().manual_seed(seed)
    P, L, Q, h = 3, 7, 4, 5
    fs, fe = torch.randn(P, L, h, generator=g, dtype=torch.float64), torch.randn(P, L, h, generator=g, dtype=torch.float64)
    qs, qe = torch.randn(Q, h, generator=g, dtype=torch.float64), torch.randn(Q, h, generator=g, dtype=torch.float64)
    valid = torch.rand(P, L, generator=g) > 0.3
    valid[:, 1] = True
    null_s, null_e = torch.tensor(0.7, dtype=torch.float64), torch.tensor(-0.4, dtype=torch.float64)
    positive = torch.rand(Q, P, generator=g) > 0.5
    gold_s = torch.zeros(Q, P, L, dtype=torch.bool)
    gold_e = torch.zeros(Q, P, L, dtype=torch.bool)
    rng = np.random.default_rng(seed)
    for a in range(Q):
        for b in range(P):
            if positive[a, b]:
                for i in rng.choice(np.flatnonzero(valid[b].numpy()), size=2):
                    gold_s[a, b, i] = True
                    gold_e[a, b, min(i + 1, L - 1) if valid[b, min(i + 1, L - 1)] else i] = True

    s_logit, e_logit = span_logits(fs, fe, qs, qe)
    s_lp = log_probs_with_null(s_logit, valid, null_s)
    e_lp = log_probs_with_null(e_logit, valid, null_e)
    nll = span_nll(s_lp, e_lp, gold_s, gold_e, positive)
    for a in range(Q):
        for b in range(P):
            s_row = [float(fs[b, i] @ qs[a]) for i in range(L)]
            e_row = [float(fe[b, i] @ qe[a]) for i in range(L)]
            ref_s = slow_log_probs(s_row, valid[b].tolist(), float(null_s))
            ref_e = slow_log_probs(e_row, valid[b].tolist(), float(null_e))
            np.testing.assert_allclose(s_lp[a, b].numpy(), ref_s, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(e_lp[a, b].numpy(), ref_e, rtol=1e-5, atol=1e-5)
            ref = slow_pair_nll(ref_s, ref_e, gold_s[a, b].tolist(), gold_e[a, b].tolist(), bool(positive[a, b]))
            assert float(nll[a, b]) == pytest.approx(ref, rel=1e-5, abs=1e-5)


def test_positive_pair_without_gold_is_an_error():
    lp = torch.log_softmax(torch.zeros(1, 1, 4), -1)
    with pytest.raises(ValueError, match="no gold"):
        span_nll(lp, lp, torch.zeros(1, 1, 3, dtype=torch.bool), torch.zeros(1, 1, 3, dtype=torch.bool),
                 torch.ones(1, 1, dtype=torch.bool))


@pytest.mark.parametrize("max_length", [1, 2, 10])
def test_best_span_matches_brute_force(max_length):
    g = torch.Generator().manual_seed(max_length)
    for _ in range(20):
        s = torch.log_softmax(torch.randn(7, generator=g), 0)
        e = torch.log_softmax(torch.randn(7, generator=g), 0)
        L = 6
        best, arg = -math.inf, None
        for i in range(L):
            for j in range(i, min(L, i + max_length)):
                if s[i] + e[j] > best:
                    best, arg = float(s[i] + e[j]), (i, j)
        scores = span_scores(s, e, max_length)
        assert float(scores.max()) == pytest.approx(best)
        found = best_span(s, e, max_length)
        if best < float(s[-1] + e[-1]):
            assert found is None
        else:
            assert found[:2] == arg and found[2] == pytest.approx(best)
