"""The question-time graph of the follow and the dense scores on it.

`FollowGraph` holds what a follow reads from the index: EP (entity -> its top-mu TF-IDF passages, with
the relative TF-IDF score of each entry), mention -> passage and mention -> entity (B_{M->E}), the
mention vectors f(M) (the mention index's memory map), and where the index has them the link graph L
(entity -> entity, the A of the paper's HotpotQA setting), entity -> its mentions and the title entity of
each passage. On it, the two dense computations of a hop: the scores
``f(m) . g[row]`` of given (row, mention) pairs (`pair_scores`), and their gradient with respect to the
queries g (`gather_gradient`), joined by `searched_scores` into one differentiable function.
"""

from __future__ import annotations

import functools
import warnings

import numpy as np
import torch

from drkit.errors import ArtifactError, ConfigError
from drkit.index.csr import concat_ranges, passage_mention_indptr
from drkit.index.sparse import SparseIndex
from drkit.util.hardware import choose
from drkit.util.pages import will_need


class FollowGraph:
    """The index data the follow needs: EP (entity -> top-mu passages), mention -> passage and entity,
    and the mention vectors f(m) (a tensor, or a memory map read row by row); optionally the link graph L,
    entity -> mentions and passage -> title entity.

    The optional arrays are given to the constructor or, for a graph made by `from_index`, read from the
    index on first use (``getattr(index, name, None)``: an index without them gives None):

    * `entity_link_indptr` (E+1,), `entity_link` (nnz,): L as CSR, ``L[e, x] = 1`` iff e is mentioned on
      x's page or x on e's page; no diagonal. None when the index has no link graph.
    * `entity_mention_indptr` (E+1,), `entity_mentions` (M,): the mentions of each entity, ascending.
      Computed from `mention_entity` when neither the constructor nor the index gives them.
    * `passage_entity` (P,): the title entity of each passage, -1 for none; None when unknown.

    `source` names where the graph came from (the index directory) in error messages."""

    def __init__(self, entity_passage_indptr: np.ndarray, entity_passage: np.ndarray, mention_passage: np.ndarray,
                 mention_entity: np.ndarray, n_entities: int, n_passages: int, vectors: torch.Tensor | np.ndarray, *,
                 entity_link_indptr: np.ndarray | None = None, entity_link: np.ndarray | None = None,
                 entity_mention_indptr: np.ndarray | None = None, entity_mentions: np.ndarray | None = None,
                 passage_entity: np.ndarray | None = None, source: str = "the follow graph",
                 score_dtype: torch.dtype | None = None, device: torch.device | str | None = None):
        self.entity_passage_indptr = np.asarray(entity_passage_indptr, dtype=np.int64)  # (E+1,) EP as CSR
        # (nnz_EP,) passage ids, sorted per entity; the index's memory map is read as it is (int32), not copied
        self.entity_passage = entity_passage if isinstance(entity_passage, np.ndarray) and \
            entity_passage.dtype in (np.int32, np.int64) else np.asarray(entity_passage, dtype=np.int64)
        self.mention_passage = np.asarray(mention_passage, dtype=np.int64)  # (M,) sorted
        self.mention_entity = np.asarray(mention_entity, dtype=np.int64)  # (M,) B_{M->E}
        self.n_entities = int(n_entities)
        self.n_passages = int(n_passages)
        if vectors.shape[0] != len(self.mention_entity):
            raise ConfigError(f"{vectors.shape[0]} mention vectors for {len(self.mention_entity)} mentions")
        # (M, p) f(M): a tensor, or an array such as the mention index's read-only fp16 memory map (never
        # copied whole: `vectors_as` makes the one copy in the compute dtype, `rows_as` reads given rows)
        self.vectors = vectors
        # the TF-IDF score of each EP entry (nnz_EP,) and each entity's best (E,) float64, for the weighted A
        # (`log_rel`); None: 0/1 only. No per-entry array is derived from EP at load: what a hop needs of it
        # is computed for the entries it reads (`log_rel`, `find_entries`), so memory follows the work.
        self._scores: np.ndarray | None = None
        self._best: np.ndarray | None = None
        self._cast: dict[torch.dtype, torch.Tensor] = {}
        self.passage_mention_indptr = passage_mention_indptr(self.mention_passage, self.n_passages)  # (P+1,)
        self.source = source
        # the dtype float32 queries are scored in (`pair_scores`): bf16 where the hardware computes it natively,
        # else float32 (`drkit.util.hardware`); exact MIPS over the same vectors uses the same one
        # where the dense part of a hop runs (the pair scores and their gradient, on the copy of f(M) in the score
        # dtype that `vectors_as` makes there); the index's integer bookkeeping stays in numpy on the CPU
        self.device = torch.device(device or "cpu")
        self.score_dtype = score_dtype if score_dtype is not None else choose("auto", self.device.type).score_dtype
        self._index = None  # set by from_index: the optional arrays are read from it on first use
        self._given = {"entity_link": (entity_link_indptr, entity_link),
                       "entity_mentions": (entity_mention_indptr, entity_mentions), "passage_entity": passage_entity}

    @classmethod
    def from_index(cls, index: SparseIndex, vectors, score_dtype: torch.dtype | None = None,
                   device: torch.device | str | None = None) -> "FollowGraph":
        """The graph of `index` with the mention vectors `vectors` (the mention index's memory map: read, not copied)."""
        graph = cls(index.entity_passage_indptr, index.entity_passage, index.mentions[:, 1], index.mentions[:, 0],
                    index.n_entities, index.n_passages, vectors, source=f"the index {getattr(index, 'path', '?')}",
                    score_dtype=score_dtype, device=device)
        graph.set_passage_scores(np.asarray(index.entity_passage_score))
        graph._index = index
        return graph

    def _optional(self, key: str, *names: str):
        """The constructor's arrays for `key`, else the index's attributes `names` (None where absent)."""
        given = self._given[key]
        if not isinstance(given, tuple):
            given = (given,)
        if all(a is None for a in given) and self._index is not None:
            given = tuple(getattr(self._index, name, None) for name in names)
        if any(a is None for a in given):
            if any(a is not None for a in given):
                raise ArtifactError(f"{self.source}: {' and '.join(names)} must be given together")
            return None
        return tuple(np.asarray(a, dtype=np.int64) for a in given)

    def _check_csr(self, indptr: np.ndarray, indices: np.ndarray, rows: int, upper: int, names: tuple[str, str]) -> None:
        if indptr.shape != (rows + 1,) or indptr[0] != 0 or indptr[-1] != len(indices) or np.any(np.diff(indptr) < 0):
            raise ArtifactError(f"{self.source}: {names[0]} must be ({rows + 1},), from 0 to "
                                f"{len(indices)}, non-decreasing; got shape {indptr.shape}")
        if len(indices) and (indices.min() < 0 or indices.max() >= upper):
            raise ArtifactError(f"{self.source}: {names[1]} holds ids outside [0, {upper})")

    @functools.cached_property
    def _links(self) -> tuple[np.ndarray, np.ndarray] | None:
        pair = self._optional("entity_link", "entity_link_indptr", "entity_link")
        if pair is None:
            return None
        indptr, linked = pair
        self._check_csr(indptr, linked, self.n_entities, self.n_entities, ("entity_link_indptr", "entity_link"))
        own = np.repeat(np.arange(self.n_entities, dtype=np.int64), np.diff(indptr))
        if np.any(linked == own):
            e = int(own[np.flatnonzero(linked == own)[0]])
            raise ArtifactError(f"{self.source}: the link graph entity_link links entity {e} to itself (L has no diagonal)")
        return indptr, linked

    @property
    def entity_link_indptr(self) -> np.ndarray | None:
        """(E+1,) row pointers of the link graph L; None when there is none."""
        return None if self._links is None else self._links[0]

    @property
    def entity_link(self) -> np.ndarray | None:
        """(nnz,) L's entries: row e lists the entities linked to e; None when there is no link graph."""
        return None if self._links is None else self._links[1]

    def require_links(self, what: str) -> None:
        """A ConfigError naming the graph's index when it has no link graph L."""
        if self._links is None:
            raise ConfigError(f"{what} needs the link graph L (entity_link_indptr, entity_link), which {self.source} "
                              "does not have")

    @functools.cached_property
    def _entity_mention_csr(self) -> tuple[np.ndarray, np.ndarray]:
        pair = self._optional("entity_mentions", "entity_mention_indptr", "entity_mentions")
        if pair is None:
            order = np.argsort(self.mention_entity, kind="stable")  # by entity, then mention id
            indptr = np.searchsorted(self.mention_entity[order], np.arange(self.n_entities + 1)).astype(np.int64)
            return indptr, order.astype(np.int64)
        indptr, mentions = pair
        self._check_csr(indptr, mentions, self.n_entities, len(self.mention_entity),
                        ("entity_mention_indptr", "entity_mentions"))
        owner = np.repeat(np.arange(self.n_entities, dtype=np.int64), np.diff(indptr))
        if len(mentions) != len(self.mention_entity) or np.any(self.mention_entity[mentions] != owner):
            raise ArtifactError(f"{self.source}: entity_mentions does not list each mention once, under its entity")
        return indptr, mentions

    @property
    def entity_mention_indptr(self) -> np.ndarray:
        """(E+1,): entity e owns ``entity_mentions[indptr[e]:indptr[e+1]]``."""
        return self._entity_mention_csr[0]

    @property
    def entity_mentions(self) -> np.ndarray:
        """(M,) mention ids grouped by entity, ascending within each."""
        return self._entity_mention_csr[1]

    @functools.cached_property
    def passage_entity(self) -> np.ndarray | None:
        """(P,) the title entity of each passage (-1: none); None when the index does not say."""
        found = self._optional("passage_entity", "passage_entity")
        if found is None:
            return None
        (titles,) = found
        if titles.shape != (self.n_passages,) or (len(titles) and (titles.min() < -1 or titles.max() >= self.n_entities)):
            raise ArtifactError(f"{self.source}: passage_entity must be ({self.n_passages},) with ids in "
                                f"[-1, {self.n_entities}); got shape {titles.shape}")
        return titles

    @functools.cached_property
    def _pages(self) -> tuple[np.ndarray, np.ndarray] | None:
        from drkit.index.link_graph import pages  # the index's entity -> articles, here over passages

        return None if self.passage_entity is None else pages(self.passage_entity, self.n_entities)

    @property
    def entity_page_indptr(self) -> np.ndarray | None:
        """(E+1,) entity e's page is the passages ``entity_page[indptr[e]:indptr[e+1]]`` (none: e has no page);
        None when the graph does not know the passages' title entities."""
        return None if self._pages is None else self._pages[0]

    @property
    def entity_page(self) -> np.ndarray | None:
        """(P',) the passages of each entity's page (those whose title entity it is), ascending within an entity."""
        return None if self._pages is None else self._pages[1]

    def require_pages(self, what: str) -> None:
        """A ConfigError naming the graph's index when it does not know the passages' title entities."""
        if self._pages is None:
            raise ConfigError(f"{what} needs each passage's title entity (passage_entity), which {self.source} "
                              "does not have")

    def set_passage_scores(self, scores: np.ndarray) -> None:
        """The TF-IDF score G(e).F(d) of each entry of EP (kept as given: the index's memory map), and each
        entity's best score; `log_rel` reads log(score / the entity's best score) from them."""
        if len(scores) != len(self.entity_passage):
            raise ArtifactError(f"{self.source}: {len(scores)} passage scores for {len(self.entity_passage)} entries of EP")
        lengths = np.diff(self.entity_passage_indptr)
        best = np.zeros(len(lengths))
        nonempty = lengths > 0
        if len(scores) and nonempty.any():  # the max of the stored values, then widened: no float64 copy of them all
            best[nonempty] = np.maximum.reduceat(np.asarray(scores), self.entity_passage_indptr[:-1][nonempty])
        self._scores, self._best = scores, np.where(best > 0, best, 1.0)

    @property
    def has_passage_scores(self) -> bool:
        return self._scores is not None

    def will_need_entries(self, positions: np.ndarray) -> None:
        """Start reading the EP entries at `positions` (passage ids and scores) from their memory maps at once
        (`drkit.util.pages.will_need`): a hop that reads many entities' rows then waits for the disk once,
        not once a page. Changes nothing read."""
        will_need(self.entity_passage, positions)
        if self._scores is not None:
            will_need(self._scores, positions)

    def log_rel(self, positions: np.ndarray, owners: np.ndarray | None = None) -> torch.Tensor:
        """``log(score(e, p) / best score of e)`` <= 0 of the EP entries at `positions`: (n,) float64.
        `owners`: the entity of each entry, where the caller knows it (else found by a search of EP's rows)."""
        positions = np.asarray(positions, dtype=np.int64)
        owner = np.searchsorted(self.entity_passage_indptr, positions, side="right") - 1 if owners is None else owners
        rel = np.asarray(self._scores[positions], dtype=np.float64) / self._best[owner]
        return torch.from_numpy(np.log(np.clip(rel, 1e-30, 1.0)))  # float64: exact for the tests

    @property
    def entity_passage_log_rel(self) -> torch.Tensor | None:
        """`log_rel` of every EP entry (for analysis and tests; a hop reads only its entries)."""
        return None if self._scores is None else self.log_rel(np.arange(len(self.entity_passage)))

    def find_entries(self, entities: np.ndarray, passages: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Where each pair (entities[i], passages[i]) is in EP: (position, clipped where absent; found).
        Reads only the rows of the entities asked about: O(their entries), whatever the size of EP."""
        entities = np.asarray(entities, dtype=np.int64)
        passages = np.asarray(passages, dtype=np.int64)
        if len(entities) == 0 or len(self.entity_passage) == 0:
            return np.zeros(len(entities), np.int64), np.zeros(len(entities), bool)
        rows = np.unique(entities)
        lo = self.entity_passage_indptr[rows]
        n = self.entity_passage_indptr[rows + 1] - lo
        positions = concat_ranges(lo, n)  # the rows' entries, in EP order
        keys = np.repeat(rows, n) * self.n_passages + np.asarray(self.entity_passage[positions], dtype=np.int64)
        if len(keys) == 0:
            return np.zeros(len(entities), np.int64), np.zeros(len(entities), bool)
        want = entities * self.n_passages + passages
        at = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
        return positions[at], keys[at] == want

    @property
    def entity_passage_keys(self) -> np.ndarray:
        """(nnz_EP,) each EP entry as one sorted key, entity * P + passage (for analysis and tests)."""
        entry_entity = np.repeat(np.arange(self.n_entities, dtype=np.int64), np.diff(self.entity_passage_indptr))
        return entry_entity * self.n_passages + np.asarray(self.entity_passage, dtype=np.int64)

    def vectors_as(self, dtype: torch.dtype, block: int = 1 << 16) -> torch.Tensor:
        """f(M) in `dtype` on the graph's device, kept after the first call (the scores of every hop read it):
        made block by block from `vectors`, so that no other whole copy exists even for a moment. Question
        time and training ask only for the score dtype (bf16: 2 bytes a value, float32: 4; float64 in the
        exact tests)."""
        if dtype not in self._cast:
            if torch.is_tensor(self.vectors):
                self._cast[dtype] = self.vectors.to(self.device, dtype)
            else:
                out = torch.empty(tuple(self.vectors.shape), dtype=dtype, device=self.device)
                for lo in range(0, len(out), block):
                    part = torch.from_numpy(np.asarray(self.vectors[lo : lo + block], dtype=np.float32))
                    out[lo : lo + block] = part.to(self.device)
                self._cast[dtype] = out
        return self._cast[dtype]

    def _will_need_rows(self, ids: np.ndarray, dtype: torch.dtype) -> None:
        """Before `rows_as(ids, dtype)` reads a long list of rows in chunks: where they come from the memory map
        (no copy in `dtype`), every page asked for at once (`drkit.util.pages.will_need`)."""
        if dtype not in self._cast:
            will_need(self.vectors, ids)

    def rows_as(self, ids: np.ndarray, dtype: torch.dtype) -> torch.Tensor:
        """f(m) of the mentions `ids` in `dtype` on the graph's device: (len(ids), p), read from the copy in that
        dtype if there is one, else from `vectors` (exact: fp16 and bf16 values are exact in float32 and float64)."""
        ids = torch.from_numpy(np.asarray(ids, dtype=np.int64))
        if dtype in self._cast:
            return self._cast[dtype].index_select(0, ids.to(self.device))
        if torch.is_tensor(self.vectors):
            return self.vectors.index_select(0, ids.to(self.vectors.device)).to(self.device, dtype)
        # one rounding from the stored values (fp16 ones are exact in every wider type on the way)
        return torch.from_numpy(np.ascontiguousarray(self.vectors[ids.numpy()])).to(self.device, dtype)

    def pair_scores(self, queries: torch.Tensor, rows: np.ndarray, mentions: np.ndarray, chunk: int | None = None) -> np.ndarray:
        """``s_i = f(mentions[i]) . g[rows[i]]`` for each pair i, no gradient: (n,).

        Each score is one reduction over its own pair's two vectors, so a pair scores the same whatever
        else is scored with it: a question gets the same scores alone and in any batch. Float32 queries are
        scored in `score_dtype`: in bf16, both vectors are rounded to bf16 (as exact MIPS reads them), their
        p products (exact in float32) are summed in float32 and the sum is rounded to bf16 (as exact MIPS
        returns it); in float32, the fp16 vectors (exact in float32) and the queries are multiplied and summed
        in float32. Float64 queries are scored in float64.

        The pairs' vectors are gathered `chunk` pairs at a time (default 1024 on the CPU, 2^18 on a GPU): O(n p)
        work, O(chunk p) memory, on the graph's device. (A matrix product ``g f(M)^T`` read at the pairs is
        faster when they cover much of batch x M, but its sums run in an order that depends on the matrices'
        shapes, that is, on the batch.)"""
        compute = self.score_dtype if queries.dtype == torch.float32 else queries.dtype
        chunk = chunk or (1024 if self.device.type == "cpu" else 1 << 18)
        # (batch, p), rounded to the score dtype
        q = queries.detach().to(self.device).to(compute).to(queries.dtype)
        rows = np.asarray(rows, dtype=np.int64)
        rows_t = torch.from_numpy(rows).to(self.device)
        mentions = np.asarray(mentions, dtype=np.int64)
        out = torch.empty(len(mentions), dtype=compute, device=self.device)  # (n,)
        if self.device.type != "cpu":
            self.vectors_as(compute)  # on a GPU, f(M) is copied there once in the score dtype (M p 2 bytes in bf16)
        self._will_need_rows(mentions, compute)
        for lo in range(0, len(mentions), chunk):
            # the rows scored only (the whole copy in `compute` where one exists, else the memory map)
            f = self.rows_as(mentions[lo : lo + chunk], compute).to(queries.dtype)  # (chunk, p)
            part = rows[lo : lo + chunk]
            # (chunk, p), or (p,) broadcast where the chunk is one row's (a question alone): the same products
            g = q[int(part[0])] if (part == part[0]).all() else q.index_select(0, rows_t[lo : lo + chunk])
            out[lo : lo + chunk] = (f * g).sum(-1)  # rounded to `compute` on assignment
        return out.to(queries.dtype).cpu().numpy()

    def gather_gradient(self, rows: np.ndarray, mentions: np.ndarray, grad: torch.Tensor, batch: int) -> torch.Tensor:
        """``out[b] = sum_i grad[i] f(mentions[i])`` over the i with ``rows[i] = b``: (batch, p).

        A sparse (batch x U) matrix times the rows of f of the U distinct mentions touched, CSR, on the
        graph's device: memory O(U p), whatever M is (no whole copy of f(M) in the gradient's dtype). The
        result is on `grad`'s device."""
        if len(mentions) == 0:
            return torch.zeros(batch, self.vectors.shape[1], dtype=grad.dtype, device=grad.device)
        touched, column = np.unique(mentions, return_inverse=True)  # column order = mention order
        self._will_need_rows(touched, grad.dtype)
        f = self.rows_as(touched, grad.dtype)  # (U, p)
        order = np.lexsort((mentions, rows))
        crow = torch.from_numpy(np.searchsorted(rows[order], np.arange(batch + 1)).astype(np.int64))
        dev = self.device
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"
            sparse = torch.sparse_csr_tensor(crow.to(dev), torch.from_numpy(column[order].astype(np.int64)).to(dev),
                                             grad[torch.from_numpy(order).to(grad.device)].to(dev),
                                             size=(batch, len(touched)), check_invariants=False)
        return (sparse @ f).to(grad.device)

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
