"""The textual follow operation (paper, equation 5), batched and sparse.

A weighted entity set Z (one row per question) is an `EntitySet`: coordinates (row, entity) with a
probability, never a dense |E| vector. One hop maps Z_{t-1} and a query vector g_t to Z_t:

1. **Expansion** ``Z^T A``. A[e, m] is non-zero when m lies in one of e's top-mu TF-IDF passages,
   so ``(Z^T A)[m] = w[passage(m)]`` with ``w = Z^T EP`` (EP: entity -> its top-mu passages). Cost
   O(nnz(Z) mu). The paper's A is the 0/1 indicator (``tfidf_power=0``). By default each entry is
   weighted by ``(score(e, p) / best score of e) ** power``: a passage that matches only part of a
   name ("Epps" for "Shareeka Epps") then weighs far less than one that names the entity in full,
   where the indicator makes them equal. The power is learned per hop, starting from `tfidf_power`.
   A has no self-loops by default: a mention of e is never reached through e itself (``self_loops``
   restores the paper's A). Otherwise a hop can "copy" Z_{t-1}, since every entity co-occurs with its
   own mentions: a 2-hop model then learns to answer in the first hop and copy in the second, which
   fits every question whose answer is stated next to the question entity and fails the others.
2. **Relevance** ``T_K(f(m) . g_t)``: the top-K mentions of the whole index by MIPS. No gradient
   flows through the selection; the selected scores are differentiable in g_t, with the gradient
   ``sum_m grad_m f(m)`` computed as a sparse (batch x M) by dense f(M) product, O(K p).
3. **Product and aggregation.** A selected mention m of row b survives when ``w_b[passage(m)] > 0``
   (the TF-IDF constraint; switched off by ``tfidf=False``) and its entity is not the question
   entity. Its logit is ``f(m) . g_t / lambda + log w_b[passage(m)]``, i.e. the mention's weight
   is ``(Z^T A)[m] * exp(f(m) . g_t / lambda)``. Mentions go to their entity (B_{M->E}) by **max**
   (the paper's choice) or **sum** (log-sum-exp of the logits).
4. **Softmax** over each row's entities gives Z_t. Rows where nothing survives are empty.

Everything is differentiable with respect to the query vectors and to the probabilities of Z_{t-1};
no tensor is |E| x |M|, and the work of a hop depends on K, mu and nnz(Z), not on the corpus size
(apart from the MIPS itself, which is the searcher's business: exact or approximate).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field

import numpy as np
import torch

from drkit.errors import ConfigError
from drkit.index.sparse import SparseIndex, _concat_ranges, passage_mention_indptr

AGGREGATIONS = ("max", "sum")
RETRIEVALS = ("global", "restricted")
_DENSE_LIMIT = 1 << 26  # batch x passages below which passage weights live in one dense vector


@dataclass(frozen=True)
class FollowConfig:
    """Settings of the textual follow."""

    top_k: int = field(default=10000, metadata={"help": "K: mentions retrieved by MIPS per hop"})
    temperature: float = field(default=4.0, metadata={"help": "lambda: mention scores are divided by it before the softmax"})
    aggregate: str = field(default="max", metadata={"help": "mentions -> entity: max (paper) or sum"})
    tfidf: bool = field(default=True, metadata={"help": "keep only mentions that co-occur with Z_{t-1} (Z^T A > 0)"})
    retrieval: str = field(default="restricted", metadata={"help": "global: the top-K mentions of the whole index by "
                           "MIPS, then those that co-occur (the paper); restricted: the top-K by score among the "
                           "mentions that co-occur with Z_{t-1}, all of them scored"})
    min_weight: float = field(default=1e-3, metadata={"help": "restricted retrieval skips the passages whose weight "
                              "in Z^T A is below this fraction of the row's largest (0: none skipped)"})
    tfidf_power: float = field(default=8.0, metadata={"help": "A[e, m] = (TF-IDF score of m's passage / e's best "
                               "passage score) ** power; 0 gives the paper's 0/1 indicator (the initial value when learned)"})
    remove_topic: bool = field(default=True, metadata={"help": "drop the question entity from every hop's output"})
    self_loops: bool = field(default=False, metadata={"help": "let an entity reach its own mentions through A "
                             "(the paper's A; off: a mention is reached only through other entities)"})

    def __post_init__(self):
        if self.top_k < 1:
            raise ConfigError(f"top_k must be at least 1, got {self.top_k}")
        if not self.temperature > 0:
            raise ConfigError(f"temperature must be positive, got {self.temperature}")
        if not 0 <= self.min_weight <= 1:
            raise ConfigError(f"min_weight must be between 0 and 1, got {self.min_weight}")
        if self.tfidf_power < 0:
            raise ConfigError(f"tfidf_power must be at least 0, got {self.tfidf_power}")
        if self.retrieval not in RETRIEVALS:
            raise ConfigError(f"retrieval must be one of {RETRIEVALS}, got {self.retrieval!r}")
        if self.aggregate not in AGGREGATIONS:
            raise ConfigError(f"aggregate must be one of {AGGREGATIONS}, got {self.aggregate!r}")


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

    def top(self, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(batch, k) entity ids and probabilities, best first; padded with id -1 and probability 0."""
        ids = np.full((self.batch_size, k), -1, dtype=np.int64)
        probs = np.zeros((self.batch_size, k), dtype=np.float32)
        r = self.rows.numpy()
        e = self.ids.numpy()
        p = self.probs.detach().float().numpy()
        order = np.lexsort((e, -p, r))
        r, e, p = r[order], e[order], p[order]
        starts = np.searchsorted(r, np.arange(self.batch_size))
        rank = np.arange(len(r)) - starts[r]
        keep = rank < k
        ids[r[keep], rank[keep]] = e[keep]
        probs[r[keep], rank[keep]] = p[keep]
        return ids, probs


