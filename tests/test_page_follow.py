"""The follow over the page adjacency (an entity with a page reaches the mentions of its own page's passages,
one without keeps its TF-IDF row; the answer head's A with ``MixConfig.answer_adjacency="page"``) against the
dense loop-by-loop reference, with gradients, and what it changes in a hop-mixing model."""

import dataclasses

import numpy as np
import pytest
import torch
from follow_reference import (
    dense_follow_reference,
    dense_page_adjacency,
    exact_search,
    gradcheck_follow,
    random_graph,
    random_z,
    weighted,
)

from drkit.errors import ConfigError
from drkit.reason.entity_set import EntitySet
from drkit.reason.expansion import PageWeights, PassageWeights
from drkit.reason.follow import FollowConfig, follow
from drkit.reason.graph import FollowGraph
from drkit.reason.mixing import MixConfig

SIZES = {"n_entities": 12, "n_passages": 8, "n_mentions": 30}

CONFIGS = [
    FollowConfig(top_k=10, adjacency="page", retrieval="global"),
    FollowConfig(top_k=30, adjacency="page", retrieval="global", tfidf_power=2.5, aggregate="sum"),
    FollowConfig(top_k=10, adjacency="page", retrieval="global", tfidf_power=0.0, self_loops=True, remove_topic="never"),
    FollowConfig(top_k=4, adjacency="page"),
    FollowConfig(top_k=6, adjacency="page", min_weight=0.5, aggregate="sum"),
    FollowConfig(top_k=100, adjacency="page", min_weight=0.0, self_loops=True, remove_topic="never"),
    FollowConfig(top_k=12, adjacency="page", min_weight=0.3, tfidf_power=1.0),
]


def page_reference(graph, A_rel, z, q, config, topic=None):
    A = dense_page_adjacency(weighted(A_rel, config.tfidf_power), graph.mention_passage, graph.passage_entity)
    return dense_follow_reference(z.to_dense(graph.n_entities), q, A, graph.vectors, graph.mention_entity, config, topic)


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: f"{c.retrieval}-k{c.top_k}-{c.aggregate}-pow{c.tfidf_power}"
                         f"-rm{c.remove_topic}-self{c.self_loops}-min{c.min_weight}")
def test_page_follow_matches_dense_reference(seed, config):
    graph, A_rel, _ = random_graph(seed, links=True, **SIZES)  # random titles: some entities have pages, some not
    has_page = np.isin(np.arange(graph.n_entities), graph.passage_entity)
    assert 0 < has_page.sum() < graph.n_entities
    z = random_z(seed, batch=4, n_entities=graph.n_entities)
    q = torch.from_numpy(np.random.default_rng(100 + seed).normal(size=(4, 5)))
    topic = np.array([int(z.ids[z.rows == b][0]) for b in range(4)])
    got = follow(z, q, graph, exact_search(graph), config, topic).to_dense(graph.n_entities)
    want = page_reference(graph, A_rel, z, q, config, topic)
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)


def test_page_weights_read_a_page_entity_at_its_page_and_a_bare_one_at_its_tfidf_row():
    """Z^T A_page per passage against the dense product, on every (row, passage) pair."""
    for seed in range(4):
        graph, A_rel, _ = random_graph(seed, links=True, **SIZES)
        z = random_z(seed, 3, graph.n_entities)
        power = 1.5
        w = PageWeights(z, graph, power)
        A = dense_page_adjacency(weighted(A_rel, power), graph.mention_passage, graph.passage_entity)
        dense = z.to_dense(graph.n_entities) @ A  # (B, M): the same value at every mention of a passage
        for b in range(3):
            for p in range(graph.n_passages):
                at = np.flatnonzero(graph.mention_passage == p)
                present, got = w.lookup(np.array([b]), np.array([p]))
                if len(at) and dense[b, at[0]] > 0:
                    assert present[0] and got[0].item() == pytest.approx(dense[b, at[0]].item(), rel=1e-12)
                elif len(at):
                    assert not present[0]


