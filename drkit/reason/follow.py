"""The textual follow operation (paper, equation 5), batched and sparse:

    Z_t = softmax( [ Z_{t-1}^T A_{E->M}  (.)  T_K( f(m) . g_t ) ] B_{M->E} )

A weighted entity set Z (one row per question) is an `EntitySet` (`drkit.reason.entity_set`):
coordinates (row, entity) with a probability, never a dense |E| vector. One hop maps Z_{t-1} and a
query vector g_t to Z_t:

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
   (`drkit.reason.expansion`.)
2. **Relevance** ``T_K(f(m) . g_t)``: the top-K mentions of the whole index by MIPS. No gradient
   flows through the selection; the selected scores are differentiable in g_t, with the gradient
   ``sum_m grad_m f(m)`` computed as a sparse (batch x M) by dense f(M) product, O(K p)
   (`drkit.reason.graph`). Restricted retrieval (the default) instead scores every mention with
   ``(Z^T A)[m] > 0`` and keeps each row's top K.
3. **Product and aggregation.** A selected mention m of row b survives when ``w_b[passage(m)] > 0``
   (the TF-IDF constraint; switched off by ``tfidf=False``) and its entity is not the question
   entity. Its logit is ``f(m) . g_t / lambda + log w_b[passage(m)]``, i.e. the mention's weight
   is ``(Z^T A)[m] * exp(f(m) . g_t / lambda)``. Mentions go to their entity (B_{M->E}) by **max**
   (the paper's choice) or **sum** (log-sum-exp of the logits) (`drkit.reason.segment`).
4. **Softmax** over each row's entities gives Z_t. Rows where nothing survives are empty.

Everything is differentiable with respect to the query vectors and to the probabilities of Z_{t-1};
no tensor is |E| x |M|, and the work of a hop depends on K, mu and nnz(Z), not on the corpus size
(apart from the MIPS itself, which is the searcher's business: exact or approximate).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from drkit.errors import ConfigError
from drkit.index.sparse import concat_ranges
from drkit.reason.entity_set import EntitySet
from drkit.reason.expansion import PassageWeights
from drkit.reason.graph import FollowGraph
from drkit.reason.segment import segment_log_softmax, segment_logsumexp, segment_max

AGGREGATIONS = ("max", "sum")
RETRIEVALS = ("global", "restricted")
REMOVE_TOPIC = ("every", "last", "never")


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
    remove_topic: str = field(default="every", metadata={
        "help": "drop the question entity from the output of every hop, of the last hop only, or never (the paper "
                "removes it once, if at all); a bool in an old manifest reads as every (true) or never (false)",
        "choices": REMOVE_TOPIC})
    self_loops: bool = field(default=False, metadata={"help": "let an entity reach its own mentions through A "
                             "(the paper's A; off: a mention is reached only through other entities)"})

    def __post_init__(self):
        if isinstance(self.remove_topic, bool):  # manifests written before the three modes
            object.__setattr__(self, "remove_topic", "every" if self.remove_topic else "never")
        if self.remove_topic not in REMOVE_TOPIC:
            raise ConfigError(f"remove_topic must be one of {REMOVE_TOPIC}, got {self.remove_topic!r}")
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
class FollowTrace:
    """What one hop kept, for explanations: the surviving mentions and their entity slots."""

    rows: np.ndarray  # (n,) batch row of each surviving mention
    mentions: np.ndarray  # (n,) mention ids
    logits: np.ndarray  # (n,) mention logits
    slot: np.ndarray  # (n,) index of the mention's entity in the output EntitySet


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
    keys = keys[graph.passage_mention_indptr[passages + 1] > graph.passage_mention_indptr[passages]]  # passages with mentions
    if config.min_weight > 0 and len(keys):  # drop passages whose weight is negligible next to the row's best
        w = (pw.weights[torch.from_numpy(keys)] if pw.dense else
             pw.weights[torch.from_numpy(np.searchsorted(pw.keys, keys))]).detach().numpy()
        r = keys // graph.n_passages
        best = np.zeros(queries.shape[0])
        np.maximum.at(best, r, w)
        keys = keys[w >= config.min_weight * best[r]]
    p_rows, passages = keys // graph.n_passages, keys % graph.n_passages
    starts = graph.passage_mention_indptr[passages]
    lengths = graph.passage_mention_indptr[passages + 1] - starts
    mentions = concat_ranges(starts, lengths)
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

    Equation 5 of the paper, with the mentions of row b scored as (module docstring)::

        logit_b(m) = f(m) . g_t[b] / lambda + log (Z_{t-1}^T A)[b, m]     for m in T_K, (Z^T A)[b, m] > 0
        Z_t[b, e]  = softmax_e( agg_{m: B[m] = e} logit_b(m) )             agg: max or log-sum-exp

    `search(queries: np.ndarray (batch, p), k) -> (scores, ids)` is the MIPS (ids -1 = none) of global
    retrieval; its scores (or those of `FollowGraph.pair_scores` in restricted retrieval) are the
    forward values of ``f(m) . g_t``, bf16-rounded for float32 queries, and their gradient is exact.
    Every step is computed row by row or pair by pair, so a row's result does not depend on the other
    rows of the batch (restricted retrieval: bit for bit; global: as far as `search` is row-wise).
    `topic[b]` is the entity removed from row b (-1: none) unless ``config.remove_topic`` is "never" (the
    caller passes it only at the hops where it applies: every hop, or the last); `tfidf_power` (a learned scalar) replaces
    ``config.tfidf_power`` when given."""
    batch = queries.shape[0]
    if z.batch_size != batch:
        raise ValueError(f"Z has {z.batch_size} rows but there are {batch} queries")
    topic = None if topic is None or config.remove_topic == "never" else np.asarray(topic, dtype=np.int64)
    power = config.tfidf_power if tfidf_power is None else tfidf_power
    if config.tfidf and config.retrieval == "restricted":
        rows, mentions, scores, log_w = _co_occurring(z, queries, graph, config, power, topic)
    else:
        rows, mentions, scores, log_w = _retrieved(z, queries, graph, search, config, power, topic)
    entities = graph.mention_entity[mentions]
    logits = graph.searched_scores(queries, scores, rows, mentions) / config.temperature
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
