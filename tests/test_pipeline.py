"""The front door, `DrKIT.load(index, model).answer(question)`, on the synthetic film corpus of test_model:
typed results whose chain points at real mentions, batch-independent answers, per-call settings."""

import json
import shutil

import numpy as np
import pytest
from test_model import SMALL, films_kb  # noqa: F401  (films_kb is a fixture)

from drkit.errors import ConfigError
from drkit.qa.ask import format_result
from drkit.qa.pipeline import DrKIT, QueryConfig
from drkit.qa.results import Result
from drkit.reason.follow import FollowConfig, best_mention_of_slot
from drkit.reason.model import ModelConfig
from drkit.reason.train import TrainConfig, train
from drkit.reason.vkb import QuestionError


@pytest.fixture(scope="module")
def kit(films_kb, tmp_path_factory):  # noqa: F811
    d, _ = films_kb
    run = tmp_path_factory.mktemp("pipeline") / "run"
    train(d / "index", d / "mentions", d / "train.txt", d / "dev.txt", run,
          model_config=ModelConfig(hops=2, shared_layers=SMALL.shared_layers, hop_layers=SMALL.hop_layers),
          follow_config=FollowConfig(top_k=100), config=TrainConfig(steps=4, batch_size=4, precision="fp32", eval_every=4),
          log=lambda *a: None)
    kit = DrKIT.load(d / "index", run)
    kit.test_run = run  # for the tests that load it again with other settings
    return kit


def _questions(films):
    return [f"who directed [{f['title']}]" for f in films[:6]] + [f"when was [{f['title']}] released" for f in films[6:12]]


def test_answer_gives_typed_results_with_a_chain_of_real_mentions(kit, films_kb):  # noqa: F811
    _, films = films_kb
    result = kit.answer(f"who directed [{films[0]['title']}]", top=4, chain_top=3)
    assert isinstance(result, Result)
    assert result.question_entity == films[0]["title"] and result.found_by == "bracketed"
    assert result.text == f"who directed {films[0]['title']}"
    assert result.hops == 2 and [h.hop for h in result.chain] == [1, 2]
    assert 1 <= len(result.answers) <= 4
    probs = [a.prob for a in result.answers]
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-5
    assert [a.entity for a in result.answers] == [kit.entity_names[a.entity_id] for a in result.answers]
    # the last hop's top entities are the answers
    assert [e.entity_id for e in result.chain[-1].top] == [a.entity_id for a in result.answers[:3]]
    index = kit.vkb.index
    for hop in result.chain:
        assert hop.n_entities >= len(hop.top) >= 1
        for e in hop.top:
            ev = e.evidence
            entity, passage = (int(x) for x in index.mentions[ev.mention_id][:2])
            assert entity == e.entity_id and passage == ev.passage_id  # the mention is one of the entity's
            assert ev.text == index.passage_text(passage)
            assert ev.text[ev.start:ev.end].casefold() == e.entity.casefold()  # offsets point at its name
            assert ev.title == index.article_titles[int(index.passage_article[passage])]
    # hop 1 can only reach passages through Z_0 = the question entity
    assert all(e.evidence.via == films[0]["title"] for e in result.chain[0].top)


def test_a_multi_hop_models_passages_hold_its_chains_mentions(kit, films_kb):  # noqa: F811
    """retrieve on a multi-hop model: the articles of each hop's best entities' supporting mentions, scored by
    the entity's probability in its hop (an article kept at its best), as a loop over the chain says."""
    from drkit.qa.pipeline import MULTI_HOP

    _, films = films_kb
    assert kit.kind == MULTI_HOP
    index = kit.vkb.index
    for q in _questions(films)[:6]:
        got = kit.retrieve(q, 4)
        chain = kit.answer(q, top=1, chain_top=4).chain
        best = {}
        for hop in chain:
            for e in hop.top:
                a = int(index.passage_article[e.evidence.passage_id])
                best[a] = max(best.get(a, 0.0), e.prob)
        want = sorted(best.values(), reverse=True)[:4]
        assert [p.score for p in got] == pytest.approx(want)
        assert all(p.score == pytest.approx(best[p.article]) and p.reached and p.hop in (1, 2) for p in got)
        assert all(p.text and p.title == index.article_titles[p.article] for p in got)


def test_answers_do_not_depend_on_the_batch(kit, films_kb):  # noqa: F811
    _, films = films_kb
    questions = _questions(films)
    together = kit.answer_batch(questions, top=5, chain_top=2)
    for q, batched in zip(questions, together):
        alone = kit.answer(q, top=5, chain_top=2)
        assert [a.entity_id for a in alone.answers] == [a.entity_id for a in batched.answers], q
        np.testing.assert_allclose([a.prob for a in alone.answers], [a.prob for a in batched.answers], rtol=1e-5, atol=1e-7)
        assert [[e.evidence.mention_id for e in h.top] for h in alone.chain] == \
            [[e.evidence.mention_id for e in h.top] for h in batched.chain]


