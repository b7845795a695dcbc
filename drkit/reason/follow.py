"""The textual follow operation (paper, equation 5), batched and sparse:

    Z_t = softmax( [ Z_{t-1}^T A_{E->M}  (.)  T_K( f(m) . g_t ) ] B_{M->E} )

A weighted entity set Z (one row per question) is an `EntitySet` (`drkit.reason.entity_set`):
coordinates (row, entity) with a probability, never a dense |E| vector. One hop maps Z_{t-1} and a
query vector g_t to Z_t:

1. **Expansion** ``Z^T A``, for the adjacency A that ``adjacency`` names (`drkit.reason.expansion`):

   * ``tfidf`` (default, MetaQA). A[e, m] is non-zero when m lies in one of e's top-mu TF-IDF passages,
     so ``(Z^T A)[m] = w[passage(m)]`` with ``w = Z^T EP`` (EP: entity -> its top-mu passages). Cost
     O(nnz(Z) mu). The paper's A is the 0/1 indicator (``tfidf_power=0``). By default each entry is
     weighted by ``(score(e, p) / best score of e) ** power``: a passage that matches only part of a
     name ("Epps" for "Shareeka Epps") then weighs far less than one that names the entity in full,
     where the indicator makes them equal. The power is learned per hop, starting from `tfidf_power`.
   * ``links`` (the paper's HotpotQA A, section 3.3): ``A_link[e, m] = L[e, entity(m)]``, L the link
     graph (e is mentioned on the page of m's entity, or that entity on e's page; no diagonal), so
     ``(Z^T A_link)[m] = u[entity(m)]`` with ``u = Z^T L``, computed per entity in O(nnz(Z) degree):
     every mention of an entity x with ``u[x] > 0`` is reached, with weight ``u[x]``.
   * ``both``: the sum, ``(Z^T A)[m] = w[passage(m)] + u[entity(m)]`` (the power weighs the TF-IDF part).

   A has no self-loops by default: a mention of e is never reached through e itself (``self_loops``
   restores the paper's TF-IDF A, and reads L + I for the links: e reaches its own mentions with weight
   Z[e]). Otherwise a hop can "copy" Z_{t-1}, since every entity co-occurs with its own mentions: a
   2-hop model then learns to answer in the first hop and copy in the second, which fits every
   question whose answer is stated next to the question entity and fails the others.
2. **Relevance** ``T_K(f(m) . g_t)``: the top-K mentions of the whole index by MIPS. No gradient
   flows through the selection; the selected scores are differentiable in g_t, with the gradient
   ``sum_m grad_m f(m)`` computed as a sparse (batch x M) by dense f(M) product, O(K p)
   (`drkit.reason.graph`). Restricted retrieval (the default) instead scores every mention with
   ``(Z^T A)[m] > 0`` and keeps each row's top K. With ``min_weight`` it first skips the negligible
   units of the expansion, each kind against the row's largest of its kind: the passages p with
   ``w[p] < min_weight max_p' w[p']`` and the entities x with ``u[x] < min_weight max_x' u[x']``
   (both over the units that have mentions; w[p] with every entity's term, that of a mention's own
   entity included; u as read, with its diagonal only under self-loops). A mention is scored when its
   passage or its entity is kept and its combined weight ``(Z^T A)[m]`` is positive.
3. **Product and aggregation.** A selected mention m of row b survives when ``(Z^T A)[b, m] > 0``
   (the constraint of A; switched off by ``tfidf=False``) and its entity is not the question
   entity. Its logit is ``f(m) . g_t / lambda + log (Z^T A)[b, m]``, i.e. the mention's weight
   is ``(Z^T A)[m] * exp(f(m) . g_t / lambda)``. Mentions go to their entity (B_{M->E}) by **max**
   (the paper's choice) or **sum** (log-sum-exp of the logits) (`drkit.reason.segment`).
4. **Softmax** over each row's entities gives Z_t. Rows where nothing survives are empty.

Everything is differentiable with respect to the query vectors and to the probabilities of Z_{t-1};
no tensor is |E| x |M|, and the work of a hop depends on K, mu (or the degrees in L), nnz(Z) and the
mentions reached, not on the corpus size (apart from the MIPS itself, which is the searcher's business: exact or approximate).

`rescore` is the paper's Z_0 of HotpotQA: the entities linked to a question, rescored by an encoding of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from drkit.errors import ConfigError
from drkit.index.csr import concat_ranges
from drkit.reason.entity_set import EntitySet
from drkit.reason.expansion import ADJACENCIES, Expansion
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
    tfidf: bool = field(default=True, metadata={"help": "keep only mentions that co-occur with Z_{t-1} (Z^T A > 0, "
                        "A as adjacency says)"})
    retrieval: str = field(default="restricted", metadata={"help": "global: the top-K mentions of the whole index by "
                           "MIPS, then those that co-occur (the paper); restricted: the top-K by score among the "
                           "mentions that co-occur with Z_{t-1}, all of them scored"})
    min_weight: float = field(default=1e-3, metadata={"help": "restricted retrieval skips the passages (and, with "
                              "the link graph, the entities) whose weight in Z^T A is below this fraction of the "
                              "row's largest of their kind (0: none skipped)"})
    tfidf_power: float = field(default=8.0, metadata={"help": "A[e, m] = (TF-IDF score of m's passage / e's best "
                               "passage score) ** power; 0 gives the paper's 0/1 indicator (the initial value when learned)"})
    remove_topic: str = field(default="every", metadata={
        "help": "drop the question entity from the output of every hop, of the last hop only, or never (the paper "
                "removes it once, if at all); a bool in an old manifest reads as every (true) or never (false)",
        "choices": REMOVE_TOPIC})
    self_loops: bool = field(default=False, metadata={"help": "let an entity reach its own mentions through A "
                             "(the paper's A; off: a mention is reached only through other entities; links: L + I)"})
    adjacency: str = field(default="tfidf", metadata={
        "help": "A_{E->M}: tfidf (m in one of e's top-mu TF-IDF passages; MetaQA), links (L[e, entity(m)], L the "
                "index's link graph: e mentioned on the page of m's entity or that entity on e's page; the paper's "
                "HotpotQA A), both (the sum of the two weights) or page (m on e's own page where e has one, else "
                "e's TF-IDF row; the answer head's A with MixConfig.answer_adjacency)",
        "choices": ADJACENCIES})

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
        if self.adjacency not in ADJACENCIES:
            raise ConfigError(f"adjacency must be one of {ADJACENCIES}, got {self.adjacency!r}")


@dataclass
class FollowTrace:
    """What one hop kept, for explanations: the surviving mentions and their entity slots."""

    rows: np.ndarray  # (n,) batch row of each surviving mention
    mentions: np.ndarray  # (n,) mention ids
    logits: np.ndarray  # (n,) mention logits
    slot: np.ndarray  # (n,) index of the mention's entity in the output EntitySet

    def best_mention(self, n_slots: int) -> np.ndarray:
        """For each entity slot of the output, the surviving mention with the highest logit (-1 where none)."""
        return best_mention_of_slot(self.slot, self.logits, self.mentions, n_slots)


def best_mention_of_slot(slot: np.ndarray, logits: np.ndarray, mentions: np.ndarray, n_slots: int) -> np.ndarray:
    """For each entity slot of Z_t, the surviving mention with the highest logit (-1 where none; of several with
    the same logit, the first)."""
    best = np.full(n_slots, -1, dtype=np.int64)
    if len(slot):  # O(n): each slot's best logit, then the first mention that has it (on a tie, the earliest)
        logits = np.where(np.isnan(logits), -np.inf, logits)  # a NaN never wins (as it sorted last before)
        top = torch.full((n_slots,), -np.inf, dtype=torch.float64).scatter_reduce_(
            0, torch.from_numpy(np.asarray(slot, dtype=np.int64)), torch.from_numpy(logits.astype(np.float64)), "amax")
        at_top = np.flatnonzero(logits == top.numpy()[slot])
        slots, first = np.unique(slot[at_top], return_index=True)
        best[slots] = mentions[at_top[first]]
    return best


def not_topic(entities: np.ndarray, rows: np.ndarray, topic: np.ndarray) -> np.ndarray:
    """Whether each `entities[i]` (of row `rows[i]`) is none of its row's removed entities: `topic` is one
    entity per row (B,) or several (B, k), -1 for none."""
    if topic.ndim == 1:
        return entities != topic[rows]
    return ~(entities[:, None] == topic[rows]).any(axis=1)


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
        keep &= not_topic(graph.mention_entity[np.maximum(ids, 0)], rows, topic)
    rows, mentions, scores = rows[keep], ids[keep], scores[keep]
    if not config.tfidf:
        return rows, mentions, scores, None
    present, w = Expansion(z, graph, config.adjacency, power, config.self_loops).lookup(rows, mentions)
    return rows[present], mentions[present], scores[present], torch.log(w.clamp_min(1e-300))


def _candidates(weights, n_units: int, indptr: np.ndarray, members: np.ndarray | None, min_weight: float,
                batch: int) -> tuple[np.ndarray, np.ndarray]:
    """The (row, mention) pairs of the units (passages or entities) of an expansion with mentions, less
    those whose weight is below `min_weight` times the row's largest. Unit u owns the mentions
    ``members[indptr[u]:indptr[u+1]]`` (`members` None: the mention ids themselves)."""
    keys, w = weights.entries()  # keys row * n_units + unit, sorted
    units = keys % n_units
    with_mentions = indptr[units + 1] > indptr[units]
    keys = keys[with_mentions]
    if min_weight > 0 and len(keys):  # drop the units whose weight is negligible next to the row's best
        w = w[torch.from_numpy(np.flatnonzero(with_mentions))].detach().numpy()
        r = keys // n_units
        best = np.zeros(batch)
        np.maximum.at(best, r, w)
        keys = keys[w >= min_weight * best[r]]
    rows, units = keys // n_units, keys % n_units
    starts = indptr[units]
    lengths = indptr[units + 1] - starts
    positions = concat_ranges(starts, lengths)
    return np.repeat(rows, lengths), positions if members is None else members[positions]


def _co_occurring(z, queries, graph, config, power, topic):
    """Restricted retrieval: every mention with ``(Z^T A)[m] > 0`` (less those of negligible passages or
    entities, see ``min_weight``) is scored, and each row keeps its top-K by score. Returns (rows,
    mentions, scores, log weights), sorted by (row, mention)."""
    batch = queries.shape[0]
    expansion = Expansion(z, graph, config.adjacency, power, config.self_loops)
    found = []
    if expansion.passages is not None:  # mentions are stored by passage: these pairs are sorted
        found.append(_candidates(expansion.passages, graph.n_passages, graph.passage_mention_indptr, None,
                                 config.min_weight, batch))
    if expansion.entities is not None:
        found.append(_candidates(expansion.entities, graph.n_entities, graph.entity_mention_indptr,
                                 graph.entity_mentions, config.min_weight, batch))
    rows, mentions = found[0]
    if expansion.entities is not None:  # the union, sorted by (row, mention)
        n = len(graph.mention_entity)
        keys = np.unique(np.concatenate([r * n + m for r, m in found]))
        rows, mentions = keys // n, keys % n
    if topic is not None:
        keep = not_topic(graph.mention_entity[mentions], rows, topic)
        rows, mentions = rows[keep], mentions[keep]
    present, w = expansion.lookup(rows, mentions)
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

    where, by ``config.adjacency`` (P: the power, `tfidf_power`; L: the link graph)::

        tfidf: (Z^T A)[b, m] = sum_e Z[b, e] [passage(m) in EP(e)] (score(e, passage(m)) / best(e)) ** P
        links: (Z^T A)[b, m] = sum_e Z[b, e] L[e, entity(m)]
        both:  the sum of the two
        page:  (Z^T A)[b, m] = Z[b, title(passage(m))] + the tfidf sum over the e of row b without a page

    each without the term of e = entity(m) unless ``config.self_loops`` (then L + I for the links).

    `search(queries: np.ndarray (batch, p), k) -> (scores, ids)` is the MIPS (ids -1 = none) of global
    retrieval; its scores (or those of `FollowGraph.pair_scores` in restricted retrieval) are the
    forward values of ``f(m) . g_t`` (in the graph's score dtype for float32 queries), and their gradient is exact.
    Every step is computed row by row or pair by pair, so a row's result does not depend on the other
    rows of the batch (restricted retrieval: bit for bit; global: as far as `search` is row-wise).
    `topic[b]` is the entity removed from row b (-1: none; a (batch, k) array: k entities each) unless ``config.remove_topic`` is "never" (the
    caller passes it only at the hops where it applies: every hop, or the last); `tfidf_power` (a learned scalar) replaces
    ``config.tfidf_power`` when given."""
    batch = queries.shape[0]
    if z.batch_size != batch:
        raise ValueError(f"Z has {z.batch_size} rows but there are {batch} queries")
    if config.tfidf and config.adjacency in ("links", "both"):
        graph.require_links(f"adjacency={config.adjacency!r}")
    if config.tfidf and config.adjacency == "page":
        graph.require_pages("adjacency='page'")
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


