"""Maximum inner product search over mention vectors, behind one contract::

    scores, ids = index.search(queries, k)   # (B, p) float32 -> (B, k) float32, (B, k) int64

`ExactMIPS` multiplies the queries with blocks of the (memory-mapped) vectors and merges the
per-block top-k; `FaissMIPS` is an approximate inverted-file index (optional dependency
``faiss-cpu``): IVF over the full vectors, or IVF-PQ (``pq_m`` codes of one byte a vector in memory,
the vectors themselves left on disk) whose short list of ``rerank * k`` candidates is scored again
exactly from the memory-mapped fp16 vectors. `recall_at_k` measures either against the exact search. Rows of fewer than k results
(k larger than the number of vectors) are padded with score -inf and id -1.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from drkit.errors import ArtifactError, ConfigError
from drkit.util.artifact import file_checksum, read_manifest
from drkit.util.hardware import choose
from drkit.util.pages import will_need
from drkit.util.sampling import sample_rows


def _as_queries(queries, dim: int) -> torch.Tensor:
    q = torch.as_tensor(np.asarray(queries, dtype=np.float32))
    if q.ndim == 1:
        q = q[None]
    if q.ndim != 2 or q.shape[1] != dim:
        raise ValueError(f"queries must have shape (batch, {dim}), got {tuple(q.shape)}")
    return q


class ExactMIPS:
    """Exact top-k inner products, computed block by block in `compute_dtype` (by default bf16 where the
    hardware computes it natively, else float32: `drkit.util.hardware`).

    `vectors` is (M, p), any float dtype, possibly a read-only memory map; each block is cast to
    `compute_dtype` when searched, so memory stays O(block_size * p) beyond the vectors.
    """

    def __init__(self, vectors: np.ndarray, block_size: int = 1 << 16, compute_dtype: torch.dtype | None = None):
        if vectors.ndim != 2:
            raise ValueError(f"vectors must be 2-D, got shape {vectors.shape}")
        self.vectors = vectors
        self.block_size = block_size
        self.compute_dtype = compute_dtype if compute_dtype is not None else choose("auto", "cpu").score_dtype
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
        """Keep every block in memory in `compute_dtype` (faster search, p * M * 2 bytes in bf16, 4 in float32). `shared`:
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
        # the blocks' device: a cache made on a GPU (`cache(shared)`) is searched there; the results come back to the CPU
        dev = self._blocks[0].device if self._blocks else torch.device("cpu")
        q = _as_queries(queries, self.dim).to(dev, self.compute_dtype)  # (B, p)
        best_scores = torch.full((q.shape[0], 0), float("-inf"), device=dev)
        best_ids = torch.zeros((q.shape[0], 0), dtype=torch.int64, device=dev)
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
        return _pad(best_scores.cpu().numpy(), best_ids.cpu().numpy(), k)


