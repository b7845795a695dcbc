"""Passage retrieval (drkit.qa.retrieve, `drkit retrieve`): R@k / AR@k against a literal reference, bad lines
counted and reported, the peers, and a hop-mixing model trained on one tiny title-entity corpus and run,
without retraining, on a second one it has never seen (the way held-out corpora are scored)."""

import json

import numpy as np
import pytest

from drkit.cli import main
from drkit.errors import ConfigError
from drkit.qa.metrics import recall_metrics
from drkit.qa.retrieve import RetrieveConfig, Retrieved, read_questions, run_retrieval


def test_recall_metrics_by_hand():
    ranked = [["a", "b", "c", "d", "e", "f"], ["x", "y", "z", "a", "b", "c"], ["q"]]
    gold = [["a", "c"], ["b"], []]
    m = recall_metrics(ranked, gold, ["t1", "t2", "t1"], ks=(2, 5))
    assert m["overall"] == {"questions": 2, "R@2": 0.25, "AR@2": 0.0, "R@5": 1.0, "AR@5": 1.0}
    assert m["by_type"]["t1"]["R@2"] == 0.5 and m["by_type"]["t2"]["R@5"] == 1.0
    assert m["without_gold"] == 1


@pytest.mark.parametrize("seed", range(4))
def test_recall_metrics_match_a_loop(seed):
    rng = np.random.default_rng(seed)
    ranked = [[str(x) for x in rng.permutation(30)[:20]] for _ in range(25)]
    gold = [[str(x) for x in rng.choice(30, size=int(rng.integers(1, 5)), replace=False)] for _ in range(25)]
    m = recall_metrics(ranked, gold, [None] * 25)
    for k in (2, 5, 10, 20):
        r = ar = 0.0
        for rk, g in zip(ranked, gold):
            hit = 0
            for x in g:
                if x in rk[:k]:
                    hit += 1
            r += hit / len(g)
            ar += 1.0 if hit == len(g) else 0.0
        assert m["overall"][f"R@{k}"] == pytest.approx(r / 25, abs=1e-4)
        assert m["overall"][f"AR@{k}"] == pytest.approx(ar / 25, abs=1e-4)


@pytest.mark.parametrize("seed", range(3))
def test_ir_measures_agree_with_our_recall_and_give_ndcg_and_mrr(seed):
    """R@k by ir_measures (pytrec_eval) equals recall_metrics' on the same rankings, ties and empty
    rankings included; nDCG@10 and MRR equal literal formulas."""
    from drkit.qa.metrics import ir_measures_metrics

    rng = np.random.default_rng(seed)
    ranked = [[f"d{x}" for x in rng.permutation(30)[:int(rng.integers(0, 20))]] for _ in range(40)]
    gold = [[f"d{x}" for x in rng.choice(30, size=int(rng.integers(1, 4)), replace=False)] for _ in range(40)]
    ours = recall_metrics(ranked, gold, [None] * 40)["overall"]
    theirs = ir_measures_metrics({f"q{i}": g for i, g in enumerate(gold)}, {f"q{i}": r for i, r in enumerate(ranked)})
    for k in (2, 5, 10, 20):
        assert theirs[f"R@{k}"] == pytest.approx(ours[f"R@{k}"], abs=1e-4)
    mrr = np.mean([next((1 / (i + 1) for i, d in enumerate(r) if d in g), 0.0) for r, g in zip(ranked, gold)])
    ndcg = np.mean([sum(1 / np.log2(i + 2) for i, d in enumerate(r[:10]) if d in g)
                    / sum(1 / np.log2(i + 2) for i in range(min(len(g), 10))) for r, g in zip(ranked, gold)])
    assert theirs["RR"] == pytest.approx(mrr, abs=1e-4) and theirs["nDCG@10"] == pytest.approx(ndcg, abs=1e-4)


class FirstPassages:
    name = "first"

    def retrieve(self, questions, top):
        return [Retrieved(list(range(top)), [1.0 / (i + 1) for i in range(top)]) for _ in questions]


