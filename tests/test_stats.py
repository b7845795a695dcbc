"""Index statistics against brute-force references with explicit Python sets."""

from __future__ import annotations

import random

import numpy as np
import pytest

from drkit.data.corpus import Article
from drkit.data.kb import EntityTable, Triple
from drkit.data.questions import Question
from drkit.errors import ConfigError
from drkit.index.linking import EntityLinker, LinkConfig, link_corpus
from drkit.index.sparse import SparseConfig, build_sparse_matrices
from drkit.index.stats import index_counts, kb_coverage, sparse_reachability, sparse_reachability_sets

# ---------------------------------------------------------------------------------------------
# References


def passages_of(mention_entity, mention_passage) -> dict[int, set[int]]:
    out: dict[int, set[int]] = {}
    for e, p in zip(mention_entity.tolist(), mention_passage.tolist()):
        out.setdefault(e, set()).add(p)
    return out


def ref_coverage(table, triples, mention_entity, mention_passage):
    where = passages_of(mention_entity, mention_passage)
    total, covered = {}, {}
    for t in triples:
        total[t.relation] = total.get(t.relation, 0) + 1
        covered.setdefault(t.relation, 0)
        s, o = table.lookup(t.subject), table.lookup(t.object)
        if s is not None and o is not None and where.get(s, set()) & where.get(o, set()):
            covered[t.relation] += 1
    n, c = sum(total.values()), sum(covered.values())
    return {"triples": n, "covered": c, "fraction": c / n if n else 0.0,
            "by_relation": {r: {"triples": total[r], "covered": covered[r], "fraction": covered[r] / total[r]}
                            for r in sorted(total)}}


def ref_step(entities: set[int], top: dict[int, list[int]], mentioned: dict[int, set[int]]) -> set[int]:
    """One hop: the entities mentioned in the top-mu passages of the current entities."""
    out = set()
    for e in entities:
        for p in top.get(e, []):
            out |= mentioned.get(p, set())
    return out


def ref_reachability(table, questions, hops, entity_passage_indptr, entity_passage, mention_entity, mention_passage):
    top = {e: entity_passage[entity_passage_indptr[e] : entity_passage_indptr[e + 1]].tolist() for e in range(len(table))}
    mentioned: dict[int, set[int]] = {}
    for e, p in zip(mention_entity.tolist(), mention_passage.tolist()):
        mentioned.setdefault(p, set()).add(e)
    reachable = unknown_topic = unknown_answers = 0
    sizes = {}
    for q in questions:
        topic = table.lookup(q.topic)
        if topic is None:
            unknown_topic += 1
            continue
        answers = {a for a in (table.lookup(x) for x in q.answers) if a is not None}
        if not answers:
            unknown_answers += 1
            continue
        frontier = {topic}
        for i in range(hops):
            if i == hops - 1:
                sizes.setdefault(topic, len(frontier))
            frontier = ref_step(frontier, top, mentioned)
        if frontier & answers:
            reachable += 1
    n = len(questions)
    return {"hops": hops, "questions": n, "reachable": reachable, "fraction": reachable / n if n else 0.0,
            "topic_not_an_entity": unknown_topic, "no_answer_is_an_entity": unknown_answers,
            "mean_entities_after_hops_minus_1": float(np.mean(list(sizes.values()))) if sizes else 0.0}


def assert_same(got: dict, want: dict):
    assert set(got) == set(want)
    for k, v in want.items():
        if isinstance(v, float):
            assert got[k] == pytest.approx(v), k
        else:
            assert got[k] == v, k


# ---------------------------------------------------------------------------------------------
# A tiny hand-made corpus, through linking and A


ARTICLES = [
    Article("1", "Kismet", "Kismet is a 1944 film directed by William Dieterle. It stars Marlene Dietrich.", 1),
    Article("2", "The Mark of Zorro", "The Mark of Zorro is a film directed by Rouben Mamoulian. It stars Tyrone Power.", 5),
    Article("3", "Blood and Sand", "Blood and Sand stars Tyrone Power and Rita Hayworth.", 9),
    Article("4", "Gilda", "Gilda stars Rita Hayworth.", 12),
    Article("5", "Dieterle", "William Dieterle was born in 1893.", 14),
]
TRIPLES = [
    Triple("Kismet", "directed_by", "William Dieterle", 1),
    Triple("Kismet", "starred_actors", "Marlene Dietrich", 2),
    Triple("Kismet", "release_year", "1944", 3),
    Triple("The Mark of Zorro", "directed_by", "Rouben Mamoulian", 4),
    Triple("The Mark of Zorro", "starred_actors", "Tyrone Power", 5),
    Triple("Blood and Sand", "starred_actors", "Tyrone Power", 6),
    Triple("Blood and Sand", "starred_actors", "Rita Hayworth", 7),
    Triple("Gilda", "starred_actors", "rita hayworth", 8),
    Triple("Gilda", "directed_by", "Charles Vidor", 9),  # never mentioned
    Triple("Kismet", "starred_actors", "Rita Hayworth", 10),  # false: never in one passage
    Triple("Nobody", "starred_actors", "Tyrone Power", 11),  # subject not in the table given below
]


