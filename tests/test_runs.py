"""Run directories (`drkit.util.runs`) and seeded sampling (`drkit.util.sampling`): one helper each,
used by pretraining, training, the experiments and the benchmarks."""

import re
from pathlib import Path

import numpy as np

import drkit

PACKAGE = Path(drkit.__file__).parent
ROOT = PACKAGE.parent


def _sources(*paths):
    for p in paths:
        yield from (sorted(p.rglob("*.py")) if p.is_dir() else [p])


def test_seeded_sampling_has_one_home():
    """Every seeded draw of rows (a sample of lines, a step's batch) goes through drkit.util.sampling."""
    home = PACKAGE / "util" / "sampling.py"
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _sources(PACKAGE, ROOT / "benchmarks" / "bench_qa.py") if p != home
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"default_rng|np\.random\.(?!Generator)", line)]
    assert not found, found


def test_sample_rows():
    from drkit.util.sampling import sample_rows

    rows = sample_rows(100, 10, seed=3)
    assert len(rows) == 10 and np.all(np.diff(rows) > 0) and rows.max() < 100
    assert np.array_equal(rows, sample_rows(100, 10, seed=3))
    assert not np.array_equal(rows, sample_rows(100, 10, seed=4))
    assert np.array_equal(sample_rows(5, None, seed=0), np.arange(5))
    assert np.array_equal(sample_rows(5, 9, seed=0), np.arange(5))
    assert len(sample_rows(5, 0, seed=0)) == 0
    # the same draw as before there was one helper (seeded dev samples and held-out queries are unchanged)
    assert np.array_equal(rows, np.sort(np.random.default_rng(3).choice(100, 10, replace=False)))


def test_step_rows_cover_each_pass_once():
    from drkit.util.sampling import step_rows

    seen = np.concatenate([step_rows(10, 3, s, seed=1) for s in range(3)])
    assert len(set(seen.tolist())) == 9
    assert np.array_equal(step_rows(10, 3, 4, seed=1), step_rows(10, 3, 4, seed=1))
    assert np.array_equal(step_rows(10, 3, 4, seed=1), np.random.default_rng([1, 1]).permutation(10)[3:6])
