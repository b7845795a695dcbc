"""The sparse expansion of the follow, step 1 of equation 5: ``Z^T A`` read at given (row, mention) pairs.

Three adjacencies A, and the sum of the first two (`Expansion`, chosen by ``FollowConfig.adjacency``):

* **TF-IDF** (MetaQA, the default): A[e, m] is non-zero when mention m lies in one of e's top-mu TF-IDF
  passages, and its value depends on the passage only, so ``(Z^T A)[m] = w[passage(m)]``: the expansion
  is computed per passage, from EP (entity -> its top-mu passages), in O(nnz(Z) mu), and read at any
  mention of the passage (`PassageWeights`).
* **Links** (the paper's HotpotQA A, section 3.3): ``A_link[e, m] = L[e, entity(m)]`` with L the link
  graph (e mentioned on the page of m's entity, or that entity on e's page), so
  ``(Z^T A_link)[m] = u[entity(m)]`` with ``u = Z^T L``: computed per entity, from L's rows, in
  O(nnz(Z) degree), and read at any mention of the entity (`EntityWeights`).

* **Page** (the answer head's A on a corpus of title pages): from an entity with a page, the mentions of its
  own page's passages, 0/1 (``A_page[e, m] = [title entity of passage(m) = e]``: the facts a title page states
  about its entity are on it, where the TF-IDF rows also reach the pages that merely mention e); an entity
  without a page keeps its TF-IDF row (`PageWeights`, per passage as TF-IDF).

Sums are accumulated in float64, term by term in the order of Z's entries, so a row's weights do not
depend on the other rows of the batch.
"""

from __future__ import annotations

import numpy as np
import torch

from drkit.index.csr import ADJACENCIES, concat_ranges
from drkit.reason.entity_set import EntitySet
from drkit.reason.graph import FollowGraph

# The weights live in one dense vector over batch x passages (or entities) when that space is small: at
# most _DENSE_FLOOR slots, or _DENSE_PER_KEY slots per term summed; never more than _DENSE_LIMIT. Else the
# sorted distinct keys: memory follows the entries a question touches, not the corpus size.
_DENSE_LIMIT = 1 << 26
_DENSE_FLOOR = 1 << 16
_DENSE_PER_KEY = 16