@pytest.fixture(scope="module")
def tiny():
    names = [t.subject for t in TRIPLES[:-1]] + [t.object for t in TRIPLES[:-1]]
    table = EntityTable.from_names(names)
    linker = EntityLinker(table.keys, 3)
    linked = link_corpus(ARTICLES, linker, LinkConfig(max_passage_pieces=256))
    m = build_sparse_matrices(linked, table, SparseConfig(mu=2, hash_buckets=1 << 12))
    return table, linked, m


def test_kb_coverage_on_the_tiny_corpus(tiny):
    table, linked, _ = tiny
    got = kb_coverage(table, TRIPLES, linked.mention_entity, linked.mention_passage, linked.n_passages)
    assert_same(got, ref_coverage(table, TRIPLES, linked.mention_entity, linked.mention_passage))
    # and by hand: every triple but the last three is in one article
    assert got["triples"] == 11 and got["covered"] == 8
    assert got["by_relation"]["directed_by"] == {"triples": 3, "covered": 2, "fraction": 2 / 3}
    assert got["by_relation"]["release_year"]["covered"] == 1


def test_kb_coverage_empty():
    table = EntityTable.from_names(["a"])
    got = kb_coverage(table, [], np.zeros(0, np.int32), np.zeros(0, np.int32), 0)
    assert got == {"triples": 0, "covered": 0, "fraction": 0.0, "by_relation": {}}


def test_reachability_on_the_tiny_corpus(tiny):
    table, linked, m = tiny
    questions = [
        Question("who directed Kismet", "Kismet", ("William Dieterle",), 1),
        Question("who starred in films with Tyrone Power", "TYRONE POWER", ("Rita Hayworth", "Kismet"), 2),
        Question("unknown topic", "Nobody", ("Kismet",), 3),
        Question("unknown answers", "Kismet", ("Somebody", "Else"), 4),
        Question("born when", "William Dieterle", ("1893",), 5),
    ]
    for hops in (1, 2, 3):
        got = sparse_reachability(table, questions, hops, m.entity_passage_indptr, m.entity_passage,
                                  linked.mention_entity, linked.mention_passage, linked.n_passages)
        want = ref_reachability(table, questions, hops, m.entity_passage_indptr, m.entity_passage,
                                linked.mention_entity, linked.mention_passage)
        assert_same(got, want)
        assert got["topic_not_an_entity"] == 1 and got["no_answer_is_an_entity"] == 2  # "1893" is not an entity
    got = sparse_reachability(table, questions[:1], 1, m.entity_passage_indptr, m.entity_passage,
                              linked.mention_entity, linked.mention_passage, linked.n_passages)
    assert got["reachable"] == 1


def test_index_counts(tiny):
    table, linked, m = tiny
    got = index_counts(table, 7, len(ARTICLES), linked.n_passages, linked.mention_entity, m.A_indptr)
    rows = [int(m.A_indptr[e + 1] - m.A_indptr[e]) for e in range(len(table))]
    nonempty = [r for r in rows if r]
    assert got == {
        "entities": len(table), "entities_linkable": 7, "entities_with_mentions": len(set(linked.mention_entity.tolist())),
        "articles": 5, "passages": linked.n_passages, "mentions": len(linked.mentions), "A_nnz": sum(rows),
        "A_row_mean": pytest.approx(sum(rows) / len(rows)), "A_row_mean_nonempty": pytest.approx(sum(nonempty) / len(nonempty)),
        "A_row_max": max(rows), "A_rows_empty": rows.count(0),
    }


# ---------------------------------------------------------------------------------------------
# Random data against the references


