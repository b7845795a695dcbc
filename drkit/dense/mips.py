"""Maximum inner product search over mention vectors, behind one contract::

    scores, ids = index.search(queries, k)   # (B, p) float32 -> (B, k) float32, (B, k) int64

`ExactMIPS` multiplies the queries with blocks of the (memory-mapped) vectors and merges the
per-block top-k; `FaissMIPS` is an approximate inverted-file index (optional dependency
``faiss-cpu``) that reports its recall@k against the exact search. Rows of fewer than k results
(k larger than the number of vectors) are padded with score -inf and id -1.
"""

from __future__ import annotations

import numpy as np
import torch

from drkit.errors import ConfigError
from drkit.util.sampling import sample_rows


def _as_queries(queries, dim: int) -> torch.Tensor:
    q = torch.as_tensor(np.asarray(queries, dtype=np.float32))
    if q.ndim == 1:
        q = q[None]
    if q.ndim != 2 or q.shape[1] != dim:
        raise ValueError(f"queries must have shape (batch, {dim}), got {tuple(q.shape)}")
    return q


class ExactMIPS:
    """Exact top-k inner products, computed block by block in `compute_dtype` (bf16 by default).

    `vectors` is (M, p), any float dtype, possibly a read-only memory map; each block is cast to
    `compute_dtype` when searched, so memory stays O(block_size * p) beyond the vectors.
    """

    def __init__(self, vectors: np.ndarray, block_size: int = 1 << 16, compute_dtype: torch.dtype = torch.bfloat16):
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be 2-D, got shape {vectors.shape}")
        self.vectors = vectors
        self.block_size = block_size
        self.compute_dtype = compute_dtype
        self._blocks: list[torch.Tensor] | None = None

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def _iter_blocks(self):
        if self._blocks is not None:
            yield from self._blocks
            return
        for lo in range(0, len(self), self.block_size):
            yield torch.from_numpy(np.asarray(self.vectors[lo : lo + self.block_size], dtype=np.float32)).to(self.compute_dtype)

    def cache(self, shared: torch.Tensor | None = None) -> "ExactMIPS":
        """Keep every block in memory in `compute_dtype` (faster search, p * M * 2 bytes in bf16). `shared`:
        the vectors already in memory in `compute_dtype`, (M, p); the blocks are then views of it, no copy."""
        if shared is not None:
            if tuple(shared.shape) != tuple(self.vectors.shape) or shared.dtype != self.compute_dtype:
                raise ValueError(f"shared vectors must be {tuple(self.vectors.shape)} {self.compute_dtype}, "
                                 f"got {tuple(shared.shape)} {shared.dtype}")
            self._blocks = [shared[lo : lo + self.block_size] for lo in range(0, len(self), self.block_size)]
        else:
            self._blocks = list(self._iter_blocks())
        return self

    @torch.no_grad()
    def search(self, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = _as_queries(queries, self.dim).to(self.compute_dtype)  # (B, p)
        best_scores = torch.full((q.shape[0], 0), float("-inf"))
        best_ids = torch.zeros((q.shape[0], 0), dtype=torch.int64)
        offset = 0
        for block in self._iter_blocks():
            scores = (q @ block.T).float()  # (B, block)
            top = scores.topk(min(k, scores.shape[1]), dim=1)
            best_scores = torch.cat([best_scores, top.values], dim=1)
            best_ids = torch.cat([best_ids, top.indices + offset], dim=1)
            if best_scores.shape[1] > k:
                keep = best_scores.topk(k, dim=1)
                best_scores, best_ids = keep.values, best_ids.gather(1, keep.indices)
            offset += block.shape[0]
        order = best_scores.argsort(dim=1, descending=True, stable=True)
        best_scores, best_ids = best_scores.gather(1, order), best_ids.gather(1, order)
        return _pad(best_scores.numpy(), best_ids.numpy(), k)


def _pad(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if scores.shape[1] >= k:
        return scores.astype(np.float32), ids.astype(np.int64)
    pad = k - scores.shape[1]
    return (np.pad(scores.astype(np.float32), ((0, 0), (0, pad)), constant_values=-np.inf),
            np.pad(ids.astype(np.int64), ((0, 0), (0, pad)), constant_values=-1))


class FaissMIPS:
    """Approximate MIPS: a FAISS inverted-file index (IVF, flat inner product) over the vectors.

    `nlist` lists are trained by k-means on a sample; a search visits the `nprobe` nearest lists.
    """

    def __init__(self, vectors: np.ndarray, nlist: int | None = None, nprobe: int = 32, train_size: int = 100_000,
                 seed: int = 0):
        try:
            import faiss
        except ImportError as exc:
            raise ConfigError("approximate MIPS needs faiss: pip install faiss-cpu") from exc
        n, dim = vectors.shape
        nlist = nlist or max(1, int(4 * np.sqrt(n)))
        quantizer = faiss.IndexFlatIP(dim)
        self.index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        sample = sample_rows(n, max(train_size, nlist * 39), seed)
        self.index.train(np.ascontiguousarray(vectors[sample], dtype=np.float32))
        for lo in range(0, n, 1 << 16):
            self.index.add(np.ascontiguousarray(vectors[lo : lo + (1 << 16)], dtype=np.float32))
        self.index.nprobe = min(nprobe, nlist)
        self.dim = dim

    def __len__(self) -> int:
        return self.index.ntotal

    def search(self, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = _as_queries(queries, self.dim).numpy()
        scores, ids = self.index.search(np.ascontiguousarray(q), k)
        scores = np.where(ids < 0, -np.inf, scores)
        return scores.astype(np.float32), ids.astype(np.int64)


def recall_at_k(approximate, exact, queries, k: int) -> float:
    """Mean fraction of the exact top-k ids that the approximate search also returns."""
    _, approx_ids = approximate.search(queries, k)
    _, exact_ids = exact.search(queries, k)
    hits = [len(np.intersect1d(a[a >= 0], e[e >= 0])) / max(1, int((e >= 0).sum())) for a, e in zip(approx_ids, exact_ids)]
    return float(np.mean(hits))