class _KeyedSums:
    """Float64 sums of `values` per integer key in [0, space), with the number of terms of each: one dense
    vector when the space is small (see `_DENSE_FLOOR`), else the sorted distinct keys (the same sums, in
    the same order)."""

    def _sum(self, keys: np.ndarray, values: torch.Tensor, space: int) -> None:
        self.dense = space <= min(_DENSE_LIMIT, max(_DENSE_FLOOR, _DENSE_PER_KEY * len(keys)))
        if self.dense:
            self.counts = np.bincount(keys, minlength=space)
            self.weights = torch.zeros(space, dtype=torch.float64).index_add(0, torch.from_numpy(keys), values)
        elif len(keys) == 0:  # one absent key (-1), so that every look-up finds a slot
            self.keys, self.counts = np.full(1, -1, np.int64), np.zeros(1, np.int64)
            self.weights = torch.zeros(1, dtype=torch.float64)
        else:
            self.keys, inverse, self.counts = np.unique(keys, return_inverse=True, return_counts=True)
            self.weights = torch.zeros(len(self.keys), dtype=torch.float64).index_add(0, torch.from_numpy(inverse), values)

    def entries(self) -> tuple[np.ndarray, torch.Tensor]:
        """The keys with at least one term, sorted, and their sums."""
        keys = np.flatnonzero(self.counts)
        if self.dense:
            return keys, self.weights[torch.from_numpy(keys)]
        return self.keys[keys], self.weights[torch.from_numpy(keys)]

    def _at(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(slot of each key in `weights`, its number of terms: 0 where absent)."""
        if self.dense:
            return keys, self.counts[keys]
        slot, found = _find(self.keys, keys)
        return slot, np.where(found, self.counts[slot], 0)


class PassageWeights(_KeyedSums):
    """``w = Z^T A`` per (row, passage): the summed probability of the entities whose top-mu passages
    include p, each times ``(score(e, p) / best score of e) ** power`` (power 0: the 0/1 indicator).

    Sums are accumulated in float64, so that removing one entity's own term (`lookup` with
    `entities`) leaves the others' exact sum even when it is tiny next to the removed one."""

    def __init__(self, z: EntitySet, graph: FollowGraph, power: float | torch.Tensor | None = None):
        self.z, self.graph, self.power = z, graph, power
        src, passages, factor = self._entries(z.ids.numpy())
        keys = z.rows.numpy()[src] * graph.n_passages + passages  # (n,) row * P + passage
        values = z.probs[torch.from_numpy(src)].double() * factor  # (n,) Z[row, e] A[e, passage]
        self.n_passages = graph.n_passages
        self._sum(keys, values, z.batch_size * graph.n_passages)
        # each term by (Z entry, passage): sorted, as Z's entries are and each row of A by passage; `lookup`
        # finds an entity's own term here instead of searching A again
        self._term_keys = src * graph.n_passages + passages
        self._terms = values

    def _entries(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, torch.Tensor | float]:
        """The non-zero entries of A's rows `e` (N,), row after row, by passage: (the row of each in `e` (n,),
        its passage (n,), its value A[e, passage] (n,) float64, or 1.0 for all)."""
        indptr = self.graph.entity_passage_indptr
        starts, lengths = indptr[e], indptr[e + 1] - indptr[e]
        src = np.repeat(np.arange(len(e)), lengths)  # (n,) the Z entry of each EP entry read
        positions = concat_ranges(starts, lengths)  # (n,) positions in EP
        self.graph.will_need_entries(positions)  # the pages of EP's rows asked for together
        passages = np.asarray(self.graph.entity_passage[positions], dtype=np.int64)  # (n,)
        return src, passages, self._factor(positions, np.repeat(e, lengths))

    def _factor(self, positions: np.ndarray, owners: np.ndarray) -> torch.Tensor | float:
        """``(score(e, p) / best score of e) ** power`` of the EP entries at `positions` (of the entities
        `owners`); 1.0 for the 0/1 A."""
        power = self.power
        if power is None or not self.graph.has_passage_scores or (not torch.is_tensor(power) and power == 0):
            return 1.0
        return torch.exp(power * self.graph.log_rel(positions, owners))

    def lookup(self, rows: np.ndarray, passages: np.ndarray, entities: np.ndarray | None = None):
        """(present mask, float64 weights of the present pairs) for the pairs (rows[i], passages[i]).

        With `entities`, pair i leaves out entity entities[i]'s own term (no self-loops in A)."""
        slot, counts = self._at(rows * self.n_passages + passages)
        weights = self.weights[torch.from_numpy(slot)]
        if entities is not None:
            z_slot, in_z = _find(self.z.rows.numpy() * self.graph.n_entities + self.z.ids.numpy(),
                                 rows * self.graph.n_entities + entities)
            # entity i's own term, if it is in Z at row i and p is among its top-mu passages: the term of
            # (its Z entry, p), when there is one
            cand = np.flatnonzero(in_z)
            term, is_term = _find(self._term_keys, z_slot[cand] * self.n_passages + passages[cand])
            sel = cand[is_term]
            own = np.zeros(len(rows), dtype=bool)
            own[sel] = True
            counts = counts - own
            weights = weights.index_add(0, torch.from_numpy(sel), -self._terms[torch.from_numpy(term[is_term])])
        present = counts > 0
        return present, weights[torch.from_numpy(np.flatnonzero(present))]


class PageWeights(PassageWeights):
    """`PassageWeights` of the page adjacency: an entity with a page reaches its own page's passages, each with
    weight 1; an entity without one, its TF-IDF row (weighted by `power`)."""

    def _entries(self, e: np.ndarray) -> tuple[np.ndarray, np.ndarray, torch.Tensor | float]:
        graph = self.graph
        graph.require_pages("the page adjacency")
        indptr = graph.entity_page_indptr
        lengths = indptr[e + 1] - indptr[e]
        paged, bare = np.flatnonzero(lengths > 0), np.flatnonzero(lengths == 0)
        src = np.repeat(paged, lengths[paged])
        passages = graph.entity_page[concat_ranges(indptr[e[paged]], lengths[paged])]
        tf_src, tf_passages, tf_factor = super()._entries(e[bare])
        src = np.concatenate([src, bare[tf_src]])
        passages = np.concatenate([passages, tf_passages])
        tf_factor = tf_factor.double() if torch.is_tensor(tf_factor) else \
            torch.full((len(tf_passages),), float(tf_factor), dtype=torch.float64)
        factor = torch.cat([torch.ones(len(passages) - len(tf_passages), dtype=torch.float64), tf_factor])
        order = np.lexsort((passages, src))  # row after row of `e`, by passage
        return src[order], passages[order], factor[torch.from_numpy(order)]