def test_bad_lines_are_reported_and_counted(tmp_path):
    q = tmp_path / "q.jsonl"
    q.write_text("\n".join([
        json.dumps({"id": "ok", "question": "who?", "supporting": ["k0", "k1"], "type": "t"}),
        "{not json",
        json.dumps(["a", "list"]),
        json.dumps({"id": "no-question"}),
        json.dumps({"id": "bad-sup", "question": "what?", "supporting": "k0"}),
        "",
        json.dumps({"id": "ok2", "question": "where?", "supporting": ["k30"]}),
        json.dumps({"id": "typo", "question": "when?", "supporting": ["k3", "k99"]}),
    ]) + "\n")
    items, bad = read_questions(q)
    assert [i.id for i in items] == ["ok", "ok2", "typo"]
    assert [b.split(": ")[0] for b in bad] == [f"{q}:2", f"{q}:3", f"{q}:4", f"{q}:5"]
    answers = tmp_path / "answers.jsonl"  # answers given but not as a list of names: bad lines, never dropped
    answers.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "a", "question": "who?", "answers": ["Ada", 1815]}, {"id": "b", "question": "who?", "answers": "Ada"},
        {"id": "c", "question": "who?", "answers": ["Ada", {"name": "x"}]}, {"id": "d", "question": "who?", "answers": []},
        {"id": "e", "question": "who?", "answers": [" "]}, {"id": "f", "question": "who?", "supporting": [True]}]))
    items, bad = read_questions(answers)
    assert [(i.id, i.answers) for i in items] == [("a", ["Ada", "1815"])]
    assert [b.split(": ", 1)[0] for b in bad] == [f"{answers}:{n}" for n in (2, 3, 4, 5, 6)]
    assert "field 'answers' must be a non-empty list" in bad[0] and "field 'supporting'" in bad[4]
    keys = [f"k{i}" for i in range(40)]
    logged = []
    m = run_retrieval(FirstPassages(), keys, keys, q, tmp_path / "out", log=logged.append)
    assert m["bad_lines"] == 4 and m["questions"] == 3  # a gold id the corpus does not have: said and counted
    assert (tmp_path / "out" / "bad_lines.txt").read_text().count("\n") == 4
    said = f"{q}:8: field 'supporting': 'k99' not an id of the index's corpus; it counts as a miss"
    assert f"warning: {said}" in logged and m["gold_not_in_corpus"] == {"questions": 1, "e.g.": [said]}
    assert m["overall"]["R@2"] == pytest.approx(1 / 3, abs=1e-4) and m["overall"]["AR@20"] == pytest.approx(1 / 3, abs=1e-4)
    assert m["overall"]["R@5"] == pytest.approx((1 + 0 + 0.5) / 3, abs=1e-4)  # "typo": k3 found, k99 a miss
    lines = (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()
    assert len(lines) == 3 and len(json.loads(lines[0])["passages"]) == 20
    assert json.loads((tmp_path / "out" / "metrics.json").read_text())["bad_lines"] == 4
    # the TREC run and qrels: every listed passage, ranks from 1, and the gold of the scored questions
    run = [line.split() for line in (tmp_path / "out" / "run.trec").read_text().splitlines()]
    assert len(run) == 60 and run[0] == ["ok", "Q0", "k0", "1", "20", "first"]
    assert (tmp_path / "out" / "qrels.trec").read_text() == "ok 0 k0 1\nok 0 k1 1\nok2 0 k30 1\ntypo 0 k3 1\ntypo 0 k99 1\n"
    assert m["ir_measures"]["R@2"] == m["overall"]["R@2"] and m["ir_measures"]["questions"] == 3


class AnsweringPassages(FirstPassages):
    """A retriever that gives entity answers unless told not to, and records how it was called."""
    answers = True

    def __init__(self):
        self.calls = []

    def retrieve(self, questions, top, answers=None):
        self.calls.append((len(questions), self.answers if answers is None else answers))
        out = super().retrieve(questions, top)
        for r in out:
            r.answer = "Ada" if self.calls[-1][1] else None
        return out


def test_questions_per_s_time_passages_alone_and_with_answers_apart(tmp_path):
    """The plain questions/s are passage retrieval alone (answers=False: no second pass of the follows); the
    "_with_answers" ones time the pass that also found the answers, and the predictions hold the answers."""
    q = tmp_path / "q.jsonl"
    q.write_text("".join(json.dumps({"id": f"q{i}", "question": f"who {i}?", "supporting": ["k0"], "answers": ["Ada"]})
                         + "\n" for i in range(5)))
    r = AnsweringPassages()
    m = run_retrieval(r, [f"k{i}" for i in range(20)], [f"t{i}" for i in range(20)], q, tmp_path / "out",
                      RetrieveConfig(batch_size=2, qps_sample=3), log=lambda *a: None)
    assert r.calls == ([(2, True), (2, True), (1, True)]  # the batches, with the answers
                       + [(2, False), (2, False)]  # passages alone at the batch size: the batches of the 3 of batch 1
                       + [(1, False)] * 4 + [(1, True)] * 3)  # batch 1: a warm-up and 3 alone, then 3 with answers
    assert {"batch_2_questions_per_s", "batch_2_questions_per_s_with_answers", "batch_1_questions_per_s",
            "batch_1_questions_per_s_with_answers"} <= set(m) and m["answers_overall"]["hits@1"] == 1.0
    assert m["batch_2_sample"] == 4 and m["batch_1_sample"] == 3
    r = AnsweringPassages()  # --qps-sample 0: nothing timed again, so no figure of passages alone
    m = run_retrieval(r, [f"k{i}" for i in range(20)], [f"t{i}" for i in range(20)], q, tmp_path / "out0",
                      RetrieveConfig(batch_size=2, qps_sample=0), log=lambda *a: None)
    assert r.calls == [(2, True), (2, True), (1, True)] and "batch_2_questions_per_s" not in m
    assert "batch_2_questions_per_s_with_answers" in m
    plain = run_retrieval(FirstPassages(), [f"k{i}" for i in range(20)], [f"t{i}" for i in range(20)], q,
                          tmp_path / "plain", RetrieveConfig(batch_size=2, qps_sample=3), log=lambda *a: None)
    assert not any(k.endswith("_with_answers") for k in plain) and plain["batch_1_sample"] == 3


@pytest.mark.parametrize("lines", [[], ["{not json", json.dumps({"id": "x"})]])
def test_a_question_file_without_a_good_line_is_an_error(tmp_path, lines):
    q = tmp_path / "q.jsonl"
    q.write_text("".join(line + "\n" for line in lines))
    with pytest.raises(ConfigError, match="no question to retrieve for in .*q.jsonl"):
        run_retrieval(FirstPassages(), ["k0"], ["k0"], q, tmp_path / "out", log=lambda *a: None)
    assert (tmp_path / "out" / "bad_lines.txt").read_text().count("\n") == len(lines)


def test_bm25_peer_finds_the_passage_with_the_rare_words():
    from drkit.qa.peers import BM25Retriever

    texts = ["The quick brown fox", "A slow green turtle crosses the road", "Lorem ipsum dolor", "Brown bears sleep"]
    r = BM25Retriever(texts)
    out = r.retrieve(["which turtle is green", "where do bears sleep"], top=2)
    assert out[0].articles[0] == 1 and out[1].articles[0] == 3
    assert out[0].scores[0] >= out[0].scores[1]


# -- a hop-mixing model on a tiny title-entity corpus, then on a second corpus it has never seen ------------

FIRST = ["Anna", "Boris", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo", "Irene", "Jonas"]
LAST = ["Abbott", "Brennan", "Castillo", "Dorsey", "Eckhart", "Fairbanks"]
ADJ = ["Silver", "Hidden", "Broken", "Crimson", "Silent", "Golden", "Frozen", "Wild"]
NOUN = ["River", "Garden", "Harbor", "Mountain", "Letter", "Empire"]
CITY = ["Oslo", "Lima", "Perth", "Quito", "Riga", "Sofia", "Turin", "Utrecht"]


def title_corpus(seed, n_films=16, n_directors=8):
    rng = np.random.default_rng(seed)
    people = [f"{f} {l}" for f in FIRST for l in LAST]
    films = [f"The {a} {n}" for a in ADJ for n in NOUN]
    rng.shuffle(people), rng.shuffle(films)
    directors = people[:n_directors]
    rows, questions = [], []
    born = {d: CITY[rng.integers(len(CITY))] for d in directors}
    for i, d in enumerate(directors):
        rows.append({"id": f"s{seed}-d{i}", "title": d, "text": f"{d} is a film director born in {born[d]}."})
    directed = {}
    for i, f in enumerate(films[:n_films]):
        d = directors[rng.integers(len(directors))]
        directed[f] = d
        year = 1950 + int(rng.integers(60))
        rows.append({"id": f"s{seed}-f{i}", "title": f, "text": f"{f} is a {year} film directed by {d}."})
    key = {r["title"]: r["id"] for r in rows}
    for i, f in enumerate(films[:n_films]):
        g = films[(i + 1) % n_films]
        questions.append({"id": f"q{seed}-c{i}", "type": "comparison", "question": f"Which film came out first, {f} or {g}?",
                          "supporting": [key[f], key[g]], "answers": [f]})
        d = directed[f]
        questions.append({"id": f"q{seed}-p{i}", "type": "compositional",
                          "question": f"Where was the director of film {f} born?",
                          "supporting": [key[f], key[d]], "answers": [born[d]]})
    return rows, questions


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")


@pytest.fixture(scope="module")
def mixing_run(tmp_path_factory, tiny_base):
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.mentions import EmbedConfig, build_mention_index
    from drkit.dense.pretrain import PretrainConfig, pretrain
    from drkit.index.build import build_index
    from drkit.reason.model import ModelConfig
    from drkit.reason.train_mixing import MixTrainConfig, train_mixing

    d = tmp_path_factory.mktemp("titles")
    quiet = lambda *a: None  # noqa: E731
    for seed in (1, 2):
        rows, questions = title_corpus(seed)
        write_jsonl(d / f"corpus{seed}.jsonl", rows)
        write_jsonl(d / f"questions{seed}.jsonl", questions)
        (d / f"cities{seed}.txt").write_text("\n".join(CITY) + "\n")
        build_index(d / f"corpus{seed}.jsonl", d / f"index{seed}", entities=["titles", d / f"cities{seed}.txt"], log=quiet)
    pretrain(d / "index1", None, d / "enc", PretrainConfig(steps=0, precision="fp32"), EncoderConfig(base=str(tiny_base), dim=32),
             log=quiet)
    for seed in (1, 2):  # the second corpus is embedded with the same encoder
        build_mention_index(d / f"index{seed}", d / "enc", d / f"mentions{seed}", EmbedConfig(precision="fp32"), log=quiet)
    train_mixing(d / "index1", d / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", d / "run",
                 model_config=ModelConfig(shared_layers=1, hop_layers=1),
                 config=MixTrainConfig(steps=4, batch_size=8, eval_every=4, precision="fp32"), log=quiet)
    return d


def test_titles_are_the_entities(mixing_run):
    from drkit.index.sparse import SparseIndex

    index = SparseIndex.load(mixing_run / "index1")
    rows = [json.loads(line) for line in (mixing_run / "corpus1.jsonl").read_text().splitlines()]
    assert all(index.entities.lookup(r["title"]) is not None for r in rows)
    assert all(index.entities.lookup(c) is not None for c in CITY)
    assert (index.article_entity >= 0).all()
    manifest = json.loads((mixing_run / "index1" / "manifest.json").read_text())
    assert manifest["inputs"]["entities"][0] == "titles"


@pytest.mark.parametrize("seed", [1, 2])  # 2: a corpus the model was not trained on
def test_retrieve_cli_on_the_training_corpus_and_an_unseen_one(mixing_run, tmp_path, seed, capsys):
    d = mixing_run
    out = tmp_path / "out"
    assert main(["retrieve", "--index", str(d / f"index{seed}"), "--model", str(d / "run"), "--mentions",
                 str(d / f"mentions{seed}"), "--questions", str(d / f"questions{seed}.jsonl"), "--out", str(out),
                 "--qps-sample", "3", "--batch-size", "7", "--answers"]) == 0
    assert "R@5" in capsys.readouterr().out
    preds = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    questions = [json.loads(line) for line in (d / f"questions{seed}.jsonl").read_text().splitlines()]
    assert [p["id"] for p in preds] == [q["id"] for q in questions]
    keys = {json.loads(line)["id"] for line in (d / f"corpus{seed}.jsonl").read_text().splitlines()}
    for p in preds:
        assert 5 <= len(p["passages"]) <= 20 and len({x["id"] for x in p["passages"]}) == len(p["passages"])
        reached = [x["reached"] for x in p["passages"]]
        assert reached == sorted(reached, reverse=True)  # the reached ones first, then the linker's
        scores = [x["score"] for x in p["passages"]]
        assert scores == sorted(scores, reverse=True)
        assert all(x["hop"] in (0, 1, 2) for x in p["passages"] if x["reached"])
        assert {x["id"] for x in p["passages"]} <= keys  # passages of the corpus asked, not the training one
        assert len(p["pi"]) == 3 and abs(sum(p["pi"]) - 1) < 1e-3
        assert len(p["chain"]) == 3
        for hop in p["chain"]:
            for e in hop:  # the evidence: a mention of the entity (the linker's: its name up to case), in the corpus
                if "mention" in e:
                    assert e["mention"].casefold() == e["entity"].casefold() and e["passage"] in keys
        assert any("mention" in e for hop in p["chain"][1:] for e in hop)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["questions"] == len(questions) and metrics["bad_lines"] == 0
    unreached = np.mean([sum(not x["reached"] for x in p["passages"][:20]) for p in preds])
    assert metrics["unreached"]["@20"] == pytest.approx(unreached, abs=1e-4)
    # both films are named in a comparison question: the linker puts them in Z_0, and they stay on top
    assert metrics["by_type"]["comparison"]["AR@5"] >= 0.9, metrics["by_type"]
    assert metrics["by_type"]["compositional"]["R@5"] >= 0.5, metrics["by_type"]
    assert set(metrics["answers"]) == {"comparison", "compositional"}
    right = [p["answer"] is not None and p["answer"].casefold() in {a.casefold() for a in q["answers"]}
             for p, q in zip(preds, questions) if q.get("answers")]
    assert metrics["answers_overall"] == {"questions": len(right), "hits@1": round(float(np.mean(right)), 4)}


@pytest.mark.parametrize("top, shown", [(1, "R@1"), (3, "R@2")])
def test_retrieve_cli_with_a_top_below_five_prints_the_figures_it_has(mixing_run, tmp_path, top, shown, capsys):
    d = mixing_run
    assert main(["retrieve", "--index", str(d / "index1"), "--model", str(d / "run"), "--questions",
                 str(d / "questions1.jsonl"), "--out", str(tmp_path / "out"), "--top", str(top), "--qps-sample", "0"]) == 0
    printed = capsys.readouterr().out
    assert f" {shown} " in printed and "R@5" not in printed
    metrics = json.loads((tmp_path / "out" / "metrics.json").read_text())
    assert f"{printed.split(shown)[1].split()[0]}" == f"{metrics['overall'][shown]:.3f}"


def test_index_cli_entities_titles_and_a_list(mixing_run, tmp_path):
    from drkit.index.sparse import SparseIndex

    d = mixing_run
    assert main(["index", "--corpus", str(d / "corpus1.jsonl"), "--entities", "titles", "--out", str(tmp_path / "t")]) == 0
    assert main(["index", "--corpus", str(d / "corpus1.jsonl"), "--entities", "titles", "--entities",
                 str(d / "cities1.txt"), "--out", str(tmp_path / "tc")]) == 0
    n_articles = len((d / "corpus1.jsonl").read_text().splitlines())
    assert SparseIndex.load(tmp_path / "t").n_entities == n_articles
    assert SparseIndex.load(tmp_path / "tc").n_entities == n_articles + len(CITY)


def test_mixing_training_run_and_model_round_trip(mixing_run, tmp_path):
    import torch

    from drkit.dense.mentions import MentionIndex
    from drkit.index.question_linking import QuestionLinker
    from drkit.index.sparse import SparseIndex
    from drkit.reason.mixing import HopMixingModel, is_mixing_model
    from drkit.reason.train_mixing import linked_entity_set
    from drkit.reason.vkb import VirtualKB

    d = mixing_run
    assert [json.loads(line)["step"] for line in (d / "run" / "dev_log.jsonl").read_text().splitlines()] == [0, 4]
    assert len((d / "run" / "train_log.jsonl").read_text().splitlines()) == 4
    assert json.loads((d / "run" / "done.json").read_text())["best"]["step"] == 4  # keep="last"
    assert is_mixing_model(d / "run") and not is_mixing_model(d / "index1")
    model = HopMixingModel.load(d / "run" / "model")
    model.save(tmp_path / "copy")
    again = HopMixingModel.load(tmp_path / "copy")
    index = SparseIndex.load(d / "index1")
    vkb = VirtualKB(index, MentionIndex.load(d / "mentions1"))
    for m in (model, again):
        m.base.set_entities(vkb.entity_names)
    texts = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()[:6]]
    z0 = linked_entity_set(QuestionLinker.from_index(index).link(texts))
    with torch.no_grad():
        a, b = model(texts, z0, vkb, precision="fp32"), again(texts, z0, vkb, precision="fp32")
        one = model(texts[2:3], linked_entity_set(QuestionLinker.from_index(index).link(texts[2:3])), vkb, precision="fp32")
    torch.testing.assert_close(a.pi, b.pi)
    torch.testing.assert_close(a.z_star.to_dense(index.n_entities), b.z_star.to_dense(index.n_entities))
    # a question is answered the same alone and in a batch
    torch.testing.assert_close(one.z_star.to_dense(index.n_entities)[0], a.z_star.to_dense(index.n_entities)[2],
                               atol=1e-5, rtol=1e-4)


def test_ask_with_a_mixing_model_shows_pi_and_the_chain(mixing_run, capsys):
    d = mixing_run
    q = json.loads((d / "questions1.jsonl").read_text().splitlines()[1])["question"]
    assert main(["ask", "--index", str(d / "index1"), "--model", str(d / "run"), "--top", "3", q]) == 0
    out = capsys.readouterr().out
    assert "pi (weight of 0, 1, .. hops)" in out and "hop 0 (linked, rescored)" in out and "hop 2 (" in out
    assert ", in \"" in out  # an entity's supporting mention and its passage
    answers, passages = out.split("  passages:")
    assert answers.count("  1. ") == 1 and "  4. " not in answers  # at most --top 3 answers
    assert passages.count("  1. ") == 1 and "  5. " in passages and "  6. " not in passages  # 5 by default
    assert main(["ask", "--index", str(d / "index1"), "--model", str(d / "run"), "--json", "--passages", "7", q]) == 0
    obj = json.loads(capsys.readouterr().out)
    assert len(obj["pi"]) == 3 and len(obj["chain"]) == 3 and len(obj["passages"]) == 7
    assert [h["hop"] for h in obj["chain"]] == [0, 1, 2] and 1 <= len(obj["answers"]) <= 5


def test_the_answer_is_the_last_hops_best_entity_the_question_does_not_name(mixing_run):
    import torch

    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reason.train_mixing import linked_entity_set

    d = mixing_run
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    # film passages name only their director: two hops from a director (films, then their directors) walk
    # back to the director the question names
    rows = [json.loads(line) for line in (d / "corpus1.jsonl").read_text().splitlines()]
    questions += [f"Which films did {r['title']} direct?" for r in rows if "-d" in r["id"]]
    # the answer's hops as retrieval's, from the linked Z_0 (test_the_answer_hops_start_where_asked: from the names)
    # (without the kind filter, which the next test checks: "Which films" would put a film first)
    keep = DrKITRetriever.load(d / "index1", d / "run", answer_skips_named=False, answer_start="linked",
                               answer_kinds=False)
    skip = DrKITRetriever.load(d / "index1", d / "run", answer_start="linked", answer_kinds=False)
    named = keep.linker.link(questions)
    with torch.no_grad():
        out = keep.model(questions, linked_entity_set(named), keep.vkb, precision=keep.precision, answers=True,
                         named=named.named())  # as retrieval calls it
    ranked, _ = out.answer.top(50)  # the answer head's distribution (the run's model has one)
    a, b = keep.retrieve(questions, 20), skip.retrieve(questions, 20)
    n_named = 0
    for i, (x, y) in enumerate(zip(a, b)):
        exact = {keep.names[int(e)] for e in named.ids[(named.rows == i) & named.exact]}
        assert exact, questions[i]  # every toy question names a film or a director
        assert x.answer == keep.names[int(ranked[i][0])]  # without the rule: the answer hop's best entity
        # (None where the answer hop reached only named entities: from the films' pages, their one director)
        expected = next((keep.names[int(e)] for e in ranked[i] if e >= 0 and keep.names[int(e)] not in exact), None)
        assert y.answer == expected and y.answer not in exact
        n_named += x.answer in exact
    assert n_named > 0  # the rule was exercised: some last hops walk back to a named entity


def from_all_of_z1(retriever):
    """The retriever's answer head following from all of Z_1 (answer_from_pages off): a wide answer pool, cities
    and all, where a test needs one."""
    import dataclasses

    retriever.model.config = dataclasses.replace(retriever.model.config, answer_from_pages=False)


def test_the_answer_prefers_the_kind_the_question_asks_for(mixing_run):
    from drkit.data.kb import EntityTable
    from drkit.qa.drkit_retriever import DrKITRetriever

    d = mixing_run
    rows = [json.loads(line) for line in (d / "corpus1.jsonl").read_text().splitlines()]
    questions = [f"Who is tied to {r['title']}?" for r in rows[:8]]  # "who": a person is asked for
    ref = DrKITRetriever.load(d / "index1", d / "run", answer_start="linked")
    from_all_of_z1(ref)
    ref.answer_top = 50  # the reference: the hops' order, 50 deep, no kinds
    pools = [x.answers for x in ref.retrieve(questions, 20)]
    pos = min(9, len(pools[0]) - 1)
    assert pos >= 5  # beyond the 5 answers kept: the wider pool is what finds it
    marked = {pools[0][pos][0]}  # the only person; every other entity a place
    r = DrKITRetriever.load(d / "index1", d / "run", answer_start="linked")
    from_all_of_z1(r)
    table = r.vkb.index.entities
    r.vkb.index.entities = EntityTable(table.names, table.aliases,
                                       ["PERSON" if i in marked else "GPE" for i in range(len(table))])
    for got, pool in zip(r.retrieve(questions, 20), pools):
        expected = next((e for e, _ in pool if e in marked), pool[0][0])
        assert got.answers[0][0] == expected and got.answer == r.names[expected]
        assert [e for e, _ in got.answers[1:]] == [e for e, _ in pool if e != expected][:4]
    r.answer_kinds = False  # switched off: the hops' order
    assert [x.answers for x in r.retrieve(questions, 20)] == [p[:5] for p in pools]


def test_train_mixing_cli_writes_a_model_that_retrieve_loads(mixing_run, tmp_path, capsys):
    d = mixing_run
    run = tmp_path / "run"
    args = ["train-mixing", "--index", str(d / "index1"), "--mentions", str(d / "mentions1"), "--train",
            str(d / "questions1.jsonl"), "--dev", str(d / "questions1.jsonl"), "--out", str(run), "--steps", "2",
            "--batch-size", "4", "--eval-every", "2", "--precision", "fp32", "--shared-layers", "1", "--hop-layers", "1",
            "--hops", "1"]
    assert main(args) == 0
    assert len((run / "train_log.jsonl").read_text().splitlines()) == 2
    assert json.loads((run / "run.json").read_text())["mix"]["hops"] == 1
    assert main(args) == 0  # the same settings: found done
    assert main(args[:-1] + ["2"]) == 2  # other settings: refused, naming the setting
    assert "hops" in capsys.readouterr().err
    assert main(["retrieve", "--index", str(d / "index1"), "--model", str(run), "--questions",
                 str(d / "questions1.jsonl"), "--out", str(tmp_path / "r"), "--qps-sample", "0"]) == 0
    pred = json.loads((tmp_path / "r" / "predictions.jsonl").read_text().splitlines()[0])
    assert len(pred["pi"]) == 2 and len(pred["chain"]) == 2


def test_retrieve_refuses_mentions_embedded_by_another_encoder(mixing_run, tmp_path, capsys):
    import shutil

    d = mixing_run
    other = tmp_path / "mentions-other"
    shutil.copytree(d / "mentions2", other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["encoder"]["sha256"] = "0" * 64
    (other / "manifest.json").write_text(json.dumps(manifest))
    assert main(["retrieve", "--index", str(d / "index2"), "--model", str(d / "run"), "--mentions", str(other),
                 "--questions", str(d / "questions2.jsonl"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "embedded by the encoder" in err and "drkit embed --encoder" in err
    assert not (tmp_path / "out").exists()


def test_remove_named_drops_the_named_entities_from_every_hop_but_z0(mixing_run):
    import dataclasses

    import torch

    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reason.train_mixing import linked_entity_set

    d = mixing_run
    r = DrKITRetriever.load(d / "index1", d / "run")
    rows = [json.loads(line) for line in (d / "corpus1.jsonl").read_text().splitlines()]
    questions = [f"Which films did {x['title']} direct?" for x in rows if "-d" in x["id"]]
    linked = r.linker.link(questions)
    named = linked.named()
    outs = {}
    for flag in (False, True):
        r.model.config = dataclasses.replace(r.model.config, remove_named=flag)
        with torch.no_grad():
            outs[flag] = r.model(questions, linked_entity_set(linked), r.vkb, precision="fp32", named=named)
    n = r.vkb.index.n_entities
    for b in range(len(questions)):
        gone = named[b][named[b] >= 0]
        assert len(gone) and all((z.to_dense(n)[b, gone] == 0).all() for z in outs[True].z[1:])
        torch.testing.assert_close(outs[True].z[0].to_dense(n)[b], outs[False].z[0].to_dense(n)[b])
        torch.testing.assert_close(outs[True].z[1].to_dense(n)[b], outs[False].z[1].to_dense(n)[b])  # films
    # without removal, two hops from a director walk back to it
    assert any((outs[False].z[2].to_dense(n)[b, named[b][named[b] >= 0]] > 0).any() for b in range(len(questions)))


def test_page_mix_mixes_each_hop_over_the_entities_with_a_page(mixing_run, tmp_path):
    """The cities of index1 are entities without a page: with page_mix each Z_t is renormalised over the pages
    before mixing (against the mixture of each hop's dense distribution so renormalised); on an index whose
    entities all have pages it changes nothing, to the bit; a model saved before the setting loads without it."""
    import dataclasses

    import torch

    from drkit.index.build import build_index
    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reason.mixing import HopMixingModel
    from drkit.reason.train_mixing import linked_entity_set

    d = mixing_run
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()[:8]]
    assert HopMixingModel.load(d / "run" / "model").config.page_mix  # the default, and what the run trained with
    r = DrKITRetriever.load(d / "index1", d / "run")
    has_page = r.vkb.page_entities
    assert has_page is not None and not has_page.all()
    n = r.vkb.index.n_entities
    cities = [r.vkb.index.entities.lookup(c) for c in CITY]
    assert not has_page[cities].any()
    linked = r.linker.link(questions)
    outs = {}
    for flag in (True, False):
        r.model.config = dataclasses.replace(r.model.config, page_mix=flag)
        with torch.no_grad():
            outs[flag] = r.model(questions, linked_entity_set(linked), r.vkb, precision="fp32")
    expected = torch.zeros(len(questions), n, dtype=outs[True].z_star.probs.dtype)
    for t, z in enumerate(outs[True].z):
        dense = z.to_dense(n).to(expected.dtype) * torch.from_numpy(has_page)
        total = dense.sum(1, keepdim=True)
        expected += outs[True].pi[:, t:t + 1].to(expected.dtype) * torch.where(total > 0, dense / total, dense)
    torch.testing.assert_close(outs[True].z_star.to_dense(n), expected)
    plain = torch.zeros_like(expected)
    for t, z in enumerate(outs[False].z):
        plain += outs[False].pi[:, t:t + 1].to(expected.dtype) * z.to_dense(n).to(expected.dtype)
    torch.testing.assert_close(outs[False].z_star.to_dense(n), plain)
    assert outs[False].z_star.to_dense(n)[:, cities].sum() > 0  # the cities had mass to take out
    # an index of titles only: every entity has a page, and page_mix changes nothing
    build_index(d / "corpus1.jsonl", tmp_path / "titles", entities=["titles"], log=lambda *a: None)
    from drkit.dense.mentions import EmbedConfig, build_mention_index

    build_mention_index(tmp_path / "titles", d / "enc", tmp_path / "mentions", EmbedConfig(precision="fp32"),
                        log=lambda *a: None)
    t = DrKITRetriever.load(tmp_path / "titles", d / "run", tmp_path / "mentions")
    assert t.vkb.page_entities is None
    linked = t.linker.link(questions)
    same = {}
    for flag in (True, False):
        t.model.config = dataclasses.replace(t.model.config, page_mix=flag)
        with torch.no_grad():
            same[flag] = t.model(questions, linked_entity_set(linked), t.vkb, precision="fp32").z_star
    assert torch.equal(same[True].ids, same[False].ids) and torch.equal(same[True].probs, same[False].probs)
    # a training run made before page_mix existed: on the titles index it meant either value and resumes; on
    # index1 (cities without a page) it meant the plain mixture, and asking for page_mix is refused
    from drkit.errors import ConfigError
    from drkit.reason.model import ModelConfig
    from drkit.reason.train_mixing import MixTrainConfig, train_mixing

    kw = dict(model_config=ModelConfig(shared_layers=1, hop_layers=1), log=lambda *a: None,
              config=MixTrainConfig(steps=1, batch_size=4, eval_every=1, precision="fp32"))
    for index, mentions, resumes in ((tmp_path / "titles", tmp_path / "mentions", True),
                                     (d / "index1", d / "mentions1", False)):
        run = tmp_path / f"run-{index.name}"
        train_mixing(index, mentions, d / "questions1.jsonl", d / "questions1.jsonl", run, **kw)
        settings = json.loads((run / "run.json").read_text())
        del settings["mix"]["page_mix"]
        (run / "run.json").write_text(json.dumps(settings))
        if resumes:
            assert train_mixing(index, mentions, d / "questions1.jsonl", d / "questions1.jsonl", run, **kw) == run / "model"
        else:
            with pytest.raises(ConfigError, match="page_mix"):
                train_mixing(index, mentions, d / "questions1.jsonl", d / "questions1.jsonl", run, **kw)
    # answers without a page cannot be in Z* over pages: that objective is refused with it
    with pytest.raises(ConfigError, match="pages\\+answers with page_mix"):
        train_mixing(d / "index1", d / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", tmp_path / "pa",
                     **{**kw, "config": MixTrainConfig(steps=1, objective="pages+answers", precision="fp32")})
    # a model saved before page_mix existed mixed over every entity, and loads so
    manifest = json.loads((d / "run" / "model" / "manifest.json").read_text())
    old = tmp_path / "old"
    import shutil

    shutil.copytree(d / "run" / "model", old)
    del manifest["mix"]["page_mix"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert HopMixingModel.load(old).config.page_mix is False


def test_the_answer_head_is_its_own_hop_trained_by_the_answer_loss_alone(mixing_run, tmp_path):
    """The run's model has an answer head (the default): its answer is a follow from Z_1 with the base's third
    hop, the same as Z_2 of a plain 2-hop model given that hop's weights in its second; asking for it changes
    no passage output, and a loss on it gives a gradient to the head's own parameters and to nothing else. A
    model saved before the setting existed has no head, and its answer is Z_T."""
    import dataclasses

    import torch

    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reason.mixing import HopMixingModel, MixConfig
    from drkit.reason.model import MultiHopModel
    from drkit.reason.train_mixing import linked_entity_set

    d = mixing_run
    r = DrKITRetriever.load(d / "index1", d / "run")
    model, vkb = r.model, r.vkb
    assert model.config.answer_head and model.base.config.hops == 3
    # from all of Z_1, as a plain model's last hop follows (the test below: from Z_1 over the pages, the default)
    model.config = dataclasses.replace(model.config, answer_from_pages=False)
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()[:8]]
    z0 = linked_entity_set(r.linker.link(questions))
    with torch.no_grad():
        plain_out = model(questions, z0, vkb, precision="fp32")
        out = model(questions, z0, vkb, precision="fp32", answers=True)
    assert plain_out.z_answer is None and plain_out.answer is plain_out.z[-1] and out.answer is out.z_answer
    assert torch.equal(out.z_star.ids, plain_out.z_star.ids) and torch.equal(out.z_star.probs, plain_out.z_star.probs)
    # the reference: a 2-hop model without a head whose second hop holds the head's weights
    base = model.base
    plain = HopMixingModel(MultiHopModel(dataclasses.replace(base.config, hops=2), base.follow_config,
                                         base.encoder.bert_config, base.dim, base.tokenizer, base.max_question_pieces),
                           dataclasses.replace(model.config, answer_head=False))
    moved = {}
    for k, v in model.state_dict().items():
        parts = k.split(".")
        if k.startswith("base.encoder.") and parts[2] in ("hop_layers", "start", "end", "entity"):
            if parts[3] == "1":
                continue
            k = ".".join(parts[:3] + ["1" if parts[3] == "2" else parts[3]] + parts[4:])
        moved[k] = v[[0, 2]] if k == "base.tfidf_power" else v
    plain.load_state_dict(moved)
    plain.base.set_entities(vkb.entity_names)
    plain.eval()
    with torch.no_grad():
        reference = plain(questions, z0, vkb, precision="fp32").z[-1]
    assert len(reference) > 0
    assert torch.equal(reference.rows, out.z_answer.rows) and torch.equal(reference.ids, out.z_answer.ids)
    torch.testing.assert_close(reference.probs, out.z_answer.probs)
    # gradient: the head's parameters only
    model.train()
    model.zero_grad()
    out = model(questions, z0, vkb, precision="fp32", answers=True)
    (-torch.log(out.z_answer.probs.clamp_min(1e-9)).sum()).backward()
    head = ("base.encoder.hop_layers.2.", "base.encoder.start.2.", "base.encoder.end.2.", "base.encoder.entity.2.")
    moved_grads = {n for n, p in model.named_parameters() if p.grad is not None and p.grad.abs().sum() > 0}
    assert moved_grads and all(n.startswith(head) or n == "base.tfidf_power" for n in moved_grads), moved_grads
    assert any(n.startswith("base.encoder.hop_layers.2.") for n in moved_grads)
    assert base.tfidf_power.grad[:2].abs().sum() == 0
    model.eval()
    # a model saved before answer_head existed: no head
    plain.save(tmp_path / "old")
    manifest = json.loads((tmp_path / "old" / "manifest.json").read_text())
    del manifest["mix"]["answer_head"]
    (tmp_path / "old" / "manifest.json").write_text(json.dumps(manifest))
    old = HopMixingModel.load(tmp_path / "old")
    assert old.config.answer_head is False and old.base.config.hops == 2
    with pytest.raises(ConfigError, match="answer head"):
        HopMixingModel(plain.base, MixConfig(hops=2))


def test_named_entity_set_starts_from_the_names_found_verbatim():
    from drkit.index.question_linking import LinkedQuestions
    from drkit.reason.train_mixing import named_entity_set

    # question 0 names entities 7 and 2 verbatim (and links 5 by TF-IDF); question 1 names none
    linked = LinkedQuestions(rows=np.array([0, 0, 0, 1, 1]), ids=np.array([2, 5, 7, 3, 4]),
                             weights=np.array([0.5, 0.2, 0.3, 0.4, 0.6], dtype=np.float32),
                             scores=np.array([1.5, 0.2, 1.3, 0.1, 0.3]), exact=np.array([True, False, True, False, False]),
                             batch_size=2)
    z = named_entity_set(linked)
    got = list(zip(z.rows.tolist(), z.ids.tolist(), [round(p, 6) for p in z.probs.tolist()]))
    assert got == [(0, 2, 0.5), (0, 7, 0.5), (1, 3, 0.4), (1, 4, 0.6)]  # equal weights; the linked Z_0 kept


def test_the_answer_hops_start_where_asked(mixing_run):
    import torch

    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reason.train_mixing import linked_entity_set, named_entity_set

    d = mixing_run
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()]
    for start, make in (("linked", linked_entity_set), ("named", named_entity_set)):
        r = DrKITRetriever.load(d / "index1", d / "run", answer_start=start, precision="fp32")
        got = r.retrieve(questions, 20)
        linked = r.linker.link(questions)
        named_ids = linked.named()
        with torch.no_grad():
            last = r.model(questions, make(linked), r.vkb, precision="fp32", named=named_ids, answers=True).answer
        for b, res in enumerate(got):  # the answers: that pass's answer hop, best first, the named entities skipped
            named = set(named_ids[b][named_ids[b] >= 0].tolist())
            ids, probs = last.row(b)
            want = [(int(e), float(p)) for e, p in sorted(zip(ids, probs), key=lambda x: (-x[1], x[0])) if int(e) not in named]
            assert res.answers == want[:r.answer_top]
            assert res.answer == (r.names[want[0][0]] if want else None)
    with pytest.raises(ConfigError, match="answer_start"):
        DrKITRetriever.load(d / "index1", d / "run", answer_start="bracketed")


def test_passages_of_a_page_are_ordered_by_the_question_not_by_file_order(mixing_run, tmp_path):
    """A corpus where every director's page has two passages (the birthplace in the second): each passage's
    relevance r(a) (DrKITRetriever) equals a loop over the hops and the passage's mentions, and the
    passages of a page are ranked by it, each with its entity's Z* times its softmax share of the page."""
    import torch

    from drkit.dense.mentions import EmbedConfig, build_mention_index
    from drkit.index.build import build_index
    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reason.train_mixing import linked_entity_set

    d = mixing_run
    rows, questions = title_corpus(3)
    split = []
    for r in rows:
        if "-d" in r["id"]:
            split.append({"id": r["id"] + "a", "title": r["title"],
                          "text": f"{r['title']} is a film director who worked with {rows[-1]['title']}."})
            split.append({"id": r["id"] + "b", "title": r["title"], "text": r["text"]})
        else:
            split.append(r)
    write_jsonl(tmp_path / "corpus.jsonl", split)
    quiet = lambda *a: None  # noqa: E731
    build_index(tmp_path / "corpus.jsonl", tmp_path / "index", entities=["titles", d / "cities1.txt"], log=quiet)
    build_mention_index(tmp_path / "index", d / "enc", tmp_path / "mentions", EmbedConfig(precision="fp32"), log=quiet)
    r = DrKITRetriever.load(tmp_path / "index", d / "run", tmp_path / "mentions", precision="fp32", answers=False,
                            fill=False)
    qs = [q["question"] for q in questions]
    got = r.retrieve(qs, 60)
    with torch.no_grad():
        out = r.model(qs, linked_entity_set(r.linker.link(qs)), r.vkb, precision="fp32", named=r.linker.link(qs).named())
    index, graph = r.vkb.index, r.vkb.graph
    mention_passage = np.asarray(index.mentions[:, 1], dtype=np.int64)
    article_of = np.asarray(index.passage_article, dtype=np.int64)
    vectors = graph.rows_as(np.arange(index.n_mentions), torch.float32).double().numpy()
    titles, temperature = index.article_titles, r.model.follow_config.temperature
    z_star = {b: dict(zip(*[x.tolist() for x in out.z_star.row(b)])) for b in range(len(qs))}
    from drkit.reason.passages import passage_relevance

    relevance = passage_relevance(out, r.vkb, r.pages, temperature, [out.z_star.top(r.entities)[0][b] for b in range(len(qs))])
    checked = 0
    for b, res in enumerate(got):
        pages = {}
        for a, s, e in zip(res.articles, res.scores, res.entities):
            pages.setdefault(e, []).append((a, s))
        for e, listed in pages.items():
            page = [a for a in range(len(titles)) if index.article_entity[a] == e]
            if len(page) < 2:
                continue
            ref = {}
            for a in page:  # the reference: every hop's query against every mention of the passage
                ms = np.flatnonzero(article_of[mention_passage] == a)
                ref[a] = max(np.log(float(out.pi[b, t])) + float(vectors[m] @ q[b].double().numpy()) / temperature
                             for t, q in enumerate(out.queries) for m in ms)
                assert relevance[b][a] == pytest.approx(ref[a], abs=1e-4)
            shares = np.exp(np.array([ref[a] for a in page]) - max(ref.values()))
            shares /= shares.sum()
            for a, s in listed:
                assert s == pytest.approx(z_star[b][e] * shares[page.index(a)], rel=1e-4, abs=1e-6)
            order = [a for a, _ in listed]
            assert order == sorted(order, key=lambda a: -ref[a])
            checked += 1
    assert checked >= 8  # directors' pages were reached and ordered


def test_another_corpus_without_its_mentions_says_how_to_give_them(mixing_run, capsys):
    from drkit import DrKIT
    from drkit.errors import ArtifactError

    d = mixing_run
    with pytest.raises(ArtifactError, match=r"another sparse index .*drkit embed --index .*index2.*--mentions DIR"):
        DrKIT.load(d / "index2", d / "run")
    assert main(["ask", "--index", str(d / "index2"), "--model", str(d / "run"), "Who directed it?"]) != 0
    assert "mentions=DIR" in capsys.readouterr().err


def test_the_front_door_loads_a_hop_mixing_model_and_retrieves_typed_passages(mixing_run):
    """DrKIT.load takes a hop-mixing training run: retrieve / retrieve_batch give the retriever's ranking as
    typed passages with the corpus text, the same alone and in a batch; answer gives pi, the chain from Z_0
    and the retriever's entity answers; a question that names no entity gets its own QuestionError."""
    from drkit import DrKIT
    from drkit.errors import QuestionError
    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.qa.pipeline import HOP_MIXING
    from drkit.qa.results import Passage

    d = mixing_run
    kit = DrKIT.load(d / "index1", d / "run")
    assert kit.kind == HOP_MIXING and kit.max_hops == 2
    rows = {json.loads(line)["id"]: json.loads(line) for line in (d / "corpus1.jsonl").read_text().splitlines()}
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()][:12]
    reference = DrKITRetriever.load(d / "index1", d / "run").retrieve(questions, 6)
    batch = kit.retrieve_batch(questions, 6)
    for q, want, got in zip(questions, reference, batch):
        assert all(isinstance(p, Passage) for p in got)
        assert [p.article for p in got] == want.articles[:6]
        assert [p.score for p in got] == pytest.approx(want.scores[:6])
        assert all(p.text == rows[p.id]["text"] and p.title == rows[p.id]["title"] for p in got)
        assert all(p.hop in (0, 1, 2) and p.entity == p.title for p in got if p.reached)
        alone = kit.retrieve(q, 6)  # fp32 scores alone and in a batch: equal up to the last bits (test_pipeline)
        assert [p.id for p in alone] == [p.id for p in got]
        assert [p.score for p in alone] == pytest.approx([p.score for p in got], rel=1e-5)
    result = kit.answer(questions[1], top=3, chain_top=2, passages=4)
    want = DrKITRetriever.load(d / "index1", d / "run").retrieve([questions[1]], 4)[0]
    assert result.pi == pytest.approx(tuple(want.pi)) and [h.hop for h in result.chain] == [0, 1, 2]
    assert [a.entity_id for a in result.answers] == [e for e, _ in want.answers[:3]]
    assert [p.article for p in result.passages] == want.articles[:4]
    as_json = json.loads(json.dumps(result.to_dict()))  # JSON-ready
    assert [p["id"] for p in as_json["passages"]] == [p.id for p in result.passages] and "text" not in as_json["passages"][0]
    with pytest.raises(QuestionError, match="no entity of the index"):
        kit.answer("???")
    with pytest.raises(QuestionError, match="empty"):
        kit.retrieve("  ")
    with pytest.raises(ConfigError, match="hops"):
        from drkit.qa.pipeline import QueryConfig

        kit.answer(questions[0], query=QueryConfig(hops=1))


def test_controls_single_step_and_ppr_match_literal_references(mixing_run):
    """The single-step control ranks passages by the cosine of the pretrained query transformer's mean-pooled
    embeddings (each text embedded alone says the same); personalised PageRank equals the linear solve of
    its fixed point and ranks the pages of the best entities."""
    import scipy.sparse as sp
    import torch

    from drkit.dense.encoder import DualEncoder
    from drkit.index.sparse import SparseIndex
    from drkit.qa.controls import PPRRetriever, SingleStepRetriever
    from drkit.qa.peers import article_texts

    d = mixing_run
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()][:6]
    single = SingleStepRetriever.load(d / "index1", d / "enc", precision="fp32")
    index = SparseIndex.load(d / "index1")
    dual = DualEncoder.load(d / "enc" / "encoder")
    assert all(torch.equal(a, b) for a, b in zip(single.model.state_dict().values(), dual.query_model.state_dict().values()))
    texts = article_texts(index)
    passages = np.stack([single.embed([t])[0] for t in texts])
    # the passages were encoded in one-length batches, unpadded: each vector is its text's embedded alone
    assert single.vectors.numpy() == pytest.approx(passages, abs=1e-5)
    from drkit.qa.peers import DenseRetriever

    small = DenseRetriever(texts, max_pieces=12, batch_tokens=40, precision="fp32", model=dual.query_model,
                           tokenizer=dual.tokenizer)  # many batches, most texts cut at 12 pieces
    assert small.vectors.numpy() == pytest.approx(np.stack([small.embed([t])[0] for t in texts]), abs=1e-5)
    assert not np.allclose(small.vectors.numpy(), passages, atol=1e-3)  # the cut changed them
    for q, r in zip(questions, single.retrieve(questions, 5)):
        scores = passages @ single.embed([q])[0]
        want = np.sort(scores)[::-1][:5]
        assert r.scores == pytest.approx(want.tolist(), abs=1e-4)
        assert all(scores[a] == pytest.approx(s, abs=1e-4) for a, s in zip(r.articles, r.scores))

    ppr = PPRRetriever.load(d / "index1")
    n = index.n_entities
    rng = np.random.default_rng(0)
    seeds = np.zeros(n)
    seeds[rng.choice(n, 3, replace=False)] = [0.5, 0.3, 0.2]
    p = ppr.pagerank(seeds)
    # the fixed point p = (1 - d) s + d (P^T p + (dangling . p) s), solved directly
    m = ppr.transition_t.toarray() + np.outer(seeds, ppr.dangling.astype(float))
    exact = np.linalg.solve(np.eye(n) - 0.5 * m, 0.5 * seeds)
    assert p == pytest.approx(exact, abs=1e-10) and p.sum() == pytest.approx(1.0)
    assert sp.issparse(ppr.transition_t)
    linked = ppr.linker.link(questions)
    for b, r in enumerate(ppr.retrieve(questions, 5)):
        ids, weights = linked.row(b)
        s = np.zeros(n)
        np.add.at(s, ids, weights)
        pr = ppr.pagerank(s)
        assert r.scores == sorted(r.scores, reverse=True) and len(r.articles) == 5
        for a, score in zip(r.articles, r.scores):  # each passage carries its title entity's PageRank
            assert score == pytest.approx(pr[index.article_entity[a]])


def test_a_tree_of_runs_moved_elsewhere_loads_its_own_mentions_and_encoder(mixing_run, tmp_path, monkeypatch, capsys):
    """A model records its mention index, and a mention index its encoder, as absolute paths and as paths from
    their own folders: the tree moved as a whole (the absolute paths gone) loads the moved mention index, answers
    as before, and trains again from it; with the mention index gone from both places, an error names them."""
    import shutil
    from pathlib import Path

    from drkit import DrKIT
    from drkit.reason.model import ModelConfig
    from drkit.reason.train_mixing import MixTrainConfig, train_mixing

    d, orig = mixing_run, tmp_path / "orig"
    for name in ("index1", "mentions1", "enc", "run"):
        shutil.copytree(d / name, orig / name)
    model_manifest = orig / "run" / "model" / "manifest.json"
    record = json.loads(model_manifest.read_text())
    assert record["mentions"]["path"] == str((d / "mentions1").resolve()) and record["mentions"]["from_model"] == "../../mentions1"
    record["mentions"]["path"] = str(orig / "mentions1")  # the copy as if trained where it lies
    model_manifest.write_text(json.dumps(record))
    mentions_manifest = orig / "mentions1" / "manifest.json"
    m = json.loads(mentions_manifest.read_text())
    assert m["encoder"]["from_mentions"] == "../enc/encoder"
    m["encoder"]["path"] = str(orig / "enc" / "encoder")
    mentions_manifest.write_text(json.dumps(m))
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()][:6]
    want = [[p.id for p in r] for r in DrKIT.load(d / "index1", d / "run").retrieve_batch(questions, 5)]

    moved = tmp_path / "moved"
    shutil.move(orig, moved)
    monkeypatch.chdir(tmp_path)
    kit = DrKIT.load(moved / "index1", moved / "run")
    assert Path(kit.vkb.mentions.path).resolve() == (moved / "mentions1").resolve()
    assert [[p.id for p in r] for r in kit.retrieve_batch(questions, 5)] == want
    train_mixing(moved / "index1", moved / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", moved / "run2",
                 model_config=ModelConfig(shared_layers=1, hop_layers=1),
                 config=MixTrainConfig(steps=1, batch_size=4, eval_every=1, precision="fp32"), log=lambda *a: None)

    shutil.rmtree(moved / "mentions1")
    with pytest.raises(ConfigError, match=f"not at '{orig / 'mentions1'}' nor at '{moved / 'run' / 'model' / '../../mentions1'}'"):
        DrKIT.load(moved / "index1", moved / "run")
    assert main(["retrieve", "--index", str(moved / "index1"), "--model", str(moved / "run"),
                 "--questions", str(d / "questions1.jsonl"), "--out", str(tmp_path / "out")]) != 0
    err = capsys.readouterr().err
    assert "pass the mentions directory (--mentions)" in err and "Traceback" not in err


