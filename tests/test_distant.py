"""Distant supervision on a toy KB: queries, positives, labels, every negative kind, the held-out split."""

import numpy as np
import pytest

from drkit.data.kb import Triple, read_kb
from drkit.dense.distant import (
    IGNORED,
    NEGATIVE,
    NEGATIVE_KINDS,
    POSITIVE,
    DistantConfig,
    DistantSupervision,
    relation_descriptions,
)
from drkit.dense.pretrain import PretrainConfig, batch_targets, sample_batch
from drkit.errors import InputFormatError
from drkit.util.warnlog import WarningLog


@pytest.fixture(scope="module")
def ds(toy_index, toy_files):
    return DistantSupervision(toy_index, read_kb(toy_files / "kb.txt"), DistantConfig(holdout=0.2, split_seed=1))


def query_id(ds, text):
    return ds.queries.texts.index(text)


def fact(ds, q, answer):
    """The KB fact (subject, relation, object) that query q states with `answer`, in its forward form."""
    qs = ds.queries
    s, rel = int(qs.subject[q]), qs.relations[int(qs.relation[q])]
    return (int(answer), rel, s) if qs.inverse[q] else (s, rel, int(answer))


def slow_passage_entities(index, p):
    return {int(e) for e, pp in zip(index.mentions[:, 0], index.mentions[:, 1]) if pp == p}


def test_queries_in_both_directions_with_all_answers(ds):
    ents = ds.index.entities
    q = query_id(ds, "Moon Over Miami, starring, ?")
    assert sorted(ents.names[a] for a in ds.queries.answers(q)) == ["Betty Grable", "Don Ameche"]
    q = query_id(ds, "Walter Lang, directed, ?")
    assert sorted(ents.names[a] for a in ds.queries.answers(q)) == ["Moon Over Miami", "State Fair"]
    assert "William Dieterle, wrote, ?" in ds.queries.texts
    assert len(ds.queries) == len(set(ds.queries.texts))


def test_positives_match_brute_force(ds):
    idx = ds.index
    for q in range(len(ds.queries)):
        want = [p for p in range(idx.n_passages)
                if int(ds.queries.subject[q]) in slow_passage_entities(idx, p)
                and set(ds.queries.answers(q).tolist()) & slow_passage_entities(idx, p)]
        assert ds.positives(q).tolist() == want, ds.queries.texts[q]


def slow_withheld(ds, q):
    """Answers of q whose fact is stated by a held-out query (q itself not held out)."""
    if q in ds.heldout:
        return set()
    held = {fact(ds, int(h), a) for h in ds.heldout for a in ds.queries.answers(int(h))}
    return {int(a) for a in ds.queries.answers(q) if fact(ds, q, a) in held}


def test_labels_follow_the_rule(ds):
    idx = ds.index
    assert any(slow_withheld(ds, q) for q in range(len(ds.queries)))
    for q in range(len(ds.queries)):
        subj, answers = int(ds.queries.subject[q]), set(ds.queries.answers(q).tolist())
        withheld = slow_withheld(ds, q)
        for p in range(idx.n_passages):
            ents = slow_passage_entities(idx, p)
            want = (NEGATIVE if not ents & answers else IGNORED if ents & withheld
                    else POSITIVE if subj in ents else IGNORED)
            assert ds.label(q, p) == want


def test_ignored_pair_mentions_the_answer_but_not_the_subject(ds):
    # "Kismet Revisited" mentions Kismet (an answer of "William Dieterle, directed, ?") but not Dieterle.
    q = query_id(ds, "William Dieterle, directed, ?")
    p = [p for p in range(ds.index.n_passages) if ds.index.passage_text(p).startswith("Kismet Revisited")][0]
    assert ds.label(q, p) == IGNORED


def test_every_negative_kind_is_built_correctly(ds):
    rng = np.random.default_rng(0)
    found = {k: 0 for k in NEGATIVE_KINDS}
    for q in range(len(ds.queries)):
        subj = int(ds.queries.subject[q])
        for kind in NEGATIVE_KINDS:
            for _ in range(10):
                p = ds.negative(q, kind, rng)
                if p is None:
                    continue
                found[kind] += 1
                ents = slow_passage_entities(ds.index, p)
                assert ds.label(q, p) == NEGATIVE and not ents & set(ds.queries.answers(q).tolist())
                if kind == "shared_entity":
                    assert subj in ents
                if kind == "shared_relation":
                    assert subj not in ents
                    same = [o for o in range(len(ds.queries)) if ds.queries.relation[o] == ds.queries.relation[q]
                            and ds.queries.inverse[o] == ds.queries.inverse[q] and ds.queries.subject[o] != subj
                            and p in ds.positives(o).tolist()]
                    assert same, (ds.queries.texts[q], ds.index.passage_text(p))
    assert all(found.values()), found