class EntityWeights(_KeyedSums):
    """``u = Z^T L`` per (row, entity): ``u[b, x] = sum_e Z[b, e] L[e, x]``, the summed probability of the
    entities of row b linked to x. Every mention m of x then has ``(Z^T A_link)[b, m] = u[b, x]``.

    L has no diagonal, so an entity never reaches its own mentions through itself. With `self_loops`
    the graph read is L + I: ``Z[b, x]`` is added to ``u[b, x]`` (the counterpart of the TF-IDF A's
    self-loops, where e reaches its own mentions in its own passages). Cost O(nnz(Z) degree)."""

    def __init__(self, z: EntitySet, graph: FollowGraph, self_loops: bool = False):
        graph.require_links("the link adjacency")
        indptr, linked = graph.entity_link_indptr, graph.entity_link
        e = z.ids.numpy()  # (N,)
        starts, lengths = indptr[e], indptr[e + 1] - indptr[e]
        src = np.repeat(np.arange(len(e)), lengths)  # (n,) the Z entry of each L entry read
        targets = linked[concat_ranges(starts, lengths)]  # (n,) the entities x with L[e, x] = 1
        if self_loops:
            src, targets = np.concatenate([src, np.arange(len(e))]), np.concatenate([targets, e])
        keys = z.rows.numpy()[src] * graph.n_entities + targets  # (n,) row * E + entity
        self.n_entities = graph.n_entities
        self._sum(keys, z.probs[torch.from_numpy(src)].double(), z.batch_size * graph.n_entities)

    def lookup(self, rows: np.ndarray, entities: np.ndarray):
        """(present mask, float64 weights ``u[rows[i], entities[i]]`` of the present pairs)."""
        slot, counts = self._at(rows * self.n_entities + entities)
        present = counts > 0
        return present, self.weights[torch.from_numpy(slot[present])]


class Expansion:
    """``(Z^T A)[b, m]`` for the adjacency A named by `adjacency`: "tfidf" (`PassageWeights`), "links"
    (`EntityWeights`), "both", the sum ``w[b, passage(m)] + u[b, entity(m)]``, or "page" (`PageWeights`).
    `power` weighs the TF-IDF part only. Without `self_loops`, the TF-IDF part leaves out the mention's own entity's term
    and the link part reads L (no diagonal); with them, A's self-loops are kept (L + I)."""

    def __init__(self, z: EntitySet, graph: FollowGraph, adjacency: str, power: float | torch.Tensor | None,
                 self_loops: bool):
        if adjacency not in ADJACENCIES:
            raise ValueError(f"adjacency must be one of {ADJACENCIES}, got {adjacency!r}")
        self.graph, self.self_loops = graph, self_loops
        self.passages = PassageWeights(z, graph, power) if adjacency in ("tfidf", "both") else \
            PageWeights(z, graph, power) if adjacency == "page" else None
        self.entities = EntityWeights(z, graph, self_loops) if adjacency in ("links", "both") else None

    def lookup(self, rows: np.ndarray, mentions: np.ndarray):
        """(present mask, float64 weights of the present pairs) for the pairs (rows[i], mentions[i]); a pair
        is present when some entry of A reaches it (its weight is then positive for positive Z)."""
        graph = self.graph
        entities = graph.mention_entity[mentions]
        if self.entities is None:
            return self.passages.lookup(rows, graph.mention_passage[mentions], None if self.self_loops else entities)
        if self.passages is None:
            return self.entities.lookup(rows, entities)
        in_t, w_t = self.passages.lookup(rows, graph.mention_passage[mentions], None if self.self_loops else entities)
        in_l, w_l = self.entities.lookup(rows, entities)
        weights = torch.zeros(len(rows), dtype=torch.float64)
        weights = weights.index_add(0, torch.from_numpy(np.flatnonzero(in_t)), w_t)
        weights = weights.index_add(0, torch.from_numpy(np.flatnonzero(in_l)), w_l)
        present = in_t | in_l
        return present, weights[torch.from_numpy(np.flatnonzero(present))]


def _find(sorted_keys: np.ndarray, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Positions of `keys` in `sorted_keys` (clipped) and whether each is there."""
    if len(sorted_keys) == 0:
        return np.zeros(len(keys), np.int64), np.zeros(len(keys), bool)
    pos = np.minimum(np.searchsorted(sorted_keys, keys), len(sorted_keys) - 1)
    return pos, sorted_keys[pos] == keys
