"""Intervals and paired tests for retrieval figures measured on a few hundred questions.

A figure such as R@5 is the mean over questions of a per-question value (the share of its gold passages
in the top 5; for AR@5, 1 if all of them are there). With a few hundred questions, two systems' means
differ by chance by a few points, so:

* `bootstrap_ci`: the 95% percentile interval of the mean from `resamples` resamplings of the questions
  with replacement (seeded, so a table is the same every time it is made);
* `paired_test`: whether two systems differ on the same questions: a two-sided paired sign-flip
  (randomisation) test of the mean per-question difference, with the exact p-value when there are few
  non-zero differences and `resamples` random sign flips otherwise. A difference is called only when
  ``p < alpha`` (0.05).

Both take per-question values in the same question order (`per_question` makes them from ranked ids and
gold ids).
"""

from __future__ import annotations

import itertools
from typing import Sequence

import numpy as np

from drkit.util.sampling import generator

RESAMPLES = 10_000
ALPHA = 0.05


def per_question(ranked: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], k: int, all_of: bool = False) -> np.ndarray:
    """Per question, the share of its gold ids in the top `k` of its ranking (`all_of`: 1.0 if all are
    there, else 0.0). Questions without gold are not allowed: filter them first."""
    out = np.empty(len(gold))
    for i, (r, g) in enumerate(zip(ranked, gold)):
        g = set(g)
        if not g:
            raise ValueError(f"question {i} has no gold ids")
        share = len(set(list(r)[:k]) & g) / len(g)
        out[i] = float(share == 1.0) if all_of else share
    return out


def bootstrap_ci(values: np.ndarray, resamples: int = RESAMPLES, level: float = 0.95, seed: int = 0) -> tuple[float, float]:
    """The `level` percentile bootstrap interval of ``values.mean()`` (module docstring)."""
    values = np.asarray(values, dtype=np.float64)
    if len(values) == 0:
        raise ValueError("no values")
    rng = generator(seed)
    means = np.empty(resamples)
    for s in range(0, resamples, 1000):  # 1000 resamples at a time: memory O(1000 n)
        n = min(1000, resamples - s)
        means[s:s + n] = values[rng.integers(0, len(values), size=(n, len(values)))].mean(axis=1)
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return float(lo), float(hi)


def paired_test(a: np.ndarray, b: np.ndarray, resamples: int = RESAMPLES, seed: int = 0, exact_up_to: int = 16) -> dict:
    """Two-sided paired sign-flip test of ``mean(a - b) != 0`` over the same questions: ``{"diff", "p",
    "exact"}``. Under the null each question's difference is as likely to have either sign; the p-value
    is the share of sign assignments whose mean difference is at least as large in absolute value as the
    one seen (all 2^n of the n non-zero differences when n <= `exact_up_to`, else `resamples` random ones
    plus the one seen)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"paired values must have the same shape, got {a.shape} and {b.shape}")
    d = a - b
    seen = abs(d.sum())
    nz = d[d != 0]
    if len(nz) == 0:
        return {"diff": 0.0, "p": 1.0, "exact": True}
    tol = 1e-9 * max(1.0, seen)
    if len(nz) <= exact_up_to:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(nz))))
        p = float(np.mean(np.abs(signs @ nz) >= seen - tol))
        return {"diff": float(d.mean()), "p": p, "exact": True}
    rng = generator(seed)
    hits = 0
    for s in range(0, resamples, 1000):
        n = min(1000, resamples - s)
        signs = rng.choice((1.0, -1.0), size=(n, len(nz)))
        hits += int(np.sum(np.abs(signs @ nz) >= seen - tol))
    return {"diff": float(d.mean()), "p": (hits + 1) / (resamples + 1), "exact": False}
