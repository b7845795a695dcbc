"""Row-compressed (CSR) arrays without scipy objects: ranges of rows, sums by key, and A_{E->M} derived
from EP.

A_{E->M} is EP (each entity's top-mu passages) with every passage replaced by its mentions, each
weighted by its passage's score, so it is never stored: `a_indptr` and `a_matrix` derive it, whole or
for given rows. `ragged_expand` computes ``Z^T A`` for a batch of sparse entity sets by slicing only the
rows of their non-zero entities (the paper's ragged representation): O(K mu log(K mu)) work for K
non-zero entities, whatever |E| and |M| are.
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.sparse as sp

from drkit.errors import ArtifactError

# the adjacencies A_{E->M} the follow knows (`drkit.reason.expansion`) and `hop_matrix` reads
ADJACENCIES = ("tfidf", "links", "both", "page")


class DerivedA:
    """`A_indptr`, `A_indices`, `A_data` of A_{E->M}, derived from EP on first use, for a class with
    `entity_passage_indptr`, `entity_passage`, `entity_passage_score` and `passage_mention_indptr`."""

    @functools.cached_property
    def A_indptr(self) -> np.ndarray:
        """(E+1,) int64 row pointers of A (O(nnz EP))."""
        return a_indptr(self.entity_passage_indptr, self.entity_passage, self.passage_mention_indptr)

    @functools.cached_property
    def _A(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return a_matrix(self.entity_passage_indptr, self.entity_passage, self.entity_passage_score,
                        self.passage_mention_indptr)

    @property
    def A_indices(self) -> np.ndarray:
        """(nnz_A,) int32 mention ids, increasing within a row: the whole matrix, built on first use (for
        analysis and tests; question time reads rows of EP)."""
        return self._A[1]

    @property
    def A_data(self) -> np.ndarray:
        """(nnz_A,) float32, the score of each entry's passage, aligned with `A_indices`."""
        return self._A[2]


def a_indptr(entity_passage_indptr: np.ndarray, entity_passage: np.ndarray, mention_indptr: np.ndarray,
             chunk: int = 1 << 22) -> np.ndarray:
    """(E+1,) row pointers of A_{E->M}: row e holds the mentions of e's top-mu passages. O(nnz EP) time, read
    in chunks of EP entries (memory O(E + chunk), not a few copies of EP)."""
    ends = np.asarray(entity_passage_indptr[1:], dtype=np.int64)  # EP entries [0, ends[e]) are rows <= e
    per_passage = np.diff(np.asarray(mention_indptr, dtype=np.int64))  # mentions of each passage
    out = np.zeros(len(ends) + 1, dtype=np.int64)
    running = 0
    for lo in range(0, len(entity_passage), chunk):
        hi = min(len(entity_passage), lo + chunk)
        csum = np.cumsum(per_passage[entity_passage[lo:hi]]) + running  # mentions of EP entries [0, i]
        a, b = np.searchsorted(ends, [lo, hi], side="right")  # rows ending in (lo, hi]
        out[1 + a : 1 + b] = csum[ends[a:b] - lo - 1]
        running = int(csum[-1])
    return out


def a_matrix(entity_passage_indptr: np.ndarray, entity_passage: np.ndarray, entity_passage_score: np.ndarray,
             mention_indptr: np.ndarray, entities: np.ndarray | None = None):
    """A_{E->M} as CSR arrays ``(indptr, mention ids int32, scores float32)``, from EP: row e lists the
    mentions of e's top-mu passages (passages in increasing order, so mention ids increase), each with
    its passage's score. With `entities`, only those rows, in that order (O(their EP entries' mentions))."""
    ep_indptr = np.asarray(entity_passage_indptr, dtype=np.int64)
    rows = np.arange(len(ep_indptr) - 1) if entities is None else np.asarray(entities, dtype=np.int64)
    positions = concat_ranges(ep_indptr[rows], ep_indptr[rows + 1] - ep_indptr[rows])  # (n,) EP entries, row by row
    passages = np.asarray(entity_passage)[positions].astype(np.int64)  # only the rows read, not all of EP
    per_entry = mention_indptr[passages + 1] - mention_indptr[passages]
    indices = concat_ranges(mention_indptr[passages], per_entry).astype(np.int32)
    data = np.repeat(np.asarray(entity_passage_score, dtype=np.float32)[positions], per_entry)
    entry_row = np.repeat(np.arange(len(rows)), ep_indptr[rows + 1] - ep_indptr[rows])
    indptr = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(np.bincount(entry_row, weights=per_entry, minlength=len(rows)).astype(np.int64), out=indptr[1:])
    return indptr, indices, data