def rescore(z: EntitySet, queries: torch.Tensor, graph: FollowGraph, config: FollowConfig, trace: bool = False):
    """Z_0 rescored by an encoding of the question (paper, section 3.3): `z` (the linked entities) and
    query vectors g (batch, p) -> Z' on the same support (and a `FollowTrace` if `trace`)::

        d_b(e)   = agg_{m in mentions(e)} f(m) . g[b] / lambda       agg: config.aggregate (max or log-sum-exp)
        Z'[b, e] = softmax_{e: Z[b, e] > 0}( log Z[b, e] + d_b(e) )

    An entity of Z without a mention in the index has no score of its own: its d_b(e) is the lowest
    d_b of its row (0 if no entity of the row has a mention), so it neither wins nor loses by being
    unmentioned. The dot products are `FollowGraph.pair_scores` (in the score dtype for float32 queries) with
    the exact gradient w.r.t. the queries (`FollowGraph.searched_scores`); Z' is differentiable in Z's
    probabilities too (a probability of 0 is read as the smallest normal number). Row by row: a row's
    result does not depend on the other rows. The trace holds every scored mention with its logit
    ``log Z[b, e] + f(m) . g[b] / lambda`` and its entity's slot in Z' (an unmentioned entity has none)."""
    batch = queries.shape[0]
    if z.batch_size != batch:
        raise ValueError(f"Z has {z.batch_size} rows but there are {batch} queries")
    ids, z_rows = z.ids.numpy(), z.rows.numpy()  # (N,)
    indptr, members = graph.entity_mention_indptr, graph.entity_mentions
    lengths = indptr[ids + 1] - indptr[ids]
    mentioned = np.flatnonzero(lengths > 0)  # (N',) the entries of Z with mentions
    slot = np.repeat(np.arange(len(ids)), lengths)  # (n,) the Z entry of each mention
    compact = np.repeat(np.arange(len(mentioned)), lengths[mentioned])  # (n,) its rank among `mentioned`
    mentions = members[concat_ranges(indptr[ids], lengths)]  # (n,)
    rows = z_rows[slot]
    scores = graph.pair_scores(queries, rows, mentions)
    dots = graph.searched_scores(queries, scores, rows, mentions) / config.temperature  # (n,)
    compact_t, mentioned_t = torch.from_numpy(compact), torch.from_numpy(mentioned)
    if config.aggregate == "max":
        term = segment_max(dots, compact_t, len(mentioned))  # (N',)
    else:
        term = segment_logsumexp(dots, compact_t, len(mentioned))
    lowest = -segment_max(-term, z.rows[mentioned_t], batch)  # (batch,) +inf where no entity has a mention
    lowest = torch.where(torch.isfinite(lowest), lowest, torch.zeros_like(lowest))
    d = lowest[z.rows].index_put((mentioned_t,), term)  # (N,)
    log_z = torch.log(z.probs.clamp_min(torch.finfo(z.probs.dtype).tiny)).to(d.dtype)
    log_probs = segment_log_softmax(log_z + d, z.rows, batch)
    out = EntitySet(z.rows, z.ids, torch.exp(log_probs), batch, log_probs)
    if trace:
        logits = (log_z[torch.from_numpy(slot)] + dots).detach().float().numpy()
        return out, FollowTrace(rows, mentions, logits, slot)
    return out
