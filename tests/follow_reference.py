"""The slow, obviously correct textual follow the tests check `drkit.reason.follow.follow` against, and the
seeded random graphs, entity sets and exact search the follow tests share."""

from __future__ import annotations

import numpy as np
import torch

from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import FollowConfig
from drkit.reason.graph import FollowGraph


def dense_link_adjacency(L: torch.Tensor, mention_entity: np.ndarray, self_loops: bool) -> torch.Tensor:
    """A_link (E, M) by loops: ``A_link[e, m] = L[e, entity(m)]``, plus 1 where entity(m) = e with self-loops."""
    E, M = L.shape[0], len(mention_entity)
    A = torch.zeros(E, M, dtype=L.dtype)
    for e in range(E):
        for m in range(M):
            x = int(mention_entity[m])
            A[e, m] = 1.0 if (self_loops and x == e) else L[e, x]
    return A


def gradcheck_follow(graph: FollowGraph, z0: EntitySet, adjacency: str, topic: np.ndarray | None = None) -> None:
    """`follow` passes torch's gradcheck w.r.t. the queries, Z's probabilities and the TF-IDF power, for both
    retrievals and aggregations (the queries also depend on Z, as a hop's query does), over `adjacency`."""
    from drkit.reason.entity_set import entity_set_mean
    from drkit.reason.follow import follow

    search = exact_search(graph)
    batch = z0.batch_size
    table = torch.from_numpy(np.random.default_rng(2).normal(size=(graph.n_entities, 5)))
    for config in (FollowConfig(top_k=20, temperature=2.0, retrieval="global", adjacency=adjacency),
                   FollowConfig(top_k=20, aggregate="sum", adjacency=adjacency, self_loops=True),
                   FollowConfig(top_k=5, temperature=2.0, adjacency=adjacency)):
        def fn(q, probs, power):
            z = EntitySet(z0.rows, z0.ids, probs, batch)
            return follow(z, q + 0.1 * entity_set_mean(z, table), graph, search, config, topic, tfidf_power=power).probs

        q = torch.from_numpy(np.random.default_rng(3).normal(size=(batch, 5))).requires_grad_()
        probs = z0.probs.clone().requires_grad_()
        power = torch.tensor(1.7, dtype=torch.float64, requires_grad=True)
        assert len(fn(q, probs, power)) > 3
        assert torch.autograd.gradcheck(fn, (q, probs, power), eps=1e-6, atol=1e-6)


def dense_page_adjacency(A: torch.Tensor, mention_passage: np.ndarray, passage_entity: np.ndarray) -> torch.Tensor:
    """A_page (E, M) by loops: row e is 1 at the mentions of the passages whose title entity is e, where there is
    one; else row e of `A` (the TF-IDF A, weighted)."""
    E, M = A.shape
    A_page = A.clone()
    for e in range(E):
        page = [p for p in range(len(passage_entity)) if passage_entity[p] == e]
        if page:
            for m in range(M):
                A_page[e, m] = 1.0 if mention_passage[m] in page else 0.0
    return A_page


