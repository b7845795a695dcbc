"""The DrKIT model on a synthetic film corpus: initialisation, persistence, end-to-end training that
beats chance, evaluation bookkeeping, and `ask` / `evaluate` on bad input."""

import dataclasses
import json
import shutil

import numpy as np
import pytest
import torch

from drkit.cli import main
from drkit.data.questions import load_questions
from drkit.dense.encoder import DualEncoder, EncoderConfig
from drkit.dense.mentions import EmbedConfig, build_mention_index
from drkit.dense.pretrain import PretrainConfig, pretrain
from drkit.errors import ConfigError
from drkit.index.sparse import SparseConfig
from drkit.qa.evaluate import evaluate
from drkit.qa.pipeline import DrKIT
from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import FollowConfig
from drkit.reason.model import ModelConfig, MultiHopModel
from drkit.reason.train import TrainConfig, answer_set_loss, train
from drkit.reason.vkb import QuestionError, VirtualKB

FIRST = ["Anna", "Boris", "Clara", "Dmitri", "Elena", "Felix", "Greta", "Hugo", "Irene", "Jonas", "Karla", "Lukas"]
LAST = ["Abbott", "Brennan", "Castillo", "Dorsey", "Eckhart", "Fairbanks", "Galloway", "Hartmann"]
ADJ = ["Silver", "Hidden", "Broken", "Crimson", "Silent", "Golden", "Frozen", "Wild", "Lonely", "Burning"]
NOUN = ["River", "Garden", "Harbor", "Mountain", "Letter", "Empire", "Window", "Canyon"]


def synthetic_films(n_films=48, seed=0):
    """Films with a director, two actors and a year, each stated in one short article."""
    rng = np.random.default_rng(seed)
    people = [f"{f} {l}" for f in FIRST for l in LAST]
    rng.shuffle(people)
    directors, actors = people[:10], people[10:40]
    titles = [f"The {a} {n}" for a in ADJ for n in NOUN]
    rng.shuffle(titles)
    films = []
    for i in range(n_films):
        films.append({"title": titles[i], "director": directors[rng.integers(len(directors))],
                      "actors": list(rng.choice(actors, 2, replace=False)), "year": str(1950 + int(rng.integers(60)))})
    return films


def write_synthetic(d, films):
    articles, kb = [], []
    for i, f in enumerate(films):
        a1, a2 = f["actors"]
        if i % 2:
            body = [f"{f['title']} is a {f['year']} drama directed by {f['director']}.", f"It stars {a1} and {a2}."]
        else:
            body = [f"{f['title']} was released in {f['year']}.", f"{a1} and {a2} star in it, and {f['director']} directed it."]
        articles.append("\n".join(f"{n} {line}" for n, line in enumerate([f["title"]] + body, 1)))
        kb += [f"{f['title']}|directed_by|{f['director']}", f"{f['title']}|starred_actors|{a1}",
               f"{f['title']}|starred_actors|{a2}", f"{f['title']}|release_year|{f['year']}"]
    (d / "wiki.txt").write_text("\n\n".join(articles) + "\n", encoding="utf-8")
    (d / "kb.txt").write_text("\n".join(kb) + "\n", encoding="utf-8")


