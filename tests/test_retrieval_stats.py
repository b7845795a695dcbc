"""Bootstrap intervals and the paired sign-flip test (drkit.qa.stats) against slow, literal references."""

import itertools

import numpy as np
import pytest

from drkit.qa.stats import bootstrap_ci, paired_test, per_question
from drkit.util.sampling import generator


def test_per_question_by_hand():
    ranked = [["a", "b", "c"], ["x", "y", "z"]]
    gold = [["a", "c"], ["z"]]
    assert per_question(ranked, gold, 2).tolist() == [0.5, 0.0]
    assert per_question(ranked, gold, 3, all_of=True).tolist() == [1.0, 1.0]
    with pytest.raises(ValueError, match="no gold"):
        per_question([["a"]], [[]], 1)


def test_bootstrap_interval_matches_a_loop_with_the_same_draws():
    rng = np.random.default_rng(3)
    values = rng.random(57)
    lo, hi = bootstrap_ci(values, resamples=2000, seed=11)
    draw = generator(11)
    means = [values[draw.integers(0, len(values), size=len(values))].mean() for _ in range(2000)]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])), abs=1e-12)
    assert lo < values.mean() < hi
    # about 95% of the intervals of fresh samples cover the true mean 0.5 of a uniform variable
    covered = [bootstrap_ci(np.random.default_rng(s).random(80), resamples=1000, seed=s) for s in range(200)]
    assert 0.88 <= np.mean([lo <= 0.5 <= hi for lo, hi in covered]) <= 0.99


def _brute_force_p(a, b):
    d = np.asarray(a) - np.asarray(b)
    seen = abs(d.sum())
    flips = [abs(sum(s * x for s, x in zip(signs, d))) >= seen - 1e-9 for signs in itertools.product((1, -1), repeat=len(d))]
    return sum(flips) / len(flips)


@pytest.mark.parametrize("seed", range(5))
def test_paired_test_is_exact_on_few_differences(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, 12).astype(float)
    b = rng.integers(0, 2, 12).astype(float)
    got = paired_test(a, b)
    assert got["exact"] and got["p"] == pytest.approx(_brute_force_p(a, b))
    assert got["diff"] == pytest.approx((a - b).mean())


def test_paired_test_sampled_agrees_with_exact_and_calls_clear_differences():
    rng = np.random.default_rng(7)
    a, b = rng.random(15), rng.random(15)
    exact = paired_test(a, b)["p"]
    sampled = paired_test(a, b, resamples=20000, exact_up_to=0)
    assert not sampled["exact"] and sampled["p"] == pytest.approx(exact, abs=0.02)
    same = rng.random(300)
    assert paired_test(same, same)["p"] == 1.0
    better = np.clip(same + 0.1, 0, 1)
    assert paired_test(better, same)["p"] < 0.001
    noise = paired_test(rng.random(300), rng.random(300))["p"]
    assert noise > 0.001  # two draws of the same distribution: no clear difference (seeded)
