"""The question-time graph of the follow and the dense scores on it.

`FollowGraph` holds what a follow reads from the index: EP (entity -> its top-mu TF-IDF passages, with
the relative TF-IDF score of each entry), mention -> passage and mention -> entity (B_{M->E}), and the
mention vectors f(M) in memory. On it, the two dense computations of a hop: the scores
``f(m) . g[row]`` of given (row, mention) pairs (`pair_scores`), and their gradient with respect to the
queries g (`gather_gradient`), joined by `searched_scores` into one differentiable function.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch

from drkit.errors import ConfigError
from drkit.index.sparse import SparseIndex, passage_mention_indptr


class FollowGraph:
    """The index data the follow needs: EP (entity -> top-mu passages), mention -> passage and entity,
    and the mention vectors f(m) as one in-memory tensor."""

    def __init__(self, entity_passage_indptr: np.ndarray, entity_passage: np.ndarray, mention_passage: np.ndarray,
                 mention_entity: np.ndarray, n_entities: int, n_passages: int, vectors: torch.Tensor):
        self.entity_passage_indptr = np.asarray(entity_passage_indptr, dtype=np.int64)  # (E+1,) EP as CSR
        self.entity_passage = np.asarray(entity_passage, dtype=np.int64)  # (nnz_EP,) passage ids, sorted per entity
        self.mention_passage = np.asarray(mention_passage, dtype=np.int64)  # (M,) sorted
        self.mention_entity = np.asarray(mention_entity, dtype=np.int64)  # (M,) B_{M->E}
        self.n_entities = int(n_entities)
        self.n_passages = int(n_passages)
        if vectors.shape[0] != len(self.mention_entity):
            raise ConfigError(f"{vectors.shape[0]} mention vectors for {len(self.mention_entity)} mentions")
        self.vectors = vectors  # (M, p) f(M)
        # (nnz_EP,) log(score(e, p) / max_p' score(e, p')) <= 0 per entry of EP, for the weighted A; None: 0/1 only
        self.entity_passage_log_rel: torch.Tensor | None = None
        self._cast: dict[torch.dtype, torch.Tensor] = {}
        self.passage_mention_indptr = passage_mention_indptr(self.mention_passage, self.n_passages)  # (P+1,)
        # (nnz_EP,) each EP entry (entity, passage) as one key, entity * P + passage: sorted
        entry_entity = np.repeat(np.arange(self.n_entities, dtype=np.int64), np.diff(self.entity_passage_indptr))
        self.entity_passage_keys = entry_entity * self.n_passages + self.entity_passage

    @classmethod
    def from_index(cls, index: SparseIndex, vectors) -> "FollowGraph":
        vec = torch.from_numpy(np.array(vectors, copy=True)) if isinstance(vectors, np.ndarray) else vectors
        graph = cls(index.entity_passage_indptr, index.entity_passage, index.mentions[:, 1], index.mentions[:, 0],
                    index.n_entities, index.n_passages, vec)
        graph.set_passage_scores(np.asarray(index.entity_passage_score))
        return graph

    def set_passage_scores(self, scores: np.ndarray) -> None:
        """The TF-IDF score G(e).F(d) of each entry of EP; stored as log(score / the entity's best score)."""
        scores = np.asarray(scores, dtype=np.float64)
        lengths = np.diff(self.entity_passage_indptr)
        best = np.zeros(len(lengths))
        nonempty = lengths > 0
        best[nonempty] = np.maximum.reduceat(scores, self.entity_passage_indptr[:-1][nonempty]) if len(scores) else 0
        rel = scores / np.repeat(np.where(best > 0, best, 1.0), lengths)
        self.entity_passage_log_rel = torch.from_numpy(np.log(np.clip(rel, 1e-30, 1.0)))  # float64: exact for the tests

    def vectors_as(self, dtype: torch.dtype) -> torch.Tensor:
        """f(M) in `dtype` (kept after the first call: the backward pass of every hop needs it)."""
        if dtype not in self._cast:
            self._cast[dtype] = self.vectors.to(dtype)
        return self._cast[dtype]

    def pair_scores(self, queries: torch.Tensor, rows: np.ndarray, mentions: np.ndarray, chunk: int = 1024) -> np.ndarray:
        """``s_i = f(mentions[i]) . g[rows[i]]`` for each pair i, no gradient: (n,).

        Each score is one reduction over its own pair's two vectors, so a pair scores the same whatever
        else is scored with it: a question gets the same scores alone and in any batch. For float32
        queries, both vectors are rounded to bf16 (as exact MIPS reads them), their p products (exact in
        float32) are summed in float32 and the sum is rounded to bf16 (as exact MIPS returns it); float64
        queries are scored in float64.

        The pairs' vectors are gathered `chunk` pairs at a time: O(n p) work, O(chunk p) memory. (A
        matrix product ``g f(M)^T`` read at the pairs is faster when they cover much of batch x M, but
        its sums run in an order that depends on the matrices' shapes, that is, on the batch.)"""
        compute = torch.bfloat16 if queries.dtype == torch.float32 else queries.dtype
        vec = self.vectors_as(compute)  # (M, p)
        q = queries.detach().to(compute).to(queries.dtype)  # (batch, p), bf16-rounded for float32 queries
        rows_t = torch.from_numpy(np.asarray(rows, dtype=np.int64))
        mentions_t = torch.from_numpy(np.asarray(mentions, dtype=np.int64))
        out = torch.empty(len(mentions_t), dtype=compute)  # (n,)
        for lo in range(0, len(mentions_t), chunk):
            f = vec.index_select(0, mentions_t[lo : lo + chunk]).to(queries.dtype)  # (chunk, p)
            g = q.index_select(0, rows_t[lo : lo + chunk])  # (chunk, p)
            out[lo : lo + chunk] = (f * g).sum(-1)  # rounded to `compute` on assignment
        return out.to(queries.dtype).numpy()

    def gather_gradient(self, rows: np.ndarray, mentions: np.ndarray, grad: torch.Tensor, batch: int) -> torch.Tensor:
        """``out[b] = sum_i grad[i] f(mentions[i])`` over the i with ``rows[i] = b``: (batch, p).

        A sparse (batch x M) matrix times f(M), CSR, so no (n, p) copy of the vectors is made."""
        f = self.vectors_as(grad.dtype)
        if len(mentions) == 0:
            return torch.zeros(batch, f.shape[1], dtype=grad.dtype)
        order = np.lexsort((mentions, rows))
        crow = torch.from_numpy(np.searchsorted(rows[order], np.arange(batch + 1)).astype(np.int64))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
            sparse = torch.sparse_csr_tensor(crow, torch.from_numpy(mentions[order]), grad[torch.from_numpy(order)],
                                             size=(batch, f.shape[0]), check_invariants=False)
        return sparse @ f

    def searched_scores(self, queries: torch.Tensor, scores: np.ndarray, rows: np.ndarray,
                        mentions: np.ndarray) -> torch.Tensor:
        """``f(mentions[i]) . queries[rows[i]]`` as a function of the queries: (n,).

        The values are `scores` (from the search or `pair_scores`); the gradient is `gather_gradient`'s."""
        return _SearchedScores.apply(queries, torch.from_numpy(scores), rows, mentions, self)


class _SearchedScores(torch.autograd.Function):
    """The MIPS scores ``f(m) . g[row]`` of the retrieved mentions as a function of the queries g:
    the values come from the search, the gradient is ``sum_i grad_i f(m_i)`` per row."""

    @staticmethod
    def forward(ctx, queries, scores, rows, mentions, graph):
        ctx.rows, ctx.mentions, ctx.graph, ctx.batch = rows, mentions, graph, queries.shape[0]
        return scores.to(queries.dtype)

    @staticmethod
    def backward(ctx, grad):
        return ctx.graph.gather_gradient(ctx.rows, ctx.mentions, grad, ctx.batch), None, None, None, None