def test_shared_entity_negative_of_kismet_is_the_remake_article(ds):
    q = query_id(ds, "Kismet, directed by, ?")
    rng = np.random.default_rng(0)
    got = {ds.negative(q, "shared_entity", rng) for _ in range(30)}
    assert {ds.index.passage_text(p).split("\n")[0] for p in got if p is not None} == {"Kismet Revisited"}
    q = query_id(ds, "Humphrey Bogart, starred in, ?")  # only one passage mentions him, and it is positive
    assert ds.negative(q, "shared_entity", rng) is None
    with pytest.raises(ValueError, match="unknown negative kind"):
        ds.negative(q, "easy", rng)


def test_heldout_queries_are_never_trained_on(ds):
    assert len(ds.heldout) == round(0.2 * ds.has_positive.sum())
    assert not set(ds.heldout.tolist()) & set(ds.train.tolist())
    for p in range(ds.index.n_passages):
        assert not set(ds.training_queries(p).tolist()) & set(ds.heldout.tolist())
        for q in ds.training_queries(p):
            assert p in ds.positives(int(q)).tolist()
    for step in range(6):
        batch = sample_batch(ds, PretrainConfig(anchor_passages=2, max_passages=4), step)
        assert not set(batch.queries.tolist()) & set(ds.heldout.tolist())


@pytest.mark.parametrize("seed", range(5))
def test_no_fact_of_a_heldout_query_is_trained_in_either_direction(toy_index, toy_files, seed):
    ds = DistantSupervision(toy_index, read_kb(toy_files / "kb.txt"), DistantConfig(holdout=0.3, split_seed=seed))
    held = {fact(ds, int(q), a) for q in ds.heldout for a in ds.queries.answers(int(q))}
    assert held
    m = np.asarray(ds.index.mentions)
    trained = set()  # every (query, gold answer) pair that training can see, as a fact
    for q in ds.train:
        for p in range(ds.index.n_passages):
            if ds.label(int(q), p) == POSITIVE:
                trained |= {fact(ds, int(q), e) for e in m[ds.gold_mentions(int(q), p), 0]}
    assert trained and not trained & held
    for step in range(8):  # and what the pretraining batches mark as gold
        batch = sample_batch(ds, PretrainConfig(anchor_passages=2, max_passages=4, seed=seed), step)
        L = 2 + max(len(ds.index.passage_pieces(int(p))) for p in batch.passages)
        labels, gold_start, _ = batch_targets(ds, batch, L)
        for a, q in enumerate(batch.queries):
            for b, p in enumerate(batch.passages):
                rows = m[m[:, 1] == p]
                gold = {fact(ds, int(q), r[0]) for r in rows if gold_start[a, b, r[2] + 1] and r[0] != ds.queries.subject[q]}
                assert not gold & held, (ds.queries.texts[int(q)], ds.index.passage_text(int(p)))


@pytest.mark.parametrize("seed", range(5))
def test_withheld_answers_and_training_positives_match_brute_force(toy_index, toy_files, seed):
    ds = DistantSupervision(toy_index, read_kb(toy_files / "kb.txt"), DistantConfig(holdout=0.3, split_seed=seed))
    assert len(ds.heldout) == round(0.3 * ds.has_positive.sum())  # the fraction is still of the queries
    train = []
    for q in range(len(ds.queries)):
        withheld = slow_withheld(ds, q)
        assert ds.withheld(q).tolist() == sorted(withheld)
        want = [] if q in ds.heldout else [
            p for p in ds.positives(q).tolist() if not slow_passage_entities(ds.index, p) & withheld]
        assert ds.training_positives(q).tolist() == want, ds.queries.texts[q]
        train += [q] if want else []
    assert ds.train.tolist() == train
    held_facts = {fact(ds, int(h), a) for h in ds.heldout for a in ds.queries.answers(int(h))}
    assert ds.summary()["heldout_facts"] == len(held_facts)