def test_per_call_settings_leave_the_model_unchanged(kit, films_kb):  # noqa: F811
    _, films = films_kb
    q = f"who directed [{films[1]['title']}]"
    before = kit.model.follow_config
    one = kit.answer(q, query=QueryConfig(hops=1, top_k=7, min_weight=0.0, retrieval="global"))
    assert one.hops == 1 and len(one.chain) == 1
    assert kit.model.follow_config == before
    assert kit.answer(q).hops == 2
    with pytest.raises(ConfigError, match="2 trained hops"):
        kit.answer(q, query=QueryConfig(hops=3))
    with pytest.raises(ConfigError, match="min_weight"):
        kit.answer(q, query=QueryConfig(min_weight=2.0))
    with pytest.raises(ConfigError, match="hops"):
        QueryConfig(hops=0)
    with pytest.raises(QuestionError, match="not an entity"):
        kit.answer("who directed [No Such Film]")
    assert kit.answer_batch([]) == []


def test_without_a_chain_and_as_json(kit, films_kb):  # noqa: F811
    _, films = films_kb
    q = f"when was [{films[2]['title']}] released"
    bare = kit.answer(q, chain_top=0)
    full = kit.answer(q)
    assert bare.chain == () and [a.entity_id for a in bare.answers] == [a.entity_id for a in full.answers]
    record = json.loads(json.dumps(full.to_dict()))
    assert record["answers"][0]["entity"] == full.answers[0].entity
    hop = record["chain"][0]["top"][0]
    assert hop["snippet"].count("[[") == 1 and {"passage_id", "title", "start", "end", "via"} <= set(hop)
    text = "\n".join(format_result(full))
    assert text.startswith(f"Q: {q}") and "hop 2" in text and "[[" in text


def test_best_mention_of_each_slot_matches_a_loop():
    rng = np.random.default_rng(0)
    for trial in range(40):
        n, slots = int(rng.integers(0, 40)), int(rng.integers(1, 10))
        slot = rng.integers(0, slots, n)
        logits = rng.normal(size=n).astype(np.float32)
        if trial % 2:  # ties: the first of them (argmax's choice)
            logits = np.round(logits, 0)
        mentions = rng.permutation(1000)[:n]
        expected = np.full(slots, -1)
        for s in range(slots):
            cand = np.flatnonzero(slot == s)
            if len(cand):
                expected[s] = mentions[cand[np.argmax(logits[cand])]]
        np.testing.assert_array_equal(best_mention_of_slot(slot, logits, mentions, slots), expected)
    # a NaN logit never wins: the best finite one does
    nan = np.array([np.nan, 1.0, 2.0], dtype=np.float32)
    assert best_mention_of_slot(np.array([0, 0, 1]), nan, np.array([10, 11, 12]), 2).tolist() == [11, 12]


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_question_vectors_do_not_depend_on_the_batch(films_kb, precision):  # noqa: F811
    """With the real MiniLM in bf16, padding a question to the longest of its batch changes its vectors
    (other matrix shapes, other roundings); questions are encoded in groups of equal length instead, so
    a question's queries and answer probabilities are bit for bit the same alone and in a batch in bf16.
    In fp32 they are the same entities with the same probabilities up to the last bits: a CPU's products
    sum in an order that depends on their number of rows (on AVX-512 MKL from 16 rows on, and a question alone
    multiplies by the weights stored transposed, `drkit.dense.layers._transposed`), which bf16's roundings
    hide and fp32's do not."""
    import torch

    from drkit.dense.encoder import DualEncoder, EncoderConfig
    from drkit.reason.model import MultiHopModel
    from drkit.reason.vkb import VirtualKB

    d, films = films_kb
    vkb = VirtualKB.load(d / "index", d / "mentions", precision=precision, device="cpu")  # a CPU's property
    torch.manual_seed(0)
    model = MultiHopModel.from_encoder(DualEncoder.from_base(EncoderConfig(dim=32)), ModelConfig(hops=2)).eval()
    model.set_entities(vkb.entity_names)
    questions = [f"who directed {f['title']}" if i % 3 else f"in which year was the film {f['title']} released"
                 for i, f in enumerate(films[:24])]
    topics = np.array([vkb.index.entities.lookup(f["title"]) for f in films[:24]])
    with torch.no_grad():
        together = model(questions, topics, vkb, precision=precision)
        for b, q in enumerate(questions):
            alone = model([q], topics[b : b + 1], vkb, precision=precision)
            for t in range(2):
                ids_a, probs_a = alone[t].z.row(0)
                ids_b, probs_b = together[t].z.row(b)
                np.testing.assert_array_equal(ids_a, ids_b)
                if precision == "bf16":
                    assert torch.equal(alone[t].query[0], together[t].query[b]), (q, t)
                    np.testing.assert_array_equal(probs_a, probs_b)
                else:
                    torch.testing.assert_close(alone[t].query[0], together[t].query[b], rtol=1e-5, atol=1e-6)
                    np.testing.assert_allclose(probs_a, probs_b, rtol=1e-4, atol=1e-7)