@dataclass
class FollowTrace:
    """What one hop kept, for explanations: the surviving mentions and their entity slots."""

    rows: np.ndarray  # (n,) batch row of each surviving mention
    mentions: np.ndarray  # (n,) mention ids
    logits: np.ndarray  # (n,) mention logits
    slot: np.ndarray  # (n,) index of the mention's entity in the output EntitySet


class FollowGraph:
    """The index data the follow needs: EP (entity -> top-mu passages), mention -> passage and entity,
    and the mention vectors f(m) as one in-memory tensor."""

    def __init__(self, ep_indptr: np.ndarray, ep_passage: np.ndarray, mention_passage: np.ndarray,
                 mention_entity: np.ndarray, n_entities: int, n_passages: int, vectors: torch.Tensor):
        self.ep_indptr = np.asarray(ep_indptr, dtype=np.int64)
        self.ep_passage = np.asarray(ep_passage, dtype=np.int64)
        self.mention_passage = np.asarray(mention_passage, dtype=np.int64)
        self.mention_entity = np.asarray(mention_entity, dtype=np.int64)
        self.n_entities = int(n_entities)
        self.n_passages = int(n_passages)
        if vectors.shape[0] != len(self.mention_entity):
            raise ConfigError(f"{vectors.shape[0]} mention vectors for {len(self.mention_entity)} mentions")
        self.vectors = vectors
        # log(score(e, p) / max_p' score(e, p')) per entry of EP (<= 0), for the weighted A; None: 0/1 only
        self.ep_log_rel: torch.Tensor | None = None
        self._cast: dict[torch.dtype, torch.Tensor] = {}
        self.pm_indptr = passage_mention_indptr(self.mention_passage, self.n_passages)
        # (entity, passage) of each EP entry as one sorted key, entity * P + passage
        self.ep_keys = np.repeat(np.arange(self.n_entities, dtype=np.int64), np.diff(self.ep_indptr)) * self.n_passages \
            + self.ep_passage

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
        lengths = np.diff(self.ep_indptr)
        best = np.zeros(len(lengths))
        nonempty = lengths > 0
        best[nonempty] = np.maximum.reduceat(scores, self.ep_indptr[:-1][nonempty]) if len(scores) else 0
        rel = scores / np.repeat(np.where(best > 0, best, 1.0), lengths)
        self.ep_log_rel = torch.from_numpy(np.log(np.clip(rel, 1e-30, 1.0)))  # float64: exact for the tests

    def vectors_as(self, dtype: torch.dtype) -> torch.Tensor:
        """f(M) in `dtype` (kept after the first call: the backward pass of every hop needs it)."""
        if dtype not in self._cast:
            self._cast[dtype] = self.vectors.to(dtype)
        return self._cast[dtype]

    def pair_scores(self, queries: torch.Tensor, rows: np.ndarray, mentions: np.ndarray, dense: bool | None = None,
                    chunk: int = 1 << 16) -> np.ndarray:
        """``f(m) . g[row]`` for the pairs (rows[i], mentions[i]), no gradient, in bf16 for float32
        queries (as exact MIPS computes them).

        Few pairs: the pairs' vectors are gathered, O(pairs p). Many (more than a quarter of batch x M):
        the batch's scores against every mention are computed block by block and the pairs read out,
        which is then cheaper. `dense` forces one way."""
        vec = self.vectors_as(torch.bfloat16 if queries.dtype == torch.float32 else queries.dtype)
        q = queries.detach().to(vec.dtype)
        out_dtype = np.float64 if queries.dtype == torch.float64 else np.float32
        if dense is None:
            dense = 4 * len(mentions) > queries.shape[0] * vec.shape[0]
        out = np.empty(len(mentions), dtype=out_dtype)
        if not dense:
            for lo in range(0, len(mentions), chunk):
                m = torch.from_numpy(mentions[lo : lo + chunk])
                r = torch.from_numpy(rows[lo : lo + chunk])
                s = (vec[m].to(queries.dtype) * q[r].to(queries.dtype)).sum(-1)
                out[lo : lo + chunk] = s.to(vec.dtype).to(queries.dtype).numpy()
            return out
        for lo in range(0, vec.shape[0], 1 << 17):
            sel = np.flatnonzero((mentions >= lo) & (mentions < lo + (1 << 17)))
            if len(sel):
                s = (q @ vec[lo : lo + (1 << 17)].T).to(queries.dtype)
                out[sel] = s[torch.from_numpy(rows[sel]), torch.from_numpy(mentions[sel] - lo)].numpy()
        return out


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