def dense_follow_reference(z: torch.Tensor, queries: torch.Tensor, A: torch.Tensor | None, F: torch.Tensor,
                           mention_entity: np.ndarray, config: FollowConfig, topic=None,
                           L: torch.Tensor | None = None) -> torch.Tensor:
    """Equation 5 with dense tensors, loop by loop: Z (B, E), A (E, M), F (M, p) -> Z_t (B, E).

    The slow, obviously correct reference the tests check `follow` against. A is the TF-IDF A the follow
    uses (0/1, or the relative TF-IDF score to the power), self-loops included: they are removed here
    unless `config.self_loops`. `topic[b]` is the entity, or the entities, removed from row b. L (E, E) is the link graph, needed for ``config.adjacency`` links or
    both: A_link is built from it (`dense_link_adjacency`) and the A used is A (tfidf), A_link (links)
    or their sum (both).

    Restricted retrieval scores the mentions m with ``(Z^T A)[m] > 0`` whose passage (TF-IDF part) or
    entity (link part) is not negligible: a part's unit weight, read at m, is at least ``min_weight``
    times its largest over the mentions."""
    B, E = z.shape
    M = F.shape[0]

    def removed(b, e):  # topic[b]: one entity (-1: none) or several
        return (config.remove_topic != "never" and topic is not None
                and int(e) in {int(t) for t in np.atleast_1d(topic[b])})

    # A of "page" is given as A (`dense_page_adjacency`): it is read as the TF-IDF A is, per passage
    use_tfidf, use_links = config.adjacency in ("tfidf", "both", "page"), config.adjacency in ("links", "both")
    A_tfidf = A_full = None
    if use_tfidf:
        A_full = A_tfidf = A
        if not config.self_loops:
            A_tfidf = A.clone()
            A_tfidf[torch.as_tensor(mention_entity), torch.arange(M)] = 0  # no entity reaches its own mentions
    A_link = dense_link_adjacency(L, mention_entity, config.self_loops) if use_links else None
    out = torch.zeros(B, E, dtype=queries.dtype)
    for b in range(B):
        scores = F.to(queries.dtype) @ queries[b]  # (M,)
        expansion = torch.zeros(M, dtype=z.dtype)
        if use_tfidf:
            expansion = expansion + z[b] @ A_tfidf.to(z.dtype)  # (M,)
        if use_links:
            link_weight = z[b] @ A_link.to(z.dtype)  # (M,) u[entity(m)]
            expansion = expansion + link_weight
        order = sorted(range(M), key=lambda m: (-float(scores[m]), m))
        if config.tfidf and config.retrieval == "restricted":  # top-K among the co-occurring mentions
            kept = torch.zeros(M, dtype=torch.bool)
            if use_tfidf:  # skip passages of negligible weight
                passage_weight = z[b] @ A_full.to(z.dtype)
                kept |= (passage_weight > 0) & (passage_weight >= config.min_weight * passage_weight.max())
            if use_links:  # skip entities of negligible weight
                kept |= (link_weight > 0) & (link_weight >= config.min_weight * link_weight.max())
            order = [m for m in order if expansion[m] > 0 and kept[m]
                     and not removed(b, mention_entity[m])]
        order = order[: config.top_k]
        per_entity: dict[int, list] = {}
        for m in order:
            e = int(mention_entity[m])
            if removed(b, e):
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


# -- shared test data ----------------------------------------------------------------------------------

def random_graph(seed, n_entities=7, n_passages=6, n_mentions=30, dim=5, mu=3, dtype=torch.float64, links=False):
    """A seeded random FollowGraph and its A_rel (E, M): score(e, passage of m) / e's best where m's passage
    is one of e's top-mu, else 0. With `links`, the graph also holds a link graph built from random page
    titles (`link_arrays`), and (graph, A_rel, L dense) is returned."""
    rng = np.random.default_rng(seed)
    ep = [np.sort(rng.choice(n_passages, size=rng.integers(0, mu + 1), replace=False)) for _ in range(n_entities)]
    indptr = np.concatenate([[0], np.cumsum([len(r) for r in ep])])
    mention_passage = np.sort(rng.integers(0, n_passages, n_mentions))
    mention_entity = rng.integers(0, n_entities, n_mentions)
    vectors = torch.from_numpy(rng.normal(size=(n_mentions, dim))).to(dtype)
    extra, L = {}, None
    if links:
        titles = np.random.default_rng(1000 + seed).integers(-1, n_entities, n_passages)  # -1: a page of no entity
        L, extra = link_arrays(mention_entity, mention_passage, titles, n_entities)
    graph = FollowGraph(indptr, np.concatenate(ep + [np.zeros(0, np.int64)]), mention_passage, mention_entity,
                        n_entities, n_passages, vectors, **extra)
    scores = [rng.random(len(r)) + 0.05 for r in ep]
    graph.set_passage_scores(np.concatenate(scores + [np.zeros(0)]))
    A_rel = torch.zeros(n_entities, n_mentions, dtype=dtype)
    for e, (row, sc) in enumerate(zip(ep, scores)):
        for p, v in zip(row, sc):
            A_rel[e, mention_passage == p] = float(v / sc.max())
    return (graph, A_rel, L) if links else (graph, A_rel)