def test_inverse_query_of_a_heldout_fact_keeps_its_other_answers(toy_index, toy_files):
    kb = read_kb(toy_files / "kb.txt")
    for seed in range(100):  # a split holding out one of Walter Lang's films' "directed by" only
        ds = DistantSupervision(toy_index, kb, DistantConfig(holdout=0.2, split_seed=seed))
        moon, fair = query_id(ds, "Moon Over Miami, directed by, ?"), query_id(ds, "State Fair, directed by, ?")
        lang = query_id(ds, "Walter Lang, directed, ?")
        if ds.is_heldout[moon] and not ds.is_heldout[fair] and not ds.is_heldout[lang]:
            break
    else:
        pytest.fail("no such split")
    names = ds.index.entities.names
    assert [names[a] for a in ds.withheld(lang)] == ["Moon Over Miami"]
    assert lang in ds.train
    assert [ds.index.passage_text(int(p)).split("\n")[0] for p in ds.training_positives(lang)] == ["State Fair"]
    miami = [p for p in range(ds.index.n_passages) if ds.index.passage_text(p).startswith("Moon Over Miami")][0]
    assert ds.label(lang, miami) == IGNORED and lang not in ds.training_queries(miami)


def test_batches_are_reproducible_and_bounded(ds):
    cfg = PretrainConfig(anchor_passages=2, queries_per_passage=3, max_passages=4, seed=3)
    for step in range(5):
        a, b = sample_batch(ds, cfg, step), sample_batch(ds, cfg, step)
        assert a.queries.tolist() == b.queries.tolist() and a.passages.tolist() == b.passages.tolist()
        assert 2 <= len(a.passages) <= 4 and len(set(a.passages.tolist())) == len(a.passages)
        assert sum(a.negative_kinds.values()) == len(a.passages) - 2
        for q in a.queries:  # each query is positive in some anchor of the batch
            assert set(ds.positives(int(q)).tolist()) & set(a.passages[:2].tolist())


def test_batch_targets_mark_the_answer_mentions(ds):
    batch = sample_batch(ds, PretrainConfig(anchor_passages=3, max_passages=6), 0)
    L = 2 + max(len(ds.index.passage_pieces(int(p))) for p in batch.passages)
    labels, gs, ge = batch_targets(ds, batch, L)
    m = np.asarray(ds.index.mentions)
    for a, q in enumerate(batch.queries):
        answers = set(ds.queries.answers(int(q)).tolist())
        for b, p in enumerate(batch.passages):
            assert labels[a, b] == ds.label(int(q), int(p))
            want_s, want_e = set(), set()
            if labels[a, b] == POSITIVE:
                for row in m[m[:, 1] == p]:
                    if row[0] in answers:
                        want_s.add(int(row[2]) + 1)
                        want_e.add(int(row[3]) + 1)
                assert want_s
            assert set(np.flatnonzero(gs[a, b]).tolist()) == want_s
            assert set(np.flatnonzero(ge[a, b]).tolist()) == want_e


def test_bad_kb_input_is_counted(toy_index):
    facts = [Triple("Kismet", "directed_by", "William Dieterle", 1),
             Triple("Kismet", "filmed_in", "Nowhere Land", 2),          # object not an entity of the index
             Triple("Kismet", "composed_by", "Bette Davis", 3),         # never stated: no passage has both
             ]
    w = WarningLog()
    ds = DistantSupervision(toy_index, facts, DistantConfig(holdout=0), w)
    assert w.count("kb_entity_not_in_index") == 1
    assert w.count("relation_not_in_text") == 1 and "composed_by" in str(w.to_dict())
    assert w.count("relation_without_description") == 1
    assert w.count("query_without_passage") == 2  # both directions of the composed_by fact
    assert len(ds.train) == 2


def test_relation_text_file(tmp_path):
    good = tmp_path / "rel.json"
    good.write_text('{"filmed_in": ["filmed in", "location of"]}')
    w = WarningLog()
    assert relation_descriptions(["filmed_in", "directed_by"], good, w)["filmed_in"] == ("filmed in", "location of")
    assert len(w) == 0
    bad = tmp_path / "bad.json"
    bad.write_text('{"filmed_in": "filmed in"}')
    with pytest.raises(InputFormatError, match="filmed_in"):
        relation_descriptions(["filmed_in"], bad, w)
    bad.write_text('{"filmed_in": ')
    with pytest.raises(InputFormatError, match=r"bad.json:1: not valid JSON"):
        relation_descriptions(["filmed_in"], bad, w)