def _pad(scores: np.ndarray, ids: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    if scores.shape[1] >= k:
        return scores.astype(np.float32), ids.astype(np.int64)
    pad = k - scores.shape[1]
    return (np.pad(scores.astype(np.float32), ((0, 0), (0, pad)), constant_values=-np.inf),
            np.pad(ids.astype(np.int64), ((0, 0), (0, pad)), constant_values=-1))


def import_faiss():
    """The faiss module; `ConfigError` saying how to install it when it is missing."""
    try:
        import faiss
    except ImportError as exc:
        raise ConfigError("approximate MIPS needs faiss: pip install faiss-cpu") from exc
    return faiss


class FaissMIPS:
    """Approximate MIPS: a FAISS inverted-file index over the vectors.

    `nlist` lists are trained by k-means on a sample; a search visits the `nprobe` nearest lists. Without
    `pq_m` the lists hold the vectors (IVF-Flat, 4 bytes a value in memory). With `pq_m` they hold product-
    quantized codes (IVF-PQ: `pq_m` bytes a vector, e.g. 32 for p = 256, against 512 in fp16 on disk), and
    the `rerank * k` best candidates of the codes are scored again exactly (float32) from `vectors`, which
    stay memory-mapped: only the short lists' rows are read.
    """

    def __init__(self, vectors: np.ndarray, nlist: int | None = None, nprobe: int = 32, train_size: int = 100_000,
                 seed: int = 0, pq_m: int | None = None, rerank: int = 4, add_block: int = 1 << 16, _index=None):
        faiss = import_faiss()
        n, dim = vectors.shape
        self.dim, self.vectors, self.pq_m, self.rerank = dim, vectors, pq_m, rerank
        if _index is not None:  # `load`: a trained, filled index read from disk
            self.index = _index
            self.index.nprobe = min(nprobe, self.index.nlist)
            return
        if pq_m is not None and (pq_m < 1 or dim % pq_m):
            raise ConfigError(f"pq_m must divide the vector size {dim}, got {pq_m}")
        if rerank < 1:
            raise ConfigError(f"rerank must be at least 1, got {rerank}")
        if pq_m is not None and n < 256:
            raise ConfigError(f"IVF-PQ needs at least 256 vectors to train its codes, this index has {n}; "
                              "use exact MIPS")
        nlist = max(1, min(nlist or int(4 * np.sqrt(n)), n))
        quantizer = faiss.IndexFlatIP(dim)
        if pq_m is None:
            self.index = faiss.IndexIVFFlat(quantizer, dim, nlist, faiss.METRIC_INNER_PRODUCT)
        else:
            self.index = faiss.IndexIVFPQ(quantizer, dim, nlist, pq_m, 8, faiss.METRIC_INNER_PRODUCT)
        self._keep_alive = quantizer  # the index does not own its quantizer
        need = nlist * 39 if pq_m is None else max(nlist * 39, 256 * 39)  # k-means wants ~39 points a centroid
        sample = sample_rows(n, min(n, max(train_size, need)), seed)
        self.index.train(np.ascontiguousarray(vectors[np.sort(sample)], dtype=np.float32))
        for lo in range(0, n, add_block):
            self.index.add(np.ascontiguousarray(vectors[lo : lo + add_block], dtype=np.float32))
        self.index.nprobe = min(nprobe, nlist)

    def save(self, path) -> None:
        """Write the trained, filled FAISS index (FAISS's own binary format) to the file `path`."""
        import_faiss().write_index(self.index, str(path))

    @classmethod
    def load(cls, path, vectors: np.ndarray, nprobe: int = 32, rerank: int = 4) -> "FaissMIPS":
        """A FAISS index written by `save`, over `vectors` (which it re-scores from, for IVF-PQ)."""
        faiss = import_faiss()
        raw = faiss.read_index(str(path))
        index = faiss.downcast_index(raw)  # the same C++ index, typed (IVF-PQ or IVF-Flat)
        if index.ntotal != len(vectors) or index.d != vectors.shape[1]:
            raise ConfigError(f"{path} indexes {index.ntotal} vectors of size {index.d}, not {len(vectors)} of size "
                              f"{vectors.shape[1]}")
        pq_m = int(index.pq.M) if isinstance(index, faiss.IndexIVFPQ) else None
        out = cls(vectors, nprobe=nprobe, pq_m=pq_m, rerank=rerank, _index=index)
        out._keep_alive = raw  # the proxy that owns the index
        return out

    def __len__(self) -> int:
        return self.index.ntotal

    @property
    def memory_bytes(self) -> int:
        """Bytes the lists hold: codes (IVF-PQ) or vectors (IVF-Flat), and their ids."""
        per = self.pq_m if self.pq_m is not None else 4 * self.dim
        return int(self.index.ntotal * (per + 8))

    def search(self, queries, k: int) -> tuple[np.ndarray, np.ndarray]:
        q = np.ascontiguousarray(_as_queries(queries, self.dim).numpy())
        if self.pq_m is None:
            scores, ids = self.index.search(q, k)
            scores = np.where(ids < 0, -np.inf, scores)
            return scores.astype(np.float32), ids.astype(np.int64)
        _, cand = self.index.search(q, min(len(self), k * self.rerank))  # (B, rerank k), -1 padded
        will_need(self.vectors, np.unique(cand[cand >= 0]))  # every row's short list read from disk at once
        scores = np.full((len(q), k), -np.inf, dtype=np.float32)
        ids = np.full((len(q), k), -1, dtype=np.int64)
        for b in range(len(q)):
            c = cand[b][cand[b] >= 0]
            if not len(c):
                continue
            rows = np.sort(c)  # in file order: the memory map is read forwards
            exact = np.asarray(self.vectors[rows], dtype=np.float32) @ q[b]  # (n,) exact re-scoring
            top = np.lexsort((rows, -exact))[:k]  # best first, ties by the lower id
            scores[b, : len(top)], ids[b, : len(top)] = exact[top], rows[top]
        return scores, ids


MIPS_KINDS = ("exact", "faiss", "ivfpq")


def recall_at_k(approximate, exact, queries, k: int) -> float:
    """Mean fraction of the exact top-k ids that the approximate search also returns."""
    _, approx_ids = approximate.search(queries, k)
    _, exact_ids = exact.search(queries, k)
    hits = [len(np.intersect1d(a[a >= 0], e[e >= 0])) / max(1, int((e >= 0).sum())) for a, e in zip(approx_ids, exact_ids)]
    return float(np.mean(hits))


# -- a saved IVF-PQ index (`drkit ann`) ------------------------------------------------------------------
ANN_FORMAT = "drkit.ann_index"
ANN_FORMAT_VERSION = 1


def default_pq_m(dim: int) -> int:
    """Bytes a vector of IVF-PQ codes by default: about one a 8 values, dividing `dim`."""
    return next(m for m in range(max(1, dim // 8), 0, -1) if dim % m == 0)


def mention_identity(mentions) -> dict:
    """What names a mention index exactly: its path, size and the checksum of its manifest (which holds its
    creation time, encoder and sparse index), without reading its vectors."""
    return {"path": str(mentions.path), "manifest_sha256": file_checksum(mentions.path / "manifest.json")["sha256"],
            "mentions": len(mentions), "dim": mentions.dim}


def load_ann(mentions, path: str | Path, nprobe: int = 32, rerank: int = 4) -> "FaissMIPS":
    """The IVF-PQ index `drkit.dense.ann.build_ann_index` wrote for `mentions` (a
    `drkit.dense.mentions.MentionIndex`); refused for another mention index."""
    path = Path(path)
    manifest = read_manifest(path, ANN_FORMAT, ANN_FORMAT_VERSION)
    if manifest["mentions"]["manifest_sha256"] != mention_identity(mentions)["manifest_sha256"]:
        raise ArtifactError(f"{path} was built over the mention index {manifest['mentions']['path']}, not "
                            f"{mentions.path}; build it again: drkit ann --mentions {mentions.path} --out {path} --overwrite")
    return FaissMIPS.load(path / "index.faiss", mentions.vectors, nprobe=nprobe, rerank=rerank)