def write_questions(path, films, kinds=("director", "year")):
    lines = []
    for f in films:
        if "director" in kinds:
            lines.append(f"who directed [{f['title']}]\t{f['director']}")
        if "year" in kinds:
            lines.append(f"when was [{f['title']}] released\t{f['year']}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def films_kb(tmp_path_factory, tiny_base):
    """Index, untrained tiny encoder and its mention index over 48 synthetic films; questions split by film."""
    from drkit.index.build import build_index

    d = tmp_path_factory.mktemp("films")
    films = synthetic_films()
    write_synthetic(d, films)
    # mu = 1: each entity expands to its best-matching article only (in 48 tiny articles, every name shares
    # some n-gram with most of them, so a larger mu would make A no constraint at all)
    build_index(d / "wiki.txt", d / "index", kb=d / "kb.txt", sparse_config=SparseConfig(mu=1), log=lambda *a: None)
    pretrain(d / "index", d / "kb.txt", d / "enc", PretrainConfig(steps=0, precision="fp32"),
             EncoderConfig(base=str(tiny_base), dim=32), log=lambda *a: None)
    build_mention_index(d / "index", d / "enc", d / "mentions", EmbedConfig(precision="fp32"), log=lambda *a: None)
    write_questions(d / "train.txt", films[:36])
    write_questions(d / "dev.txt", films[36:])
    return d, films


SMALL = ModelConfig(shared_layers=1, hop_layers=1)


def test_question_encoder_starts_as_the_pretrained_query_encoder(films_kb):
    d, _ = films_kb
    enc = DualEncoder.load(d / "enc" / "encoder")
    model = MultiHopModel.from_encoder(enc, ModelConfig(hops=2, shared_layers=1, hop_layers=1)).eval()
    assert model.random_init == []
    texts = ["who directed [The Silver River]", "when was it released"]
    ids, mask = model.tokenize(texts)
    with torch.no_grad():
        h = model.encoder.encode(ids, mask)
        for t in range(2):
            g = model.encoder.hop_query(h, mask, t, torch.ones(2, 32))  # U_t starts at zero
            np.testing.assert_allclose(g.numpy(), enc.embed_queries(texts, precision="fp32"), rtol=1e-5, atol=1e-6)


def test_model_save_load_round_trip(films_kb, tmp_path):
    d, _ = films_kb
    vkb = VirtualKB.load(d / "index", d / "mentions")
    model = MultiHopModel.from_encoder(DualEncoder.load(d / "enc" / "encoder"), ModelConfig(hops=2, **{"shared_layers": 1, "hop_layers": 1}),
                               FollowConfig(top_k=50, temperature=2.0))
    with torch.no_grad():
        for p in model.encoder.entity.parameters():
            p.normal_()  # make the entity term matter
    model.set_entities(vkb.entity_names)
    model.save(tmp_path / "m")
    loaded = MultiHopModel.load(tmp_path / "m")
    loaded.set_entities(vkb.entity_names)
    assert loaded.follow_config == model.follow_config and loaded.config == model.config
    topic = np.array([vkb.index.entities.lookup("The Silver River") or 0, 1])
    with torch.no_grad():
        a = model.eval()(["who directed The Silver River", "which films"], topic, vkb, precision="fp32")
        b = loaded(["who directed The Silver River", "which films"], topic, vkb, precision="fp32")
    for x, y in zip(a, b):
        assert torch.equal(x.z.ids, y.z.ids)
        torch.testing.assert_close(x.z.probs, y.z.probs)


def test_warm_start_copies_each_hop_from_a_trained_model(films_kb, tmp_path):
    """--init: a 3-hop model from a 2-hop one starts with hop 1 <- hop 1, hops 2 and 3 <- hop 2."""
    d, _ = films_kb
    enc = DualEncoder.load(d / "enc" / "encoder")
    shape = {"shared_layers": 1, "hop_layers": 1}
    source = MultiHopModel.from_encoder(enc, ModelConfig(hops=2, **shape))
    torch.manual_seed(3)
    with torch.no_grad():
        for p in source.parameters():
            p.add_(0.05 * torch.randn_like(p))  # every hop different from the pretrained encoder and each other
        source.tfidf_power.copy_(torch.tensor([3.0, 5.0]))
    model = MultiHopModel.from_encoder(enc, ModelConfig(hops=3, **shape))
    model.eval(), source.eval()
    assert model.init_from_model(source) == ["hop 1 <- hop 1", "hop 2 <- hop 2", "hop 3 <- hop 2"]
    assert model.tfidf_power.tolist() == [3.0, 5.0, 5.0]
    texts = ["who directed [The Silver River]"]
    ids, mask = model.tokenize(texts)
    z_emb = torch.randn(1, 32)
    with torch.no_grad():
        h, h_src = model.encoder.encode(ids, mask), source.encoder.encode(ids, mask)
        torch.testing.assert_close(h, h_src)
        for t, s in ((0, 0), (1, 1), (2, 1)):
            torch.testing.assert_close(model.encoder.hop_query(h, mask, t, z_emb),
                                       source.encoder.hop_query(h_src, mask, s, z_emb))
        assert not torch.allclose(model.encoder.hop_query(h, mask, 0, z_emb), model.encoder.hop_query(h, mask, 1, z_emb))
    with pytest.raises(Exception, match="another shape"):
        MultiHopModel.from_encoder(enc, ModelConfig(hops=1, shared_layers=0, hop_layers=1)).init_from_model(source)


def test_training_from_init(films_kb, tmp_path):
    """`train(init=...)` starts from the given run's model; its first dev score is that model's."""
    d, _ = films_kb
    cfg = TrainConfig(steps=4, batch_size=8, warmup=0.0, eval_every=2, dev_sample=0, checkpoint_every=2, precision="fp32")
    first = train(d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "one", model_config=SMALL,
                  config=dataclasses.replace(cfg, lr=1e-3, head_lr=1e-2), log=lambda *a: None)
    lines = []
    train(d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "two", config=cfg,
          model_config=dataclasses.replace(SMALL, hops=2), init=tmp_path / "one", log=lines.append)
    assert any("hop 2 <- hop 1" in line for line in lines)
    assert json.loads((tmp_path / "two" / "run.json").read_text())["init"] == str(first)
    with pytest.raises(Exception, match="not a DrKIT model"):
        train(d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "three", config=cfg,
              model_config=SMALL, init=tmp_path / "nowhere", log=lambda *a: None)


def test_answer_set_loss_matches_reference():
    z = EntitySet(torch.tensor([0, 0, 0, 1, 1, 2]), torch.tensor([1, 2, 5, 0, 3, 4]),
                  torch.tensor([0.5, 0.3, 0.2, 0.9, 0.1, 1.0]), 3)
    z.logits = torch.log(z.probs)
    loss, reachable = answer_set_loss(z, [np.array([2, 5]), np.array([7]), np.array([4, 9])], 10)
    assert reachable.tolist() == [True, False, True]
    assert np.isclose(loss.item(), -(np.log(0.5) + np.log(1.0)) / 2)
    none, reachable = answer_set_loss(z, [np.array([9]), np.array([9]), np.array([9])], 10)
    assert none is None and not reachable.any()


def _chance_hits(vkb, items):
    """Expected Hits@1 of picking uniformly among the entities co-occurring with the question entity."""
    idx = vkb.index
    total = 0.0
    for it in items:
        row = idx.A_indices[idx.A_indptr[it.topic] : idx.A_indptr[it.topic + 1]]
        cands = set(idx.mention_entity[row].tolist()) - {it.topic}
        total += len(cands & set(it.answer_ids.tolist())) / max(1, len(cands))
    return total / len(items)


def test_end_to_end_training_beats_chance(films_kb, tmp_path):
    d, _ = films_kb
    cfg = TrainConfig(steps=60, batch_size=16, lr=1e-3, head_lr=1e-2, warmup=0.0, eval_every=30, dev_sample=0,
                      checkpoint_every=30, precision="fp32")
    train(d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "run", model_config=SMALL,
          follow_config=FollowConfig(top_k=200, temperature=1.0), config=cfg, log=lambda *a: None)
    model = MultiHopModel.load(tmp_path / "run" / "model")
    vkb = VirtualKB.load(d / "index", d / "mentions")
    metrics = evaluate(DrKIT(model, vkb), d / "dev.txt", tmp_path / "eval", qps_sample=0, log=lambda *a: None)
    chance = _chance_hits(vkb, load_questions(d / "dev.txt", vkb.index.entities))
    dev = [json.loads(line) for line in (tmp_path / "run" / "dev_log.jsonl").read_text().splitlines()]
    assert metrics["hits@1"] >= chance + 0.3, (metrics["hits@1"], chance, dev)
    assert metrics["hits@1"] > dev[0]["hits@1"] + 0.2  # better than the untrained start
    assert (tmp_path / "run" / "curve.png").stat().st_size > 0


def test_evaluate_accounts_for_every_line(films_kb, tmp_path):
    d, films = films_kb
    t0, t1, t2 = films[0]["title"], films[1]["title"], films[2]["title"]
    f = tmp_path / "q.txt"
    f.write_text(f"who directed [{t0}]\t{films[0]['director']}\n"           # 1 scored
                 "this line has no tab\n"                                     # 2 malformed
                 "\n"                                                         # 3 blank: not a question
                 "who directed [No Such Film]\tSomebody\n"                   # 4 unknown question entity
                 f"when was [{t1}] released\t{films[1]['year']}|1066\n"      # 5 scored; 1066 is not an entity
                 f"who directed {t2}\t{films[2]['director']}\n"              # 6 plain, linked: scored
                 "what is the meaning of life\tforty-two\n"                  # 7 plain, naming no entity
                 f"did [{t0}] star [{films[0]['actors'][0]}]\tyes\n"         # 8 two brackets: malformed
                 "who directed []\tNobody\n", encoding="utf-8")              # 9 empty brackets: malformed
    vkb = VirtualKB.load(d / "index", d / "mentions")
    model = MultiHopModel.from_encoder(DualEncoder.load(d / "enc" / "encoder"), SMALL)
    model.set_entities(vkb.entity_names)
    metrics = evaluate(DrKIT(model, vkb), f, tmp_path / "out", qps_sample=2, log=lambda *a: None)
    assert metrics["lines"] == 8 and metrics["scored"] == 3
    assert metrics["not_scored"] == {"malformed_line": 3, "unknown_question_entity": 1, "unlinked_question_entity": 1}
    assert metrics["answers_not_entities"] == 1 and metrics["no_answer_is_an_entity"] == 0
    preds = [json.loads(line) for line in (tmp_path / "out" / "predictions.jsonl").read_text().splitlines()]
    assert [p["line"] for p in preds] == [1, 2, 4, 5, 6, 7, 8, 9]
    assert [("predictions" in p, p.get("question_entity"), p.get("found_by")) for p in preds] == [
        (True, t0, "bracketed"), (False, "", ""), (False, "No Such Film", "bracketed"), (True, t1, "bracketed"),
        (True, t2, "linked"), (False, "", ""), (False, "", ""), (False, "", "")]
    assert preds[4]["question"] == f"who directed {t2}"
    assert "q.txt:2" in preds[1]["not_scored"] and "No Such Film" in preds[2]["not_scored"]
    assert "q.txt:7" in preds[5]["not_scored"] and "no entity of the index is named" in preds[5]["not_scored"]
    assert "2 bracketed entities" in preds[6]["not_scored"] and "empty [topic entity]" in preds[7]["not_scored"]
    assert set(metrics["throughput"]) >= {"batch_64_questions_per_s", "batch_1_questions_per_s"}
    # Hits@1 over all 8 lines counts the 5 unscored ones as misses
    assert np.isclose(metrics["hits@1"], sum(p.get("hit@1", False) for p in preds) / 8)
    assert np.isclose(metrics["hits@1"] * 8, metrics["hits@1_scored"] * 3)


def test_question_entity_parsing(tiny_base, tmp_path):
    """Question entities on a hand-made index, each expected outcome written out. Mentions per entity:
    Kismet 2, William Dieterle 3, Marlene Dietrich 1, Juarez 2, The Devil and Daniel Webster 2."""
    from drkit.index.build import build_index

    (tmp_path / "wiki.txt").write_text(
        "1 Kismet\n2 Kismet is a 1944 film directed by William Dieterle.\n3 It stars Marlene Dietrich.\n\n"
        "1 Juarez\n2 Juarez is a 1939 film directed by William Dieterle.\n\n"
        "1 The Devil and Daniel Webster\n2 William Dieterle directed The Devil and Daniel Webster in 1941.\n",
        encoding="utf-8")
    (tmp_path / "kb.txt").write_text(
        "Kismet|directed_by|William Dieterle\nKismet|starred_actors|Marlene Dietrich\n"
        "Juarez|directed_by|William Dieterle\nThe Devil and Daniel Webster|directed_by|William Dieterle\n",
        encoding="utf-8")
    build_index(tmp_path / "wiki.txt", tmp_path / "index", kb=tmp_path / "kb.txt", log=lambda *a: None)
    pretrain(tmp_path / "index", tmp_path / "kb.txt", tmp_path / "enc", PretrainConfig(steps=0, precision="fp32"),
             EncoderConfig(base=str(tiny_base), dim=32), log=lambda *a: None)
    build_mention_index(tmp_path / "index", tmp_path / "enc", tmp_path / "mentions", EmbedConfig(precision="fp32"),
                        log=lambda *a: None)
    vkb = VirtualKB.load(tmp_path / "index", tmp_path / "mentions")
    assert vkb.entity_names == ["Kismet", "William Dieterle", "Marlene Dietrich", "Juarez", "The Devil and Daniel Webster"]
    assert vkb.entity_frequency.tolist() == [2, 3, 1, 2, 2]

    def parsed(question):
        p = vkb.parse(question)
        return p.text, vkb.entity_names[p.topic], p.topic_name, p.how

    # bracketed: the marked name, whatever else the question names; the display name of the entity
    assert parsed("who directed [Kismet]") == ("who directed Kismet", "Kismet", "Kismet", "bracketed")
    assert parsed("  who directed [ kismet ]? ") == ("who directed  kismet ?", "Kismet", "Kismet", "bracketed")
    assert parsed("which films did [William Dieterle] direct after Kismet") == (
        "which films did William Dieterle direct after Kismet", "William Dieterle", "William Dieterle", "bracketed")
    # plain: the only entity named, matched whole words and case-insensitively
    assert parsed("who directed Kismet") == ("who directed Kismet", "Kismet", "Kismet", "linked")
    assert parsed("which films did william dieterle direct") == (
        "which films did william dieterle direct", "William Dieterle", "William Dieterle", "linked")
    # plain, several entities: the least frequent one in the corpus
    assert parsed("William Dieterle directed Kismet, who starred in it") == (
        "William Dieterle directed Kismet, who starred in it", "Kismet", "Kismet",
        "linked (least frequent; also found ['William Dieterle'])")
    assert parsed("did Marlene Dietrich star in Kismet")[1] == "Marlene Dietrich"
    # a tie (Kismet 2, Juarez 2): the lower entity id
    assert parsed("Juarez or Kismet: which came first")[1:] == (
        "Kismet", "Kismet", "linked (least frequent; also found ['Juarez'])")
    # the longest name at a position
    assert parsed("who directed The Devil and Daniel Webster")[1] == "The Devil and Daniel Webster"
    for bad, message in (("   ", "the question is empty"),
                         ("who directed [Nothing Like This]", r"\[Nothing Like This\] is not an entity"),
                         ("who directed Kismets", "no entity of the index is named"),  # not a whole word
                         ("what is the meaning of life", "no entity of the index is named"),
                         ("[Kismet] and [Juarez]", "2 bracketed entities"),
                         ("who directed []", r"empty \[topic entity\]")):
        with pytest.raises(QuestionError, match=message):
            vkb.parse(bad)


def test_cli_train_evaluate_ask(films_kb, tmp_path, capsys):
    d, films = films_kb
    assert main(["train", "--index", str(d / "index"), "--mentions", str(d / "mentions"), "--train", str(d / "train.txt"),
                 "--dev", str(d / "dev.txt"), "--out", str(tmp_path / "run"), "--hops", "2", "--shared-layers", "1",
                 "--hop-layers", "1", "--steps", "3", "--batch-size", "4", "--precision", "fp32", "--top-k", "100"]) == 0
    run = tmp_path / "run"
    assert (run / "model" / "manifest.json").exists() and len((run / "train_log.jsonl").read_text().splitlines()) == 3
    assert main(["evaluate", "--index", str(d / "index"), "--model", str(run), "--questions", str(d / "dev.txt"),
                 "--out", str(tmp_path / "eval"), "--qps-sample", "0"]) == 0
    assert json.loads((tmp_path / "eval" / "metrics.json").read_text())["hops"] == 2
    assert main(["evaluate", "--index", str(d / "index"), "--model", str(run), "--questions", str(d / "dev.txt"),
                 "--out", str(tmp_path / "eval-global"), "--qps-sample", "0", "--retrieval", "global", "--top-k", "20"]) == 0
    follow_used = json.loads((tmp_path / "eval-global" / "metrics.json").read_text())["follow"]
    assert follow_used["retrieval"] == "global" and follow_used["top_k"] == 20
    assert main(["evaluate", "--index", str(d / "index"), "--model", str(run), "--questions", str(d / "dev.txt"),
                 "--out", str(tmp_path / "eval-exact"), "--qps-sample", "0", "--min-weight", "0"]) == 0
    assert json.loads((tmp_path / "eval-exact" / "metrics.json").read_text())["follow"]["min_weight"] == 0
    capsys.readouterr()
    title = films[0]["title"]
    assert main(["ask", "--index", str(d / "index"), "--model", str(run), f"who directed [{title}]"]) == 0
    out = capsys.readouterr().out
    assert "hop 1" in out and "hop 2" in out and "[[" in out
    assert main(["ask", "--index", str(d / "index"), "--model", str(run), "--json", "--hops", "1", f"who directed [{title}]"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["hops"] == 1 and result["chain"][0]["top"][0]["snippet"].count("[[") == 1
    assert main(["ask", "--index", str(d / "index"), "--model", str(run), "who directed [Nothing Like This]", ""]) == 2
    err = capsys.readouterr().err
    assert "[Nothing Like This] is not an entity" in err and "empty" in err
    assert main(["ask", "--index", str(d / "index"), "--model", str(run), "--hops", "3", f"who directed [{title}]"]) == 2
    assert "2 trained hops" in capsys.readouterr().err


def test_reproduce_pipeline_runs_and_resumes(films_kb, tmp_path):
    """The one-command pipeline on a MetaQA-shaped folder of the synthetic films (real encoder, tiny recipe)."""
    from drkit.experiments.metaqa import ABLATIONS, ReproduceConfig, reproduce_metaqa

    d, films = films_kb
    data = tmp_path / "data"
    for h in (1, 2):
        (data / f"{h}-hop/vanilla").mkdir(parents=True)
        write_questions(data / f"{h}-hop/vanilla/qa_train.txt", films[:36])
        write_questions(data / f"{h}-hop/vanilla/qa_dev.txt", films[36:])
    for f in ("wiki.txt", "kb.txt"):
        (data / f).write_text((d / f).read_text())
    out = tmp_path / "out"
    cfg = ReproduceConfig(hops=(1, 2), steps=2, pretrain_steps=0, k_sweep=(10, 100), sweep_questions=8, min_weight=0.005)
    results = reproduce_metaqa(data, out, cfg, log=lambda *a: None)
    manifest = json.loads((out / "train-drkit-2hop" / "model" / "manifest.json").read_text())
    assert manifest["follow"]["min_weight"] == 0.005 and results["min_weight"] == 0.005
    assert set(results["main"]) == {1, 2} and len(results["k_sweep"][2]) == 4
    assert {p["retrieval"] for p in results["k_sweep"][2]} == {"restricted", "global"}
    for f in ("results.md", "results.json", "figure3.png", "timings.json"):
        assert (out / f).stat().st_size > 0
    timings = json.loads((out / "timings.json").read_text())
    assert {"index", "pretrain", "embed", "train-drkit-1hop", "evaluate-drkit-2hop", "k-sweep-1hop"} <= set(timings)
    again = reproduce_metaqa(data, out, cfg, log=lambda *a: None)
    assert again["main"] == results["main"]
    assert json.loads((out / "timings.json").read_text()) == timings  # every step was found done
    assert json.loads((out / "train-drkit-2hop" / "run.json").read_text())["init"] == str(out / "train-drkit-1hop" / "model")
    assert "init" not in json.loads((out / "train-drkit-1hop" / "run.json").read_text())
    with pytest.raises(ConfigError, match="min_weight: 0.005 in the run, 0.001 asked"):  # a done run is not reused with other settings
        reproduce_metaqa(data, out, dataclasses.replace(cfg, min_weight=0.001), log=lambda *a: None)
    # the rows before issue 12 (the paper's variants are run in test_paper_variants, on the tiny encoder)
    rows = ("no_curriculum", "sum", "lambda1", "no_tfidf", "no_pretraining", "binary_A")
    abl = reproduce_metaqa(data, out, dataclasses.replace(cfg, ablations=True, ablation_steps=1, ablation_questions=10,
                                                          ablation_rows=rows), log=lambda *a: None)
    assert list(abl["ablations"]) == ["drkit", *rows] and set(rows) <= set(ABLATIONS)
    assert abl["ablation_setup"] == {"steps": 1, "questions": {1: 10, 2: 10}}
    for name, row in abl["ablations"].items():
        assert row[1]["questions"] == row[2]["questions"] == 10, name
        run = json.loads((out / f"train-{name}-1steps-2hop" / "run.json").read_text())
        assert ("init" in run) == (name != "no_curriculum"), name
    assert json.loads((out / "train-no_tfidf-1steps-2hop" / "run.json").read_text())["follow"]["tfidf"] is False
    assert (out / "mentions-untrained" / "manifest.json").exists()
    table = (out / "results.md").read_text()
    assert "Ablations (training steps: 1; scored on a seeded sample of 10 1-hop, 10 2-hop dev lines; " in table
    assert "| - sum over the mentions of an entity instead of max |" in table
    with pytest.raises(Exception, match="missing"):
        reproduce_metaqa(tmp_path / "nowhere", out, log=lambda *a: None)


def test_training_resumes_exactly(films_kb, tmp_path):
    """Interrupted after step 2 and run again, training ends with the same weights as an uninterrupted run."""
    from drkit.util.runs import checkpoints

    d, _ = films_kb
    # on the CPU: a GPU's atomic additions (index_add, sparse products) sum in no fixed order
    cfg = TrainConfig(steps=4, batch_size=8, eval_every=2, checkpoint_every=2, dev_sample=0, precision="fp32",
                      device="cpu")
    args = (d / "index", d / "mentions", d / "train.txt", d / "dev.txt")
    kw = dict(model_config=SMALL, follow_config=FollowConfig(top_k=50), config=cfg, log=lambda *a: None)
    from safetensors.torch import load_file

    train(*args, tmp_path / "a", **kw)
    train(*args, tmp_path / "b", **kw)
    b = tmp_path / "b"
    shutil.rmtree(checkpoints(b)[-1])  # step 4: as if killed after step 2's checkpoint
    (b / "done.json").unlink()
    messages = []
    train(*args, b, **{**kw, "log": messages.append})
    assert any("resuming" in m and "step 2" in m for m in messages)
    for f in ("checkpoints/step-4/model.safetensors", "model/model.safetensors"):
        sa, sb = load_file(str(tmp_path / "a" / f)), load_file(str(b / f))
        assert sa.keys() == sb.keys()
        for k in sa:
            torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0, msg=f"{f}: {k}")
    # checkpoints are safetensors and JSON: nothing on the resume path unpickles
    for f in (b / "checkpoints").rglob("*"):
        assert f.is_dir() or f.suffix in (".json", ".safetensors"), f
    steps = [json.loads(line)["step"] for line in (b / "train_log.jsonl").read_text().splitlines()]
    assert steps == [1, 2, 3, 4]  # the records written after the checkpoint were replaced, not duplicated
    with pytest.raises(ConfigError, match=r"other settings \(train.steps: 4 in the run, 5 asked\)"):
        train(*args, b, **{**kw, "config": dataclasses.replace(cfg, steps=5)})


def test_embed_streams_to_disk_and_resumes_after_an_interruption(films_kb, tmp_path, monkeypatch):
    """An embedding interrupted after some batches leaves its vectors and progress record in
    .OUT.partial/; run again, it embeds only the batches left, and the mention index equals an
    uninterrupted build's bit for bit. A partial made with other settings is started over."""
    import drkit.dense.embedding as embedding_module

    d, _ = films_kb
    monkeypatch.setattr(embedding_module, "CHECKPOINT_S", 0.0)  # a progress record after every batch
    config = EmbedConfig(precision="fp32", batch_tokens=64)  # many small batches
    whole = build_mention_index(d / "index", d / "enc", tmp_path / "whole", config, log=lambda *a: None)
    calls = {"n": 0}
    real = DualEncoder.embed_mentions

    def failing(self, *args, **kw):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt  # as Ctrl-C (or a kill) during the fourth batch
        return real(self, *args, **kw)

    monkeypatch.setattr(DualEncoder, "embed_mentions", failing)
    out = tmp_path / "mentions"
    with pytest.raises(KeyboardInterrupt):
        build_mention_index(d / "index", d / "enc", out, config, log=lambda *a: None)
    partial = tmp_path / ".mentions.partial"
    assert not out.exists() and json.loads((partial / "progress.json").read_text())["batches_done"] == 3

    monkeypatch.setattr(DualEncoder, "embed_mentions", real)
    counted = {"n": 0}

    def counting(self, *args, **kw):
        counted["n"] += 1
        return real(self, *args, **kw)

    monkeypatch.setattr(DualEncoder, "embed_mentions", counting)
    lines = []
    again = build_mention_index(d / "index", d / "enc", out, config, log=lines.append)
    assert any("resuming" in line for line in lines) and again.manifest["embedding"]["resumed_after_batches"] == 3
    n_batches = counted["n"] + 3
    assert np.array_equal(np.asarray(again.vectors), np.asarray(whole.vectors))
    assert not partial.exists()

    # a record whose vectors file is gone: the build starts over instead of trusting it
    calls["n"] = 0
    monkeypatch.setattr(DualEncoder, "embed_mentions", failing)
    with pytest.raises(KeyboardInterrupt):
        build_mention_index(d / "index", d / "enc", tmp_path / "m3", config, log=lambda *a: None)
    (tmp_path / ".m3.partial" / "mention_vectors.npy").unlink()
    monkeypatch.setattr(DualEncoder, "embed_mentions", real)
    lines = []
    third = build_mention_index(d / "index", d / "enc", tmp_path / "m3", config, log=lines.append)
    assert any("missing or unreadable" in line for line in lines)
    assert np.array_equal(np.asarray(third.vectors), np.asarray(whole.vectors))

    # a partial of other settings is not resumed
    calls["n"] = 0
    monkeypatch.setattr(DualEncoder, "embed_mentions", failing)
    with pytest.raises(KeyboardInterrupt):
        build_mention_index(d / "index", d / "enc", tmp_path / "m2", config, log=lambda *a: None)
    counted["n"] = 0
    monkeypatch.setattr(DualEncoder, "embed_mentions", counting)
    lines = []
    other = build_mention_index(d / "index", d / "enc", tmp_path / "m2", EmbedConfig(precision="fp32", batch_tokens=128),
                                log=lines.append)
    assert any("starting over" in line for line in lines) and "resumed_after_batches" not in other.manifest["embedding"]
    np.testing.assert_allclose(np.asarray(other.vectors, np.float32), np.asarray(whole.vectors, np.float32), atol=2e-2)
    assert n_batches > 3
