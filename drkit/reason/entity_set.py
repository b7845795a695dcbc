"""Weighted entity sets Z: a batch of sparse distributions over the entities, as coordinates.

Row b of Z is never a dense |E| vector: an `EntitySet` holds the non-zero coordinates (row, entity) with
their probabilities, sorted by (row, entity). The follow maps one to the next (`drkit.reason.follow`);
`entity_set_mean` gives ``Z^T E`` for an entity table E.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass
class EntitySet:
    """A batch of weighted entity sets: ``Z[rows[i], ids[i]] = probs[i]``, sorted by (row, id), unique."""

    rows: torch.Tensor  # (N,) int64
    ids: torch.Tensor  # (N,) int64
    probs: torch.Tensor  # (N,) float
    batch_size: int
    logits: torch.Tensor | None = None  # (N,) log probs, when computed by a follow

    @classmethod
    def one_hot(cls, entity_ids, dtype=torch.float32) -> "EntitySet":
        """One entity per row with probability 1; a negative id gives an empty row."""
        ids = torch.as_tensor(np.asarray(entity_ids, dtype=np.int64))
        rows = torch.arange(len(ids))
        keep = ids >= 0
        return cls(rows[keep], ids[keep], torch.ones(int(keep.sum()), dtype=dtype), len(ids))

    def __len__(self) -> int:
        return len(self.ids)

    def to(self, device: torch.device) -> "EntitySet":
        """The same set on `device` (differentiable in the probabilities; itself when already there)."""
        if self.ids.device == torch.device(device):
            return self
        move = (lambda t: None if t is None else t.to(device))
        return EntitySet(move(self.rows), move(self.ids), move(self.probs), self.batch_size, move(self.logits))

    def to_dense(self, n_entities: int) -> torch.Tensor:
        """(batch, n_entities); for tests and small inputs only."""
        out = torch.zeros(self.batch_size, n_entities, dtype=self.probs.dtype)
        return out.index_put((self.rows, self.ids), self.probs)

    def row(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Entity ids and probabilities of row `b`, most probable first."""
        sel = (self.rows == b).nonzero().squeeze(1)
        ids = self.ids[sel].numpy()
        probs = self.probs[sel].detach().float().numpy()
        order = np.lexsort((ids, -probs))
        return ids[order], probs[order]

    def row_starts(self) -> np.ndarray:
        """(batch + 1,): row b's entries are ``[starts[b], starts[b + 1])`` (the entries are sorted by row)."""
        return np.searchsorted(self.rows.numpy(), np.arange(self.batch_size + 1))

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(batch, k) entity ids and probabilities, best first; padded with id -1 and probability 0."""
        ids = np.full((self.batch_size, k), -1, dtype=np.int64)
        probs = np.zeros((self.batch_size, k), dtype=np.float32)
        r = self.rows.numpy()
        e = self.ids.numpy()
        p = self.probs.detach().float().numpy()
        # by row, then probability down, then id up. Entries sorted by (row, id) with probabilities in [0, 1] (what
        # every set is): one stable sort of 2 r + (1 - p), exact in float64 for a float32 p, in a third of the time
        # of the lexsort that any other input takes
        ordered = len(r) < 2 or bool(np.all((r[1:] > r[:-1]) | ((r[1:] == r[:-1]) & (e[1:] > e[:-1]))))
        if ordered and len(p) and 0 <= p.min() and p.max() <= 1:
            order = np.argsort(2.0 * r + (1.0 - p.astype(np.float64)), kind="stable")
        else:
            order = np.lexsort((e, -p, r))
        r, e, p = r[order], e[order], p[order]
        starts = np.searchsorted(r, np.arange(self.batch_size))
        rank = np.arange(len(r)) - starts[r]
        keep = rank < k
        ids[r[keep], rank[keep]] = e[keep]
        probs[r[keep], rank[keep]] = p[keep]
        return ids, probs


def entity_set_mean(z: EntitySet, table: torch.Tensor) -> torch.Tensor:
    """``Z^T E`` for a (n_entities, d) table: (batch, d), differentiable in Z's probabilities."""
    out = torch.zeros(z.batch_size, table.shape[1], dtype=table.dtype)
    return out.index_add(0, z.rows, z.probs.unsqueeze(1).to(table.dtype) * table[z.ids])