def test_ivfpq_mips_answers_through_the_front_door(kit, films_kb):  # noqa: F811
    """LoadConfig(mips="ivfpq"): global retrieval over IVF-PQ codes with the short list scored again exactly;
    its answers agree with exact global retrieval on these questions."""
    pytest.importorskip("faiss")
    from drkit.qa.pipeline import LoadConfig

    d, films = films_kb
    pq = DrKIT.load(d / "index", kit.test_run, config=LoadConfig(mips="ivfpq"))
    assert pq.vkb.searcher_kind == "ivfpq"
    questions = _questions(films)
    got = pq.answer_batch(questions, top=3, chain_top=0)
    want = kit.answer_batch(questions, top=3, chain_top=0, query=QueryConfig(retrieval="global"))
    first = lambda r: r.answers[0].entity_id if r.answers else None  # noqa: E731
    assert sum(first(w) is not None for w in want) >= len(questions) // 2
    same = sum(first(g) == first(w) for g, w in zip(got, want))
    assert same >= len(questions) - 1, same


def test_saved_ivfpq_index_loads_instead_of_training(kit, films_kb, tmp_path):  # noqa: F811
    """drkit ann writes the trained codes; --ann loads them: the same searches as training them at load, and
    an IVF-PQ index of another mention index is refused."""
    pytest.importorskip("faiss")
    import torch

    from drkit.cli import main
    from drkit.dense.mentions import MentionIndex
    from drkit.dense.mips import ExactMIPS, FaissMIPS, recall_at_k
    from drkit.errors import ArtifactError
    from drkit.qa.pipeline import LoadConfig

    d, films = films_kb
    assert main(["ann", "--mentions", str(d / "mentions"), "--out", str(tmp_path / "ann"), "--nlist", "8"]) == 0
    saved = DrKIT.load(d / "index", kit.test_run, config=LoadConfig(mips="ivfpq", ann=str(tmp_path / "ann")))
    mentions = MentionIndex.load(d / "mentions")
    q = np.random.default_rng(0).standard_normal((5, mentions.dim)).astype(np.float32)
    exact = ExactMIPS(mentions.vectors, compute_dtype=torch.float32)
    assert recall_at_k(saved.vkb.searcher, exact, q, 20) >= 0.9  # every list visited (8 <= nprobe)
    trained = FaissMIPS(mentions.vectors, nlist=8, pq_m=4)  # save and load give back the same index
    trained.save(tmp_path / "round.faiss")
    loaded = FaissMIPS.load(tmp_path / "round.faiss", mentions.vectors)
    assert loaded.pq_m == 4
    for a, b in zip(loaded.search(q, 20), trained.search(q, 20)):
        assert np.array_equal(a, b)
    questions = _questions(films)
    got = saved.answer_batch(questions, top=3, chain_top=0)
    assert len(got) == len(questions)
    other = tmp_path / "other-mentions"
    shutil.copytree(d / "mentions", other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["created"] = "another time"
    (other / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ArtifactError, match="built over the mention index"):
        MentionIndex.load(other).searcher("ivfpq", ann=str(tmp_path / "ann"))
    with pytest.raises(ConfigError, match="goes with mips 'ivfpq'"):
        DrKIT.load(d / "index", kit.test_run, config=LoadConfig(ann=str(tmp_path / "ann")))


def test_search_settings_reach_the_searcher(kit, films_kb, tmp_path):  # noqa: F811
    """LoadConfig's nprobe and rerank (the --nprobe and --rerank flags) are those of the IVF-PQ searcher, trained
    at load or loaded from drkit ann; a value below 1 is a clear error."""
    pytest.importorskip("faiss")
    from drkit.cli import main
    from drkit.qa.pipeline import LoadConfig

    d, _ = films_kb
    trained = DrKIT.load(d / "index", kit.test_run, config=LoadConfig(mips="ivfpq", nprobe=3, rerank=7))
    assert (trained.vkb.searcher.index.nprobe, trained.vkb.searcher.rerank) == (3, 7)
    assert main(["ann", "--mentions", str(d / "mentions"), "--out", str(tmp_path / "ann"), "--nlist", "8"]) == 0
    saved = DrKIT.load(d / "index", kit.test_run, config=LoadConfig(mips="ivfpq", ann=str(tmp_path / "ann"),
                                                                    nprobe=2, rerank=5))
    assert (saved.vkb.searcher.index.nprobe, saved.vkb.searcher.rerank) == (2, 5)
    default = DrKIT.load(d / "index", kit.test_run, config=LoadConfig(mips="ivfpq"))
    assert (default.vkb.searcher.index.nprobe, default.vkb.searcher.rerank) == (min(32, default.vkb.searcher.index.nlist), 4)
    with pytest.raises(ConfigError, match="nprobe and rerank must be at least 1"):
        DrKIT.load(d / "index", kit.test_run, config=LoadConfig(mips="ivfpq", rerank=0))
