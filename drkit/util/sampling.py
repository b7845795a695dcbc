"""Seeded sampling: the one place drkit draws random rows.

Each draw is a function of its arguments only (no global generator), so a resumed or repeated run
draws exactly the same rows: a seeded dev sample, the held-out queries, a step's training batch.
"""

from __future__ import annotations

import numpy as np


def generator(*seed: int) -> np.random.Generator:
    """A NumPy generator seeded by the integers `seed` (e.g. ``(seed, epoch, position)``)."""
    return np.random.default_rng(list(seed))


def sample_rows(n: int, k: int | None, seed: int) -> np.ndarray:
    """Sorted indices of a seeded sample of `k` of `n` rows (without replacement); all rows when `k` is
    None or not smaller than `n`."""
    if k is None or k >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, k, replace=False))


def step_position(n: int, batch_size: int, step: int) -> tuple[int, int]:
    """(epoch, position in the epoch) of training step `step` over `n` rows, `batch_size` rows per step."""
    return divmod(step, max(1, n // batch_size))


def step_rows(n: int, batch_size: int, step: int, seed: int) -> np.ndarray:
    """The rows of a training step: consecutive slices of a seeded permutation per pass over the data
    (the rows left over by the last full slice are skipped in that pass)."""
    epoch, pos = step_position(n, batch_size, step)
    return generator(seed, epoch).permutation(n)[pos * batch_size : (pos + 1) * batch_size]


def bucketed_step_rows(lengths, batch_size: int, step: int, seed: int, pool: int) -> np.ndarray:
    """The rows of a training step over rows of different `lengths` (this pass's), batched so that a batch pads
    little: the pass draws the rows `step_rows` draws (the same permutation, the same rows left over), takes them
    in pools of `pool` batches, sorts each pool by length (longest first) before cutting it into batches, and
    takes all the pass's batches in a seeded order (fewer rows than a batch: all of them, as `step_rows` gives).
    ``pool=1`` gives `step_rows`' batches in another order. `grouped_step_rows` with one group of every row."""
    return grouped_step_rows([np.arange(len(lengths))], batch_size, step, seed, lengths, pool)


def group_batches(groups, batch_size: int) -> list[int]:
    """The batches a pass takes from each of `groups` (`grouped_step_rows`): its full batches, or one short
    batch for a group smaller than `batch_size` (none for an empty one), so that no group goes untrained."""
    return [max(1, len(g) // batch_size) if len(g) else 0 for g in groups]


def grouped_step_rows(groups, batch_size: int, step: int, seed: int, lengths=None, pool: int = 1) -> np.ndarray:
    """The rows of a training step when the rows come in `groups` (arrays of row numbers) batched apart, so
    that a batch is padded only to its own group's lengths: each pass permutes each group, keeps its
    `group_batches` batches' worth of rows (the rows left over skipped in that pass), with `lengths` (every row's)
    sorts them by length in pools of `pool` batches (longest first), slices them into batches and takes the
    batches of all groups in a seeded order."""
    counts = group_batches(groups, batch_size)
    if not sum(counts):
        raise ValueError("grouped_step_rows: every group is empty")
    epoch, pos = divmod(step, sum(counts))
    rng = generator(seed, epoch)
    lengths = None if lengths is None else np.asarray(lengths)
    size = max(1, pool) * batch_size
    batches = []
    for g, k in zip(groups, counts):
        rows = np.asarray(g)[rng.permutation(len(g))][: k * batch_size]
        if lengths is not None:
            rows = np.concatenate([chunk[np.argsort(-lengths[chunk], kind="stable")]
                                   for chunk in (rows[i : i + size] for i in range(0, len(rows), size))])
        batches += [rows[i * batch_size : (i + 1) * batch_size] for i in range(k)]
    return batches[rng.permutation(len(batches))[pos]]