class PassageWeights:
    """``w = Z^T A`` per (row, passage): the summed probability of the entities whose top-mu passages
    include p, each times ``(score(e, p) / best score of e) ** power`` (power 0: the 0/1 indicator).

    Sums are accumulated in float64, so that removing one entity's own term (`lookup` with
    `entities`) leaves the others' exact sum even when it is tiny next to the removed one."""

    def __init__(self, z: EntitySet, graph: FollowGraph, power: float | torch.Tensor | None = None):
        self.z, self.graph, self.power = z, graph, power
        e = z.ids.numpy()
        starts, lengths = graph.ep_indptr[e], graph.ep_indptr[e + 1] - graph.ep_indptr[e]
        src = torch.from_numpy(np.repeat(np.arange(len(e)), lengths))
        positions = _concat_ranges(starts, lengths)
        keys = z.rows.numpy()[src.numpy()] * graph.n_passages + graph.ep_passage[positions]
        values = z.probs[src].double() * self._factor(positions)
        self.n_passages = graph.n_passages
        space = z.batch_size * graph.n_passages
        self.dense = space <= _DENSE_LIMIT
        if self.dense:
            self.counts = np.bincount(keys, minlength=space)
            self.weights = torch.zeros(space, dtype=torch.float64).index_add(0, torch.from_numpy(keys), values)
        else:
            self.keys, inverse, self.counts = np.unique(keys, return_inverse=True, return_counts=True)
            self.weights = torch.zeros(len(self.keys), dtype=torch.float64).index_add(0, torch.from_numpy(inverse), values)

    def _factor(self, ep_positions: np.ndarray) -> torch.Tensor | float:
        power, log_rel = self.power, self.graph.ep_log_rel
        if power is None or log_rel is None or (not torch.is_tensor(power) and power == 0):
            return 1.0
        return torch.exp(power * log_rel[torch.from_numpy(ep_positions)])

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
            ep_slot, in_ep = _find(self.graph.ep_keys, entities * self.graph.n_passages + passages)
            own = in_z & in_ep
            counts = counts - own
            sel = np.flatnonzero(own)
            own_term = self.z.probs[torch.from_numpy(z_slot[sel])].double() * self._factor(ep_slot[sel])
            weights = weights.index_add(0, torch.from_numpy(sel), -own_term)
        present = counts > 0
        return present, weights[torch.from_numpy(np.flatnonzero(present))]


