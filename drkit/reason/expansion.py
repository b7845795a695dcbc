"""The sparse expansion of the follow, step 1 of equation 5: ``w = Z^T A`` per (row, passage).

A[e, m] is non-zero when mention m lies in one of e's top-mu TF-IDF passages, and its value depends
on the passage only, so ``(Z^T A)[m] = w[passage(m)]``: the expansion is computed per passage, from
EP (entity -> its top-mu passages), in O(nnz(Z) mu), and read at any mention of the passage.
"""

from __future__ import annotations

import numpy as np
import torch

from drkit.index.sparse import concat_ranges
from drkit.reason.entity_set import EntitySet
from drkit.reason.graph import FollowGraph

_DENSE_LIMIT = 1 << 26  # batch x passages below which passage weights live in one dense vector


class PassageWeights:
    """``w = Z^T A`` per (row, passage): the summed probability of the entities whose top-mu passages
    include p, each times ``(score(e, p) / best score of e) ** power`` (power 0: the 0/1 indicator).

    Sums are accumulated in float64, so that removing one entity's own term (`lookup` with
    `entities`) leaves the others' exact sum even when it is tiny next to the removed one."""

    def __init__(self, z: EntitySet, graph: FollowGraph, power: float | torch.Tensor | None = None):
        self.z, self.graph, self.power = z, graph, power
        indptr = graph.entity_passage_indptr
        e = z.ids.numpy()  # (N,)
        starts, lengths = indptr[e], indptr[e + 1] - indptr[e]
        src = torch.from_numpy(np.repeat(np.arange(len(e)), lengths))  # (n,) the Z entry of each EP entry read
        positions = concat_ranges(starts, lengths)  # (n,) positions in EP
        keys = z.rows.numpy()[src.numpy()] * graph.n_passages + graph.entity_passage[positions]  # (n,) row * P + passage
        values = z.probs[src].double() * self._factor(positions)  # (n,) Z[row, e] A[e, passage]
        self.n_passages = graph.n_passages
        space = z.batch_size * graph.n_passages
        self.dense = space <= _DENSE_LIMIT
        if self.dense:
            self.counts = np.bincount(keys, minlength=space)
            self.weights = torch.zeros(space, dtype=torch.float64).index_add(0, torch.from_numpy(keys), values)
        else:
            self.keys, inverse, self.counts = np.unique(keys, return_inverse=True, return_counts=True)
            self.weights = torch.zeros(len(self.keys), dtype=torch.float64).index_add(0, torch.from_numpy(inverse), values)

    def _factor(self, positions: np.ndarray) -> torch.Tensor | float:
        """``(score(e, p) / best score of e) ** power`` of the EP entries at `positions`; 1.0 for the 0/1 A."""
        power, log_rel = self.power, self.graph.entity_passage_log_rel
        if power is None or log_rel is None or (not torch.is_tensor(power) and power == 0):
            return 1.0
        return torch.exp(power * log_rel[torch.from_numpy(positions)])

    def lookup(self, rows: np.ndarray, passages: np.ndarray, entities: np.ndarray | None = None):
        """(present mask, float64 weights of the present pairs) for the pairs (rows[i], passages[i]).

        With `entities`, pair i leaves out entity entities[i]'s own term (no self-loops in A)."""
        keys = rows * self.n_passages + passages
        if self.dense:
            slot, found = keys, np.ones(len(keys), bool)
        else:
            slot, found = _find(self.keys, keys)
        counts = np.where(found, self.counts[slot], 0)
        weights = self.weights[torch.from_numpy(slot)]
        if entities is not None:
            z_slot, in_z = _find(self.z.rows.numpy() * self.graph.n_entities + self.z.ids.numpy(),
                                 rows * self.graph.n_entities + entities)
            entry, is_entry = _find(self.graph.entity_passage_keys, entities * self.graph.n_passages + passages)
            own = in_z & is_entry
            counts = counts - own
            sel = np.flatnonzero(own)
            own_term = self.z.probs[torch.from_numpy(z_slot[sel])].double() * self._factor(entry[sel])
            weights = weights.index_add(0, torch.from_numpy(sel), -own_term)
        present = counts > 0
        return present, weights[torch.from_numpy(np.flatnonzero(present))]


def _find(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of `keys` in `sorted_keys` (clipped) and whether each is there."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return pos, sorted_keys[pos] == keys