def random_case(seed):
    rng = random.Random(seed)
    E, P = rng.randint(1, 18), rng.randint(1, 14)
    table = EntityTable.from_names([f"Entity {i}" for i in range(E)])
    mu = rng.randint(1, 4)
    entity_passage_indptr, entity_passage = [0], []
    for _ in range(E):
        entity_passage += sorted(rng.sample(range(P), rng.randint(0, min(mu, P))))
        entity_passage_indptr.append(len(entity_passage))
    pairs = sorted(((rng.randrange(E), rng.randrange(P)) for _ in range(rng.randint(0, 3 * P))), key=lambda x: x[1])
    mention_entity = np.array([e for e, _ in pairs], dtype=np.int32)
    mention_passage = np.array([p for _, p in pairs], dtype=np.int32)

    def name(i):
        if i >= E:
            return f"Missing {i}"
        return rng.choice([f"Entity {i}", f"ENTITY {i}", f"entity  {i}"])

    questions = [Question("q", name(rng.randrange(E + 2)), tuple(name(rng.randrange(E + 3)) for _ in range(rng.randint(1, 3))), k)
                 for k in range(rng.randint(0, 25))]
    triples = [Triple(name(rng.randrange(E + 1)), rng.choice(["r1", "r2", "r3"]), name(rng.randrange(E + 1)), k)
               for k in range(rng.randint(0, 30))]
    return (table, P, np.array(entity_passage_indptr, dtype=np.int64), np.array(entity_passage, dtype=np.int32),
            mention_entity, mention_passage, questions, triples)


@pytest.mark.parametrize("seed", range(40))
def test_kb_coverage_random(seed):
    table, P, _, _, me, mp, _, triples = random_case(seed)
    assert_same(kb_coverage(table, triples, me, mp, P), ref_coverage(table, triples, me, mp))


@pytest.mark.parametrize("seed", range(40))
def test_reachability_random(seed):
    table, P, entity_passage_indptr, entity_passage, me, mp, questions, _ = random_case(seed)
    for hops in (1, 2, 3, 4):
        got = sparse_reachability(table, questions, hops, entity_passage_indptr, entity_passage, me, mp, P)
        assert_same(got, ref_reachability(table, questions, hops, entity_passage_indptr, entity_passage, me, mp))


def test_reachability_is_exactly_hops_steps():
    """A chain e0 -> e1 -> e2 -> e3: e2 is reachable in exactly 2 hops from e0, not in 1 or 3."""
    table = EntityTable.from_names(["e0", "e1", "e2", "e3"])
    entity_passage_indptr = np.array([0, 1, 2, 3, 3])  # entity i's top passage is passage i
    entity_passage = np.array([0, 1, 2], dtype=np.int32)
    me = np.array([1, 2, 3], dtype=np.int32)  # passage i mentions entity i + 1
    mp = np.array([0, 1, 2], dtype=np.int32)
    q = [Question("q", "E0", ("e2",), 1)]
    got = {h: sparse_reachability(table, q, h, entity_passage_indptr, entity_passage, me, mp, 3)["reachable"]
           for h in (1, 2, 3, 4)}
    assert got == {1: 0, 2: 1, 3: 0, 4: 0}
    q = [Question("q", "e0", ("e0",), 1)]  # the topic itself is not reachable: no step comes back
    assert all(sparse_reachability(table, q, h, entity_passage_indptr, entity_passage, me, mp, 3)["reachable"] == 0
               for h in (1, 2, 3))


def test_reachability_with_zero_hops_is_refused():
    """A question needs at least one hop (the answer is not the question entity), so hops < 1 is refused,
    by name, for one question set and for several."""
    table = EntityTable.from_names(["e0", "e1"])
    entity_passage_indptr, entity_passage = np.array([0, 1, 1]), np.array([0], dtype=np.int32)
    me, mp = np.array([1], dtype=np.int32), np.array([0], dtype=np.int32)
    q = [Question("q", "e0", ("e1",), 1)]
    for hops in (0, -1):
        with pytest.raises(ConfigError, match=rf"^hops must be at least 1, got {hops}$"):
            sparse_reachability(table, q, hops, entity_passage_indptr, entity_passage, me, mp, 1)
        with pytest.raises(ConfigError, match=rf"^hops must be at least 1, got {hops}$"):
            sparse_reachability_sets(table, [(1, q), (hops, q)], entity_passage_indptr, entity_passage, me, mp, 1)
    # e1 is one hop away
    assert sparse_reachability(table, q, 1, entity_passage_indptr, entity_passage, me, mp, 1)["reachable"] == 1