def _find(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of `keys` in `sorted_keys` (clipped) and whether each is there."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return pos, sorted_keys[pos] == keys


def segment_max(values: torch.Tensor, segments: torch.Tensor, n: int) -> torch.Tensor:
    out = torch.full((n,), float("-inf"), dtype=values.dtype)
    return out.scatter_reduce(0, segments, values, reduce="amax", include_self=False)


def segment_logsumexp(values: torch.Tensor, segments: torch.Tensor, n: int) -> torch.Tensor:
    top = segment_max(values.detach(), segments, n)
    summed = torch.zeros(n, dtype=values.dtype).index_add(0, segments, torch.exp(values - top[segments]))
    return torch.log(summed) + top


def segment_log_softmax(values: torch.Tensor, segments: torch.Tensor, n: int) -> torch.Tensor:
    return values - segment_logsumexp(values, segments, n)[segments]


def _retrieved(z, queries, graph, search, config, power, topic):
    """Global retrieval (the paper): the top-K mentions of the index by MIPS, then, with `config.tfidf`,
    those with ``(Z^T A)[m] > 0``. Returns (rows, mentions, scores, log weights or None)."""
    batch = queries.shape[0]
    scores, ids = search(queries.detach().numpy(), config.top_k)
    ids = np.asarray(ids, dtype=np.int64).ravel()
    scores = np.asarray(scores).ravel()
    rows = np.repeat(np.arange(batch, dtype=np.int64), len(ids) // max(batch, 1))
    keep = ids >= 0
    if topic is not None:
        keep &= graph.mention_entity[np.maximum(ids, 0)] != topic[rows]
    rows, mentions, scores = rows[keep], ids[keep], scores[keep]
    if not config.tfidf:
        return rows, mentions, scores, None
    own = None if config.self_loops else graph.mention_entity[mentions]
    present, w = PassageWeights(z, graph, power).lookup(rows, graph.mention_passage[mentions], own)
    return rows[present], mentions[present], scores[present], torch.log(w.clamp_min(1e-300))


def _co_occurring(z, queries, graph, config, power, topic):
    """Restricted retrieval: every mention with ``(Z^T A)[m] > 0`` is scored, and each row keeps its
    top-K by score. Returns (rows, mentions, scores, log weights)."""
    pw = PassageWeights(z, graph, power)
    keys = np.flatnonzero(pw.counts) if pw.dense else pw.keys
    passages = keys % graph.n_passages
    keys = keys[graph.pm_indptr[passages + 1] > graph.pm_indptr[passages]]  # passages with mentions
    if config.min_weight > 0 and len(keys):  # drop passages whose weight is negligible next to the row's best
        w = (pw.weights[torch.from_numpy(keys)] if pw.dense else
             pw.weights[torch.from_numpy(np.searchsorted(pw.keys, keys))]).detach().numpy()
        r = keys // graph.n_passages
        best = np.zeros(queries.shape[0])
        np.maximum.at(best, r, w)
        keys = keys[w >= config.min_weight * best[r]]
    p_rows, passages = keys // graph.n_passages, keys % graph.n_passages
    starts = graph.pm_indptr[passages]
    lengths = graph.pm_indptr[passages + 1] - starts
    mentions = _concat_ranges(starts, lengths)
    rows = np.repeat(p_rows, lengths)
    if topic is not None:
        keep = graph.mention_entity[mentions] != topic[rows]
        rows, mentions = rows[keep], mentions[keep]
    own = None if config.self_loops else graph.mention_entity[mentions]
    present, w = pw.lookup(rows, graph.mention_passage[mentions], own)
    rows, mentions = rows[present], mentions[present]
    scores = graph.pair_scores(queries, rows, mentions)
    if len(rows) and np.bincount(rows).max() > config.top_k:
        order = np.lexsort((-scores, rows))
        first = np.searchsorted(rows[order], np.arange(queries.shape[0]))
        rank = np.arange(len(order)) - first[rows[order]]
        keep = np.sort(order[rank < config.top_k])
        rows, mentions, scores, w = rows[keep], mentions[keep], scores[keep], w[torch.from_numpy(keep)]
    return rows, mentions, scores, torch.log(w.clamp_min(1e-300))


def follow(z: EntitySet, queries: torch.Tensor, graph: FollowGraph, search, config: FollowConfig,
           topic: np.ndarray | None = None, trace: bool = False, tfidf_power: torch.Tensor | None = None):
    """One textual follow: Z_{t-1} (`z`), queries g_t (batch, p) -> Z_t (and a `FollowTrace` if `trace`).

    `search(queries: np.ndarray (batch, p), k) -> (scores, ids)` is the MIPS (ids -1 = none) of global
    retrieval; its scores (or those of `FollowGraph.pair_scores` in restricted retrieval) are the
    forward values of ``f(m) . g_t``, bf16-rounded for float32 queries, and their gradient is exact;
    `topic[b]` is the entity removed from row b (-1: none); `tfidf_power` (a learned scalar) replaces
    ``config.tfidf_power`` when given."""
    batch = queries.shape[0]
    if z.batch_size != batch:
        raise ValueError(f"Z has {z.batch_size} rows but there are {batch} queries")
    topic = None if topic is None or not config.remove_topic else np.asarray(topic, dtype=np.int64)
    power = config.tfidf_power if tfidf_power is None else tfidf_power
    if config.tfidf and config.retrieval == "restricted":
        rows, mentions, scores, log_w = _co_occurring(z, queries, graph, config, power, topic)
    else:
        rows, mentions, scores, log_w = _retrieved(z, queries, graph, search, config, power, topic)
    entities = graph.mention_entity[mentions]
    logits = _SearchedScores.apply(queries, torch.from_numpy(scores), rows, mentions, graph) / config.temperature
    if log_w is not None:
        logits = logits + log_w.to(logits.dtype)

    keys = rows * graph.n_entities + entities
    slot_keys, slot = np.unique(keys, return_inverse=True)
    slot_t = torch.from_numpy(slot.astype(np.int64))
    n = len(slot_keys)
    if config.aggregate == "max":
        entity_logits = segment_max(logits, slot_t, n)
    else:
        entity_logits = segment_logsumexp(logits, slot_t, n)
    out_rows = torch.from_numpy(slot_keys // graph.n_entities)
    log_probs = segment_log_softmax(entity_logits, out_rows, batch)
    out = EntitySet(out_rows, torch.from_numpy(slot_keys % graph.n_entities), torch.exp(log_probs), batch, log_probs)
    if trace:
        return out, FollowTrace(rows, mentions, logits.detach().float().numpy(), slot)
    return out


def entity_set_mean(z: EntitySet, table: torch.Tensor) -> torch.Tensor:
    """``Z^T E`` for a (n_entities, d) table: (batch, d), differentiable in Z's probabilities."""
    out = torch.zeros(z.batch_size, table.shape[1], dtype=table.dtype)
    return out.index_add(0, z.rows, z.probs.unsqueeze(1).to(table.dtype) * table[z.ids])


def dense_follow_reference(z: torch.Tensor, queries: torch.Tensor, A: torch.Tensor, F: torch.Tensor,
                           mention_entity: np.ndarray, config: FollowConfig, topic=None) -> torch.Tensor:
    """Equation 5 with dense tensors, loop by loop: Z (B, E), A (E, M) 0/1, F (M, p) -> Z_t (B, E).

    The slow, obviously correct reference the tests check `follow` against."""
    B, E = z.shape
    M = F.shape[0]
    A_full = A
    if not config.self_loops:
        A = A.clone()
        A[torch.as_tensor(mention_entity), torch.arange(M)] = 0  # no entity reaches its own mentions
    out = torch.zeros(B, E, dtype=queries.dtype)
    for b in range(B):
        scores = F.to(queries.dtype) @ queries[b]  # (M,)
        expansion = z[b] @ A.to(z.dtype)  # (M,)
        order = sorted(range(M), key=lambda m: (-float(scores[m]), m))
        if config.tfidf and config.retrieval == "restricted":  # top-K among the co-occurring mentions
            passage_weight = z[b] @ A_full.to(z.dtype)  # skip passages of negligible weight
            floor = config.min_weight * passage_weight.max()
            order = [m for m in order if expansion[m] > 0 and passage_weight[m] >= floor
                     and not (config.remove_topic and topic is not None and mention_entity[m] == topic[b])]
        order = order[: config.top_k]
        per_entity: dict[int, list] = {}
        for m in order:
            e = int(mention_entity[m])
            if config.remove_topic and topic is not None and e == topic[b]:
                continue
            logit = scores[m] / config.temperature
            if config.tfidf:
                if expansion[m] <= 0:
                    continue
                logit = logit + torch.log(expansion[m])
            per_entity.setdefault(e, []).append(logit)
        if not per_entity:
            continue
        ents = sorted(per_entity)
        agg = [torch.stack(per_entity[e]).max() if config.aggregate == "max" else torch.logsumexp(torch.stack(per_entity[e]), 0)
               for e in ents]
        probs = torch.softmax(torch.stack(agg), 0)
        for e, p in zip(ents, probs):
            out[b, e] = p
    return out