def link_arrays(mention_entity, mention_passage, passage_entity, n_entities):
    """The link graph by loops, as the index defines it: ``L[e, x] = 1`` iff e is mentioned on x's page (a
    passage whose title entity is x) or x on e's page, e != x. Returns (L dense (E, E) float64, the
    FollowGraph keyword arguments: L and entity -> mentions as CSR, passage_entity)."""
    L = np.zeros((n_entities, n_entities))
    for e, p in zip(mention_entity, mention_passage):
        x = passage_entity[p]
        if x >= 0 and x != e:
            L[e, x] = L[x, e] = 1.0
    link_rows = [np.flatnonzero(L[e]) for e in range(n_entities)]
    mention_rows = [[m for m in range(len(mention_entity)) if mention_entity[m] == e] for e in range(n_entities)]
    kwargs = {"entity_link_indptr": np.concatenate([[0], np.cumsum([len(r) for r in link_rows])]),
              "entity_link": np.concatenate(link_rows + [np.zeros(0, np.int64)]).astype(np.int64),
              "entity_mention_indptr": np.concatenate([[0], np.cumsum([len(r) for r in mention_rows])]),
              "entity_mentions": np.array([m for r in mention_rows for m in r], dtype=np.int64),
              "passage_entity": np.asarray(passage_entity, dtype=np.int64)}
    return torch.from_numpy(L), kwargs


def weighted(A_rel, power):
    """A as the follow uses it: 0/1 for power 0, else the relative score to the power."""
    return torch.where(A_rel > 0, A_rel ** power, torch.zeros_like(A_rel))


def exact_search(graph):
    """Exact MIPS in float64: the reference search (ties broken by mention id)."""
    def search(q, k):
        scores = np.asarray(q, dtype=np.float64) @ graph.vectors.double().numpy().T
        order = np.lexsort((np.broadcast_to(np.arange(scores.shape[1]), scores.shape), -scores), axis=1)[:, :k]
        return np.take_along_axis(scores, order, 1), order
    return search


def random_z(seed, batch, n_entities, dtype=torch.float64):
    """A seeded batch of 1 to 3 entities per row with random positive probabilities summing to 1."""
    rng = np.random.default_rng(seed)
    rows, ids, probs = [], [], []
    for b in range(batch):
        e = np.sort(rng.choice(n_entities, size=rng.integers(1, 4), replace=False))
        p = rng.random(len(e)) + 0.1
        rows += [b] * len(e)
        ids += list(e)
        probs += list(p / p.sum())
    return EntitySet(torch.tensor(rows), torch.tensor(ids), torch.tensor(probs, dtype=dtype), batch)


def cancelling_graph(seed=0, n_passages=20, per_passage=20, n_entities=60, dim=64, links=False):
    """A graph whose scores are as sensitive as possible to how a dot product is summed.

    Each f(m) holds large bf16-exact components that cancel (+x and -x, about 2^20) and small ones
    (about 1) that carry the score; with a query of equal components, float32 partial sums round the
    small ones away in an order-dependent way, so any change in the order of summation changes the
    bf16-rounded score. Entities 0..9 reach two passages each (together all of them), the others one.
    With `links`, passage p is the page of entity p (0..19), so L links those to what their pages mention."""
    rng = np.random.default_rng(seed)
    n_mentions = n_passages * per_passage
    big = rng.integers(128, 256, size=(n_mentions, dim // 4)) * 2.0 ** 12
    small = rng.integers(-128, 128, size=(n_mentions, dim // 2)) * 2.0 ** -6
    v = np.concatenate([big, -big, small], 1)
    v = np.take_along_axis(v, rng.permuted(np.tile(np.arange(dim), (n_mentions, 1)), axis=1), 1)
    ep = [[2 * e, 2 * e + 1] for e in range(10)] + [[e % n_passages] for e in range(10, n_entities)]
    mention_passage = np.repeat(np.arange(n_passages), per_passage)
    mention_entity = rng.integers(0, n_entities, n_mentions)
    extra = link_arrays(mention_entity, mention_passage, np.arange(n_passages), n_entities)[1] if links else {}
    graph = FollowGraph(np.concatenate([[0], np.cumsum([len(r) for r in ep])]), np.concatenate(ep),
                        mention_passage, mention_entity, n_entities, n_passages,
                        torch.from_numpy(v.astype(np.float32)), **extra)
    graph.set_passage_scores(rng.random(sum(len(r) for r in ep)) + 0.05)
    return graph