def test_more_kb_trains_on_its_chained_facts_questions_and_is_part_of_the_runs_settings(mixing_run, tmp_path):
    """--more-kb: the run writes the chained facts' questions (those `chain_questions` gives) to kb-chains.jsonl and
    trains on them beside --train's; the KB's checksum is a setting, so another KB is refused, and a run made
    without one resumes without one."""
    from drkit.data.kb import read_kb
    from drkit.index.sparse import SparseIndex
    from drkit.reason.kb_chains import chain_questions
    from drkit.reason.model import ModelConfig
    from drkit.reason.train_mixing import MixTrainConfig, train_mixing

    d = mixing_run
    rows = [json.loads(line) for line in (d / "corpus1.jsonl").read_text().splitlines()]
    director = {}
    for r in rows:
        if " film directed by " in r["text"]:
            director[r["title"]] = r["text"].split(" film directed by ")[1].rstrip(".")
    born = {r["title"]: r["text"].split(" born in ")[1].rstrip(".") for r in rows if " born in " in r["text"]}
    kb = tmp_path / "kb.txt"
    kb.write_text("".join(f"{f}|director|{p}\n" for f, p in director.items())
                  + "".join(f"{p}|place of birth|{c}\n" for p, c in born.items()), encoding="utf-8")
    lines = []
    kw = dict(model_config=ModelConfig(shared_layers=1, hop_layers=1), log=lines.append,
              config=MixTrainConfig(steps=2, batch_size=4, eval_every=2, precision="fp32", more_kb_chains=5))
    run = tmp_path / "run"
    train_mixing(d / "index1", d / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", run, more_kb=kb, **kw)
    index = SparseIndex.load(d / "index1")
    written = [json.loads(line) for line in (run / "kb-chains.jsonl").read_text().splitlines()]
    assert written == chain_questions(read_kb(kb), index.article_titles, index.article_keys, 5, 0) and len(written) == 5
    assert all(q["question"].startswith("What is the place of birth of the director of ") for q in written)
    assert any("5 two-hop questions of" in line for line in lines)
    assert any(f"training questions: {32 + 5} of {32 + 5}" in line for line in lines)
    assert json.loads((run / "run.json").read_text())["more_kb"]["sha256"]
    other = tmp_path / "kb2.txt"
    other.write_text(kb.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="more_kb"):
        train_mixing(d / "index1", d / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", run, more_kb=other, **kw)
    with pytest.raises(ConfigError, match="--more-kb.*not a file"):
        train_mixing(d / "index1", d / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", tmp_path / "none",
                     more_kb=tmp_path / "missing.txt", **kw)
    plain = tmp_path / "plain"
    train_mixing(d / "index1", d / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", plain, **kw)
    assert not (plain / "kb-chains.jsonl").exists() and "more_kb" not in json.loads((plain / "run.json").read_text())
    assert train_mixing(d / "index1", d / "mentions1", d / "questions1.jsonl", d / "questions1.jsonl", plain, **kw) \
        == plain / "model"


def _director_questions(d):
    """The mixing run's model and VirtualKB on index1, a question about each director's films, and their linked Z_0."""
    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reason.train_mixing import linked_entity_set

    r = DrKITRetriever.load(d / "index1", d / "run")
    rows = [json.loads(line) for line in (d / "corpus1.jsonl").read_text().splitlines()]
    questions = [f"Which films did {row['title']} direct?" for row in rows if "-d" in row["id"]]
    return r.model, r.vkb, questions, linked_entity_set(r.linker.link(questions))


def test_answer_from_pages_starts_the_answer_head_from_z1_over_the_pages(mixing_run, tmp_path):
    """With answer_from_pages the answer head follows from Z_1 restricted to the entities with a page and
    renormalised (a hand-made copy of Z_1 here), not from all of Z_1; on index1 (cities without a page) that
    changes the answer, and the passages not at all. A model saved before the setting existed followed from all
    of Z_1, and loads so."""
    import dataclasses
    import shutil

    import torch

    from drkit.reason.entity_set import EntitySet
    from drkit.reason.mixing import HopMixingModel

    d = mixing_run
    model, vkb, questions, z0 = _director_questions(d)  # from a director, Z_1 reaches the city of their page too
    assert model.config.answer_from_pages  # the default
    with torch.no_grad():
        after = model(questions, z0, vkb, precision="fp32", answers=True)
        model.config = dataclasses.replace(model.config, answer_from_pages=False)
        before = model(questions, z0, vkb, precision="fp32", answers=True)
        z1 = before.z[1]
        pages = vkb.page_entities
        assert pages is not None and not pages[z1.ids.numpy()].all()  # Z_1 holds entities without a page
        keep = pages[z1.ids.numpy()]
        rows, ids, probs = z1.rows.numpy()[keep], z1.ids.numpy()[keep], z1.probs.numpy()[keep]
        sums = np.zeros(z1.batch_size)
        np.add.at(sums, rows, probs)
        start = EntitySet(torch.from_numpy(rows), torch.from_numpy(ids), torch.from_numpy(probs / sums[rows]), z1.batch_size)
        reference = model._hop(before.encoded[0], model.config.hops, start, vkb, model.follow_config, None, False)[0]
    assert torch.equal(after.z_star.ids, before.z_star.ids) and torch.equal(after.z_star.probs, before.z_star.probs)
    assert torch.equal(after.z_answer.rows, reference.rows) and torch.equal(after.z_answer.ids, reference.ids)
    torch.testing.assert_close(after.z_answer.probs, reference.probs)
    assert not (torch.equal(after.z_answer.ids, before.z_answer.ids)
                and torch.allclose(after.z_answer.probs, before.z_answer.probs))
    old = tmp_path / "old"
    shutil.copytree(d / "run" / "model", old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["mix"]["answer_from_pages"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert HopMixingModel.load(old).config.answer_from_pages is False


def test_answer_adjacency_gives_the_answer_head_its_own_a(mixing_run):
    """With answer_adjacency "page" the answer head's follow expands Z_1 (over the pages) by the page A, as a
    follow called with that A does; the passages (Z*) do not change, and on index1 the answer does."""
    import dataclasses

    import torch

    from drkit.reason.mixing import pages_or_all

    model, vkb, questions, z0 = _director_questions(mixing_run)
    assert model.config.answer_adjacency is None  # the default: the follow's A
    with torch.no_grad():
        before = model(questions, z0, vkb, precision="fp32", answers=True)
        model.config = dataclasses.replace(model.config, answer_adjacency="page")
        after = model(questions, z0, vkb, precision="fp32", answers=True)
        start = pages_or_all(before.z[1], vkb.page_entities)
        fc = dataclasses.replace(model.follow_config, adjacency="page")
        reference = model._hop(before.encoded[0], model.config.hops, start, vkb, fc, None, False)[0]
    assert torch.equal(after.z_star.ids, before.z_star.ids) and torch.equal(after.z_star.probs, before.z_star.probs)
    assert torch.equal(after.z_answer.ids, reference.ids) and torch.equal(after.z_answer.rows, reference.rows)
    torch.testing.assert_close(after.z_answer.probs, reference.probs)
    assert not (torch.equal(after.z_answer.ids, before.z_answer.ids)
                and torch.allclose(after.z_answer.probs, before.z_answer.probs))