def test_a_bridge_reaches_its_own_page_not_the_pages_that_mention_it():
    """Passage 0 is d's page and mentions the answer a; passage 1 is x's page and mentions d and the actor y.
    d's TF-IDF row holds both passages (x's page names d), so the TF-IDF A reaches y; the page A does not."""
    d, a, x, y = 0, 1, 2, 3
    mention_passage = np.array([0, 0, 1, 1, 1])
    mention_entity = np.array([d, a, x, d, y])
    graph = FollowGraph(np.array([0, 2, 2, 2, 2]), np.array([0, 1]), mention_passage, mention_entity, 4, 2,
                        torch.eye(5, dtype=torch.float64), passage_entity=np.array([d, x]))
    graph.set_passage_scores(np.array([1.0, 1.0]))
    q = torch.tensor([[0.0, 1.0, 0.0, 0.0, 3.0]], dtype=torch.float64)  # y scores best
    z = EntitySet(torch.tensor([0]), torch.tensor([d]), torch.ones(1, dtype=torch.float64), 1)
    tfidf = follow(z, q, graph, exact_search(graph), FollowConfig(top_k=10, temperature=1.0))
    page = follow(z, q, graph, exact_search(graph), FollowConfig(top_k=10, temperature=1.0, adjacency="page"))
    assert tfidf.top(1)[0][0, 0] == y
    assert page.ids.tolist() == [a] and page.probs.tolist() == [1.0]  # d's own mention is not reached (no self-loops)
    with_self = follow(z, q, graph, exact_search(graph), FollowConfig(top_k=10, temperature=1.0, adjacency="page",
                                                                      self_loops=True, remove_topic="never"))
    assert with_self.ids.tolist() == [d, a]


def test_page_follow_gradcheck():
    """Gradients w.r.t. the queries, Z's probabilities and the TF-IDF power (which reaches the entities without
    a page), for both retrievals and aggregations."""
    graph, _, _ = random_graph(5, links=True, **SIZES)
    z0 = random_z(5, 3, graph.n_entities)
    assert not np.isin(z0.ids.numpy(), graph.passage_entity).all()  # some entity of Z without a page
    gradcheck_follow(graph, z0, "page")


def test_on_a_corpus_where_every_entity_has_a_page_the_power_does_nothing():
    graph, A_rel, _ = random_graph(2, links=True, **SIZES)
    titles = np.arange(graph.n_passages) % graph.n_entities
    every = FollowGraph(graph.entity_passage_indptr, graph.entity_passage, graph.mention_passage, graph.mention_entity,
                        graph.n_entities, graph.n_passages, graph.vectors, passage_entity=titles)
    every.set_passage_scores(np.exp(graph.entity_passage_log_rel.numpy()))
    z = EntitySet(torch.tensor([0, 0, 1]), torch.tensor([0, 3, 5]), torch.tensor([0.5, 0.5, 1.0], dtype=torch.float64), 2)
    a, b = (PageWeights(z, every, torch.tensor(p, dtype=torch.float64)) for p in (0.0, 5.0))
    assert torch.equal(a.weights, b.weights)
    tfidf = [PassageWeights(z, every, torch.tensor(p, dtype=torch.float64)).weights for p in (0.0, 5.0)]
    assert not torch.equal(*tfidf)


def test_a_graph_without_titles_is_a_clear_error():
    graph, _ = random_graph(1, **SIZES)
    z = random_z(1, 2, graph.n_entities)
    with pytest.raises(ConfigError, match="adjacency='page'.*passage_entity"):
        follow(z, torch.zeros(2, 5, dtype=torch.float64), graph, exact_search(graph), FollowConfig(adjacency="page"))
    with pytest.raises(ConfigError, match="answer_adjacency"):
        MixConfig(answer_adjacency="own-page")
    assert dataclasses.replace(MixConfig(), answer_adjacency="page").answer_adjacency == "page"


@pytest.mark.parametrize("adjacency", ["tfidf", "links", "both", "page"])
def test_hop_matrix_matches_loops(toy_index, adjacency):
    """`hop_matrix` (x one hop from e) against loops over the index's arrays, for every adjacency."""
    from drkit.index.question_linking import hop_matrix

    index = toy_index
    E = index.n_entities
    ep_ptr, ep = np.asarray(index.entity_passage_indptr), np.asarray(index.entity_passage)
    m_entity, m_passage = np.asarray(index.mention_entity), np.asarray(index.mention_passage)
    titles = np.asarray(index.passage_entity)
    l_ptr, links = np.asarray(index.entity_link_indptr), np.asarray(index.entity_link)
    want = np.zeros((E, E))
    for e in range(E):
        page = {p for p in range(len(titles)) if titles[p] == e}
        passages = set(ep[ep_ptr[e]:ep_ptr[e + 1]].tolist())
        if adjacency == "page" and page:
            passages = page
        if adjacency in ("tfidf", "both", "page"):
            for x, p in zip(m_entity, m_passage):
                if p in passages:
                    want[e, x] = 1
        if adjacency in ("links", "both"):
            want[e, links[l_ptr[e]:l_ptr[e + 1]]] = 1
    got = hop_matrix(index, adjacency).toarray()
    assert np.array_equal(got, want)
    assert (titles >= 0).any() and want.any()