def passage_mention_indptr(mention_passage: np.ndarray, n_passages: int) -> np.ndarray:
    """Mentions are stored in passage order, so passage p owns mentions ``[indptr[p], indptr[p+1])``."""
    mention_passage = np.asarray(mention_passage)
    if len(mention_passage) and np.any(np.diff(mention_passage) < 0):
        raise ArtifactError("mentions are not ordered by passage")
    return np.searchsorted(mention_passage, np.arange(n_passages + 1)).astype(np.int64)


def mention_incidence(mention_entity: np.ndarray, mention_passage: np.ndarray, n_entities: int,
                      n_passages: int) -> sp.csr_matrix:
    """Which passages mention which entities: the 0/1 (n_entities, n_passages) CSR matrix with a one at
    [e, p] when passage p has at least one mention of e.

    Row e lists the passages mentioning e, sorted; the transpose (``.T.tocsr()``) lists the distinct
    entities each passage mentions, sorted. (Not EP, which holds each entity's top-mu TF-IDF passages.)"""
    m = sp.csr_matrix((np.ones(len(mention_entity), np.float32), (mention_entity, mention_passage)),
                      shape=(n_entities, n_passages))
    m.sum_duplicates()
    m.data[:] = 1.0
    return m


def concat_ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The ranges ``[starts[i], starts[i] + lengths[i])`` one after another, as one int64 array:
    ``concatenate([arange(s, s + n) for s, n in zip(starts, lengths)])`` without a Python loop.

    Slices the rows of a ragged (CSR) array at once: ``indices[concat_ranges(indptr[r], indptr[r + 1] - indptr[r])]``
    holds rows r one after another. O(sum of lengths)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    shift = np.repeat(np.asarray(starts, dtype=np.int64) - (np.cumsum(lengths) - lengths), lengths)
    return np.arange(total, dtype=np.int64) + shift


def ragged_expand(indptr: np.ndarray, indices: np.ndarray, data: np.ndarray | None,
                  rows: np.ndarray, entity_ids: np.ndarray, weights: np.ndarray):
    """Z^T A for a batch of sparse entity sets, by slicing the rows of their non-zero entities.

    The batch is given as coordinates: ``Z[rows[i], entity_ids[i]] = weights[i]``. With
    ``data=None`` A is the 0/1 indicator, else its stored values. Returns coordinates
    ``(rows, mention_ids, weights)`` of ``Z^T A``, sorted by (row, mention), one entry per pair::

        out[b, m] = sum_e Z[b, e] * A[e, m]
    """
    rows = np.asarray(rows, dtype=np.int64)
    entity_ids = np.asarray(entity_ids, dtype=np.int64)
    weights = np.asarray(weights)
    starts, ends = indptr[entity_ids], indptr[entity_ids + 1]
    lengths = ends - starts
    positions = concat_ranges(starts, lengths)  # (sum lengths,) O(K mu)
    mentions = np.asarray(indices[positions], dtype=np.int64)
    values = np.repeat(weights, lengths)
    if data is not None:
        values = values * np.asarray(data[positions])
    out_rows = np.repeat(rows, lengths)
    n_mentions = int(mentions.max()) + 1 if len(mentions) else 1
    keys, summed = _sum_by_key(out_rows * n_mentions + mentions, values)
    return keys // n_mentions, keys % n_mentions, summed


def _sum_by_key(keys: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct `keys` (sorted) and the sum of `values` over each; O(n log n).

    When the keys are dense (key range at most 4n) they are summed in a bincount, O(n); else the
    position of each entry is packed into the low bits of its key so that one plain in-place sort
    (much faster than ``argsort`` or ``np.unique``) orders keys and values together, O(n log n).
    """
    n = len(keys)
    if n == 0:
        return keys.astype(np.int64), np.zeros(0, np.float32)
    key_range = int(keys.max()) + 1
    if key_range <= 4 * n:
        present = np.flatnonzero(np.bincount(keys, minlength=key_range))
        sums = np.bincount(keys, weights=values, minlength=key_range)[present]
        return present.astype(np.int64), sums.astype(np.float32)
    pos_bits = int(n).bit_length()
    if (key_range - 1).bit_length() + pos_bits <= 63:
        packed = (keys.astype(np.int64) << pos_bits) | np.arange(n, dtype=np.int64)
        packed.sort()
        order = packed & ((1 << pos_bits) - 1)
        sorted_keys = packed >> pos_bits
    else:
        order = np.argsort(keys, kind="stable")
        sorted_keys = keys[order]
    starts = np.flatnonzero(np.concatenate(([True], sorted_keys[1:] != sorted_keys[:-1])))
    sums = np.add.reduceat(np.asarray(values, dtype=np.float64)[order], starts)
    return sorted_keys[starts], sums.astype(np.float32)
