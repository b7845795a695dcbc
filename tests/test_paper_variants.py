"""The paper's variants as options (issue 12): each changes exactly what it says.

remove_topic every | last | never; query_heads pooled | paper; entity_condition learned | paper | none;
train_word_embeddings; question_entity bracketed | linked (train and evaluate); the ablation rows that
measure them and ``--ablation-rows``. Old manifests and run directories (bools, missing fields) load as
what they were."""

import dataclasses
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_model import SMALL, films_kb, write_questions  # noqa: F401  (films_kb is a fixture)

from drkit.cli import build_parser, config_from_args
from drkit.data.kb import EntityTable
from drkit.data.questions import load_questions, question_entity_counts
from drkit.dense.encoder import DualEncoder, mean_pool
from drkit.errors import ConfigError, QuestionError
from drkit.qa.evaluate import evaluate
from drkit.qa.pipeline import DrKIT
from drkit.reason.entity_set import EntitySet, entity_set_mean
from drkit.reason.follow import FollowConfig
from drkit.reason.model import ModelConfig, MultiHopModel
from drkit.reason.train import TrainConfig, _optimizer, train
from drkit.reason.vkb import VirtualKB

quiet = lambda *a: None  # noqa: E731


@pytest.fixture(scope="module")
def kb(films_kb):  # noqa: F811
    d, films = films_kb
    return d, films, VirtualKB.load(d / "index", d / "mentions"), DualEncoder.load(d / "enc" / "encoder")


def _model(enc, vkb, **kw):
    model = MultiHopModel.from_encoder(enc, ModelConfig(**{"shared_layers": 1, "hop_layers": 1, **kw})).eval()
    model.set_entities(vkb.entity_names)
    return model


def _in_row(z: EntitySet, b: int, entity: int) -> bool:
    return bool(((z.rows == b) & (z.ids == entity)).any())


# -- settings: modes, old values ------------------------------------------------------------------------------

def test_settings_modes_and_old_values():
    assert ModelConfig().entity_condition == "learned" and ModelConfig().query_heads == "pooled"
    assert ModelConfig(entity_condition=True).entity_condition == "learned"  # a bool of an old manifest
    assert ModelConfig(entity_condition=False).entity_condition == "none"
    assert FollowConfig(remove_topic=True).remove_topic == "every" and FollowConfig(remove_topic=False).remove_topic == "never"
    with pytest.raises(ConfigError, match="entity_condition must be one of"):
        ModelConfig(entity_condition="sometimes")
    with pytest.raises(ConfigError, match="query_heads must be one of"):
        ModelConfig(query_heads="three")
    with pytest.raises(ConfigError, match="hop_layers must be 2, got 1"):
        ModelConfig(query_heads="paper", hop_layers=1)
    with pytest.raises(ConfigError, match="question_entity must be one of"):
        TrainConfig(question_entity="guessed")
    args = build_parser().parse_args(["train", "--index", "i", "--mentions", "m", "--train", "t", "--dev", "d",
                                      "--out", "o", "--query-heads", "paper", "--entity-condition", "paper",
                                      "--train-word-embeddings", "--question-entity", "linked"])
    assert config_from_args(args, ModelConfig) == ModelConfig(query_heads="paper", entity_condition="paper",
                                                              train_word_embeddings=True)
    assert config_from_args(args, TrainConfig) == TrainConfig(question_entity="linked")


def test_old_manifest_loads_as_the_model_it_was(kb, tmp_path):
    d, films, vkb, enc = kb
    model = _model(enc, vkb, hops=2)
    with torch.no_grad():
        for p in model.encoder.entity.parameters():
            p.normal_()  # the entity term matters
    model.save(tmp_path / "m")
    manifest = json.loads((tmp_path / "m" / "manifest.json").read_text())
    for key in ("query_heads", "train_word_embeddings"):
        del manifest["model"][key]
    manifest["model"]["entity_condition"] = True
    manifest["follow"]["remove_topic"] = True
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    old = MultiHopModel.load(tmp_path / "m")
    assert old.config == model.config and old.follow_config.remove_topic == "every"
    old.set_entities(vkb.entity_names)
    topic = np.array([vkb.index.entities.lookup(films[0]["title"]), vkb.index.entities.lookup(films[1]["title"])])
    texts = ["who directed it", "who stars in it"]
    with torch.no_grad():
        a, b = model(texts, topic, vkb, precision="fp32"), old(texts, topic, vkb, precision="fp32")
    for x, y in zip(a, b):
        torch.testing.assert_close(x.query, y.query, rtol=0, atol=0)
    manifest["model"]["entity_condition"] = False
    (tmp_path / "m" / "manifest.json").write_text(json.dumps(manifest))
    assert MultiHopModel.load(tmp_path / "m").config.entity_condition == "none"


# -- remove_topic ---------------------------------------------------------------------------------------------

def test_remove_topic_drops_the_question_entity_at_exactly_its_hops(kb):
    """With self-loops every hop can reach the question entity again (its own mentions); each mode removes it
    from Z_t at exactly the hops it names, for the model's hop count and for fewer hops asked at question time."""
    d, films, vkb, enc = kb
    model = _model(enc, vkb, hops=3)
    topic = np.array([vkb.index.entities.lookup(f["title"]) for f in films[:3]])
    texts = [f"who directed {f['title']}" for f in films[:3]]
    expected = {"every": lambda t, hops: True, "last": lambda t, hops: t == hops - 1, "never": lambda t, hops: False}
    for mode, removed in expected.items():
        fc = FollowConfig(top_k=10000, min_weight=0.0, self_loops=True, remove_topic=mode)
        for hops in (3, 2):
            assert [model.removed_at(t, hops, topic, fc) is not None for t in range(hops)] == \
                [removed(t, hops) for t in range(hops)]
            with torch.no_grad():
                outs = model(texts, topic, vkb, hops=hops, follow_config=fc, precision="fp32")
            for t, out in enumerate(outs):
                for b in range(len(texts)):
                    assert _in_row(out.z, b, int(topic[b])) == (not removed(t, hops)), (mode, hops, t, b)


# -- query_heads ----------------------------------------------------------------------------------------------

def _reference_queries(enc, texts, layer_start, layer_end, pool):
    """The pretrained query encoder's start projection of layer `layer_start`'s output and its end projection
    of layer `layer_end`'s output, pooled by `pool`: computed from the encoder, not from the model's code."""
    batch = enc.query_batch(texts)
    with torch.no_grad():
        hs = enc.query_model(**batch, output_hidden_states=True).hidden_states  # hs[i]: after layer i

        def pooled(i):
            return hs[i][:, 0] if pool == "cls" else mean_pool(hs[i], batch["attention_mask"])

        return torch.cat([enc.query_start(pooled(layer_start)), enc.query_end(pooled(layer_end))], -1)


def test_query_heads_paper_takes_start_and_end_after_the_first_and_second_layer(kb):
    d, films, vkb, enc = kb
    texts = [f"who directed {films[0]['title']}", "when was it released"]
    half = enc.config.dim // 2
    for pool in ("mean", "cls"):
        pooled = MultiHopModel.from_encoder(enc, ModelConfig(hops=2, shared_layers=0, hop_layers=2, pool=pool)).eval()
        paper = MultiHopModel.from_encoder(enc, ModelConfig(hops=2, shared_layers=0, hop_layers=2, pool=pool,
                                                            query_heads="paper")).eval()
        assert paper.random_init == [] and pooled.random_init == []
        ids, mask = paper.tokenize(texts)
        with torch.no_grad():
            h = paper.encoder.encode(ids, mask)
            for t in range(2):
                g_paper = paper.encoder.hop_query(h, mask, t, None)  # (B, p)
                g_pooled = pooled.encoder.hop_query(h, mask, t, None)
                assert g_paper.shape == g_pooled.shape == (2, enc.config.dim)
                torch.testing.assert_close(g_paper, _reference_queries(enc, texts, 1, 2, pool), rtol=1e-5, atol=1e-6)
                torch.testing.assert_close(g_pooled, _reference_queries(enc, texts, 2, 2, pool), rtol=1e-5, atol=1e-6)
                # the end halves agree, the start halves do not: the start query comes from the first layer
                torch.testing.assert_close(g_paper[:, half:], g_pooled[:, half:], rtol=0, atol=0)
                assert not torch.allclose(g_paper[:, :half], g_pooled[:, :half], atol=1e-3)
    # with mean pooling the pooled heads start as the pretrained slot-filling query, the paper's end half too
    pretrained = torch.from_numpy(enc.embed_queries(texts, precision="fp32"))
    torch.testing.assert_close(_reference_queries(enc, texts, 2, 2, "mean"), pretrained, rtol=1e-5, atol=1e-6)


# -- entity_condition -----------------------------------------------------------------------------------------

def test_entity_condition_adds_what_each_mode_says(kb, tmp_path):
    d, films, vkb, enc = kb
    texts = ["who directed it", "who stars in it"]
    z = EntitySet.one_hot([vkb.index.entities.lookup(films[0]["title"]), vkb.index.entities.lookup(films[0]["director"])])
    p_pretrained = torch.cat([enc.query_start.weight, enc.query_end.weight], 0).T  # (hidden, p), fixed P
    for mode in ("learned", "paper", "none"):
        model = _model(enc, vkb, hops=2, entity_condition=mode)
        u = [torch.randn_like(lin.weight) for lin in model.encoder.entity]
        with torch.no_grad():
            for lin, w in zip(model.encoder.entity, u):
                lin.weight.copy_(w)  # U_t != 0: the learned term shows
            for lin in model.encoder.start:
                lin.weight.add_(0.1)  # as if trained: paper's P stays the pretrained projection
        x = model.entity_embedding(z)  # Z^T X: (B, hidden)
        ids, mask = model.tokenize(texts)
        with torch.no_grad():
            h = model.encoder.encode(ids, mask)
            for t in range(2):
                diff = model.encoder.hop_query(h, mask, t, x) - model.encoder.hop_query(h, mask, t, None)
                want = {"learned": x @ u[t].T, "paper": x @ p_pretrained, "none": torch.zeros_like(diff)}[mode]
                torch.testing.assert_close(diff, want, rtol=1e-4, atol=1e-5)
        assert ("encoder.entity_projection" in model.state_dict()) == (mode == "paper")
        assert "encoder.entity_projection" not in dict(model.named_parameters())
        assert [lin.weight.requires_grad for lin in model.encoder.entity] == [mode == "learned"] * 2
        model.save(tmp_path / mode)
        loaded = MultiHopModel.load(tmp_path / mode)
        assert loaded.config.entity_condition == mode
        if mode == "paper":
            torch.testing.assert_close(loaded.encoder.entity_projection, p_pretrained, rtol=0, atol=0)


def test_entity_table_from_current_word_embeddings_matches_the_table(kb):
    """With trained word embeddings Z^T X is recomputed from them: equal to the table computed now (values and
    the gradient in Z's probabilities), and following the word embeddings when they change, with autograd
    (training) and without (question time: the rows of Z's entities, computed when read)."""
    d, films, vkb, enc = kb
    model = _model(enc, vkb, train_word_embeddings=True)
    gen = torch.Generator().manual_seed(1)
    n = len(vkb.entity_names)
    rows = torch.tensor([0, 0, 0, 2, 2, 3])  # row 1 empty
    ids = torch.tensor([0, 5, n - 1, 3, 7, 5])
    probs = torch.rand(6, generator=gen).requires_grad_(True)
    z = EntitySet(rows, ids, probs, 4)
    got = model.entity_embedding(z)
    want = entity_set_mean(z, model.entity_table)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    r = torch.randn(got.shape, generator=gen)
    torch.testing.assert_close(torch.autograd.grad((got * r).sum(), probs)[0],
                               torch.autograd.grad((want * r).sum(), probs)[0], rtol=1e-5, atol=1e-6)
    assert got[1].abs().sum() == 0
    with torch.no_grad():
        model.encoder.embeddings.word_embeddings.weight.add_(torch.randn(
            model.encoder.embeddings.word_embeddings.weight.shape, generator=gen))
    with torch.no_grad():
        at_question_time = model.entity_embedding(z)
    training = model.entity_embedding(z)
    fresh = entity_set_mean(z, model.entity_table)  # the whole X, from the word embeddings as they are now
    assert not torch.allclose(fresh, want)
    torch.testing.assert_close(at_question_time, fresh, rtol=0, atol=0)
    torch.testing.assert_close(training, fresh, rtol=1e-5, atol=1e-5)
    # the rows of X read for Z's entities equal a slow mean over each name's pieces
    words = model.encoder.embeddings.word_embeddings.weight.detach()
    pieces = model.tokenizer(vkb.entity_names, add_special_tokens=False)["input_ids"]
    for e, row in zip(ids.tolist(), model.entity_rows(ids)):
        want_row = words[pieces[e]].float().mean(0) if pieces[e] else torch.zeros(words.shape[1])
        torch.testing.assert_close(row, want_row, rtol=1e-6, atol=1e-6)


def test_a_diffuse_entity_set_is_embedded_by_one_product_equal_to_the_rows(kb):
    """At question time a Z over many entities takes (Z^T N) W (one product) instead of gathering each entity's
    rows of W: the same Z^T X as the mean of each name's pieces, to float rounding."""
    from drkit.reason.model import DENSE_NAME_PIECES

    d, films, vkb, enc = kb
    model = _model(enc, vkb)
    n = len(vkb.entity_names)
    ids = torch.arange(n).repeat(4)
    z = EntitySet(torch.repeat_interleave(torch.tensor([0, 1, 0, 1]), n), ids, torch.rand(4 * n), 3)
    pieces = int((model.entity_piece_indptr[ids + 1] - model.entity_piece_indptr[ids]).sum())
    assert pieces * DENSE_NAME_PIECES > z.batch_size * model.encoder.embeddings.word_embeddings.weight.shape[0]
    with torch.no_grad():
        got = model.entity_embedding(z)
        few = model.entity_embedding(EntitySet(z.rows[:3], z.ids[:3], z.probs[:3], 3))  # a few: the rows' path
    torch.testing.assert_close(got, entity_set_mean(z, model.entity_table), rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(few, entity_set_mean(EntitySet(z.rows[:3], z.ids[:3], z.probs[:3], 3),
                                                    model.entity_table), rtol=0, atol=0)
    assert got[2].abs().sum() == 0


def test_which_parameters_get_a_gradient(kb):
    """U_t gets a gradient only when learned; the word embeddings only with train_word_embeddings, and then also
    at the pieces of the Z_0 entity's name that the question does not contain (through E). With the paper's
    heads the start query does not depend on a hop's second layer; with pooled heads it does."""
    d, films, vkb, enc = kb
    title = films[0]["title"]
    z = EntitySet.one_hot([vkb.index.entities.lookup(title)])
    text = ["who directed it"]

    def grads(part=slice(None), **kw):
        model = _model(enc, vkb, **kw)
        if kw.get("entity_condition", "learned") == "learned":
            with torch.no_grad():
                for lin in model.encoder.entity:
                    lin.weight.normal_()
        q = model.hop_queries(model.encode(text, precision="fp32"), 0, z)[:, part]  # (1, p) or a half
        (q * torch.randn(q.shape, generator=torch.Generator().manual_seed(0))).sum().backward()
        return model, {name for name, p in model.named_parameters() if p.grad is not None}

    _, base = grads()
    words, u = "encoder.embeddings.word_embeddings.weight", "encoder.entity.0.weight"
    assert words not in base and u in base
    assert grads(entity_condition="paper")[1] == base - {u}
    assert grads(entity_condition="none")[1] == base - {u}
    start = slice(0, enc.config.dim // 2)

    def layer_grad(model, j):  # the gradient reaching hop 1's layer j, summed
        return sum(float(p.grad.abs().sum()) for p in model.encoder.hop_layers[0][j].parameters() if p.grad is not None)

    pooled_start, paper_start = grads(start, hop_layers=2)[0], grads(start, hop_layers=2, query_heads="paper")[0]
    assert layer_grad(pooled_start, 0) > 0 and layer_grad(pooled_start, 1) > 0
    assert layer_grad(paper_start, 0) > 0 and layer_grad(paper_start, 1) == 0
    question_pieces = set(enc.tokenizer("who directed it", add_special_tokens=False)["input_ids"])
    name_only = [p for p in enc.tokenizer(title, add_special_tokens=False)["input_ids"] if p not in question_pieces]
    assert name_only
    for mode, reaches_names in (("learned", True), ("paper", True), ("none", False)):
        model, names = grads(entity_condition=mode, train_word_embeddings=True)
        assert names == (base if mode == "learned" else base - {u}) | {words}, mode
        g = model.encoder.embeddings.word_embeddings.weight.grad  # (V, hidden)
        assert all(g[p].abs().sum() > 0 for p in question_pieces), mode
        assert [bool(g[p].abs().sum() > 0) for p in name_only] == [reaches_names] * len(name_only), mode
        optimised = {id(p) for group in _optimizer(model, TrainConfig())[0].param_groups for p in group["params"]}
        assert id(model.encoder.embeddings.word_embeddings.weight) in optimised
    frozen, _ = grads()
    optimised = {id(p) for group in _optimizer(frozen, TrainConfig())[0].param_groups for p in group["params"]}
    assert id(frozen.encoder.embeddings.word_embeddings.weight) not in optimised
    paper, _ = grads(entity_condition="paper")
    optimised = {id(p) for group in _optimizer(paper, TrainConfig())[0].param_groups for p in group["params"]}
    assert all(id(lin.weight) not in optimised for lin in paper.encoder.entity)


# -- question_entity: bracketed | linked ----------------------------------------------------------------------

ENTITIES = EntityTable.from_names(["Kismet", "William Dieterle", "Marlene Dietrich", "Moon Over Miami"])


def link_by_name(text: str):
    """A stand-in for `VirtualKB.parse` on a plain question: the first entity of ENTITIES named in it."""
    for name in ENTITIES.names:
        if name.lower() in text.lower():
            return SimpleNamespace(text=text, topic=ENTITIES.lookup(name), topic_name=name, how=f"linked ({name})")
    raise QuestionError(f"no entity of the index is named in the question {text!r}")


def test_load_questions_links_instead_of_the_brackets(tmp_path):
    path = tmp_path / "qa.txt"
    path.write_text("who directed [Kismet]\tWilliam Dieterle\n"                   # 1 the same entity
                    "did [William Dieterle] direct Kismet\tyes\n"                  # 2 linked: Kismet (listed first)
                    "who directed [Zorro]\tRouben Mamoulian\n"                     # 3 unknown bracket, nothing named
                    "who directed [Zorro] or Moon Over Miami\tWalter Lang\n"       # 4 unknown bracket, linked
                    "who starred in Moon Over Miami\tBetty Grable\n"               # 5 plain
                    "who directed [[Kismet]]\tWilliam Dieterle\n", encoding="utf-8")  # 6 a bracket left in the text
    bracketed = load_questions(path, ENTITIES, link_by_name)
    assert [(it.line, it.topic, it.problem_kind, it.bracketed) for it in bracketed] == [
        (1, 0, None, None), (2, 1, None, None), (3, -1, "unknown_question_entity", None), (4, -1, "unknown_question_entity", None),
        (5, 3, None, None), (6, 0, None, None)]
    linked = load_questions(path, ENTITIES, link_by_name, "linked")
    got = [(it.line, it.text, it.topic, it.topic_name, it.how, it.problem_kind, it.bracketed, it.bracketed_id,
            it.linked_differs) for it in linked]
    assert got == [
        (1, "who directed Kismet", 0, "Kismet", "linked (Kismet)", None, "Kismet", 0, False),
        (2, "did William Dieterle direct Kismet", 0, "Kismet", "linked (Kismet)", None, "William Dieterle", 1, True),
        (3, "who directed Zorro", -1, "", "", "unlinked_question_entity", "Zorro", -1, False),
        (4, "who directed Zorro or Moon Over Miami", 3, "Moon Over Miami", "linked (Moon Over Miami)", None, "Zorro", -1, True),
        (5, "who starred in Moon Over Miami", 3, "Moon Over Miami", "linked (Moon Over Miami)", None, None, -1, False),
        (6, "who directed [Kismet]", 0, "Kismet", "linked (Kismet)", None, "Kismet", 0, False),
    ]
    assert linked[2].problem.startswith(f"{path}:3: ") and "no entity of the index is named" in linked[2].problem
    assert question_entity_counts(linked, "linked") == {"mode": "linked", "bracketed_lines": 5, "linked_differs": 2,
                                                        "not_linked": 1}
    assert question_entity_counts(bracketed, "bracketed") == {"mode": "bracketed"}
    no_linker = load_questions(path, ENTITIES, None, "linked")
    assert {it.problem_kind for it in no_linker} == {"unlinked_question_entity"} and "no linker" in no_linker[0].problem
    with pytest.raises(ConfigError, match="question_entity must be one of"):
        load_questions(path, ENTITIES, link_by_name, "first")


def _least_frequent(vkb, names):
    ids = [vkb.index.entities.lookup(n) for n in names]
    return min(ids, key=lambda e: (vkb.entity_frequency[e], e))  # the paper's rule, ties to the lower id


def test_train_and_evaluate_with_the_linked_question_entity(kb, tmp_path):
    d, films, vkb, enc = kb
    extra = [(f, f"in what year was the film of [{f['director']}] named {f['title']} released\t{f['year']}") for f in films[:12]]
    (tmp_path / "train.txt").write_text((d / "train.txt").read_text() + "".join(line + "\n" for _, line in extra))
    differs = sum(_least_frequent(vkb, [f["director"], f["title"]]) != vkb.index.entities.lookup(f["director"])
                  for f, _ in extra)
    assert 0 < differs  # a director is mentioned in more passages than some of the films
    cfg = TrainConfig(steps=1, batch_size=4, dev_sample=0, precision="fp32", question_entity="linked")
    model_dir = train(d / "index", d / "mentions", tmp_path / "train.txt", d / "dev.txt", tmp_path / "run",
                      model_config=SMALL, config=cfg, log=quiet)
    done = json.loads((tmp_path / "run" / "done.json").read_text())
    assert done["question_entity"]["train"] == {"mode": "linked", "bracketed_lines": 72 + 12, "linked_differs": differs,
                                                "not_linked": 0}
    assert done["question_entity"]["dev"] == {"mode": "linked", "bracketed_lines": 24, "linked_differs": 0, "not_linked": 0}
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert manifest["training"]["settings"]["train"]["question_entity"] == "linked"

    f0, f1, f2 = films[36], films[37], films[38]
    q = tmp_path / "q.txt"
    q.write_text(f"who directed [{f0['title']}]\t{f0['director']}\n"
                 f"in what year was the film of [{f1['director']}] named {f1['title']} released\t{f1['year']}\n"
                 f"who directed [No Such Film]\tSomebody\n"
                 f"who directed {f2['title']}\t{f2['director']}\n", encoding="utf-8")
    second_differs = _least_frequent(vkb, [f1["director"], f1["title"]]) != vkb.index.entities.lookup(f1["director"])
    kit = DrKIT.load(d / "index", model_dir)
    m = evaluate(kit, q, tmp_path / "ev", qps_sample=0, log=quiet)  # as the model was trained: linked
    assert m["question_entity"] == {"mode": "linked", "bracketed_lines": 3, "linked_differs": int(second_differs),
                                    "not_linked": 1, "from": "the model's training"}
    assert m["not_scored"] == {"unlinked_question_entity": 1} and m["scored"] == 3
    preds = [json.loads(line) for line in (tmp_path / "ev" / "predictions.jsonl").read_text().splitlines()]
    assert [p.get("bracketed_entity") for p in preds] == [f0["title"], f1["director"], "No Such Film", None]
    assert preds[1]["question_entity"] == vkb.entity_names[_least_frequent(vkb, [f1["director"], f1["title"]])]
    assert preds[1]["linked_differs"] == second_differs
    m = evaluate(kit, q, None, qps_sample=0, log=quiet, question_entity="bracketed")
    assert m["question_entity"] == {"mode": "bracketed", "from": "asked"}
    assert m["not_scored"] == {"unknown_question_entity": 1}


# -- old run directories resume; a changed setting is still refused -------------------------------------------

def test_a_run_made_before_the_options_is_found_done(kb, tmp_path):
    d, films, vkb, enc = kb
    args = (d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "run")
    kw = dict(model_config=SMALL, config=TrainConfig(steps=0, dev_sample=0, precision="fp32"))
    train(*args, **kw, log=quiet)
    path = tmp_path / "run" / "run.json"
    old = json.loads(path.read_text())
    for section, key in (("model", "query_heads"), ("model", "train_word_embeddings"), ("train", "question_entity")):
        del old[section][key]
    old["model"]["entity_condition"], old["follow"]["remove_topic"] = True, True
    path.write_text(json.dumps(old))
    lines = []
    train(*args, **kw, log=lines.append)
    assert any("already trained" in line for line in lines)
    assert json.loads(path.read_text())["model"]["entity_condition"] == "learned"
    old["model"]["entity_condition"] = False
    path.write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="model.entity_condition: none in the run, learned asked"):
        train(*args, **kw, log=quiet)


# -- the ablation rows -----------------------------------------------------------------------------------------

NEW_ROWS = ("remove_topic_last", "remove_topic_never", "cls_pool", "paper_query_heads", "paper_entity_condition",
            "no_entity_condition", "train_word_embeddings", "linked_question_entity")


def test_ablation_rows_option():
    from drkit.experiments.metaqa import ABLATIONS, ReproduceConfig

    assert set(NEW_ROWS) <= set(ABLATIONS)
    args = build_parser().parse_args(["reproduce-metaqa", "--ablation-rows", "cls_pool", "linked_question_entity"])
    assert config_from_args(args, ReproduceConfig) == ReproduceConfig(ablation_rows=("cls_pool", "linked_question_entity"))
    with pytest.raises(SystemExit):
        build_parser().parse_args(["reproduce-metaqa", "--ablation-rows", "nonsense"])
    with pytest.raises(ConfigError, match="ablation_rows must be distinct rows"):
        ReproduceConfig(ablation_rows=("sum", "sum"))
    with pytest.raises(ConfigError, match="ablation_rows must be distinct rows"):
        ReproduceConfig(ablation_rows=("nonsense",))
    for name in NEW_ROWS:  # every row's settings are settings of their classes
        row = ABLATIONS[name]
        ModelConfig(**{"hop_layers": 2, **row.model}), FollowConfig(**row.follow), TrainConfig(**row.train)


def test_reproduce_runs_only_the_rows_asked(films_kb, tiny_base, tmp_path, monkeypatch):  # noqa: F811
    import drkit.qa.evaluate
    from drkit.experiments.metaqa import ABLATIONS, ReproduceConfig, reproduce_metaqa

    d, films = films_kb
    data = tmp_path / "data"
    (data / "1-hop/vanilla").mkdir(parents=True)
    write_questions(data / "1-hop/vanilla/qa_train.txt", films[:36])
    write_questions(data / "1-hop/vanilla/qa_dev.txt", films[36:])
    for f in ("wiki.txt", "kb.txt"):
        (data / f).write_text((d / f).read_text())
    import drkit.dense.pretrain
    from drkit.dense.encoder import EncoderConfig

    real_pretrain = drkit.dense.pretrain.pretrain  # the tiny BERT instead of MiniLM: seconds, not minutes
    monkeypatch.setattr(drkit.dense.pretrain, "pretrain", lambda *a, **k: real_pretrain(
        *a, **{**k, "encoder_config": EncoderConfig(base=str(tiny_base), dim=32)}))
    out = tmp_path / "out"
    cfg = ReproduceConfig(hops=(1,), steps=1, pretrain_steps=0, k_sweep=(10,), sweep_questions=4, ablation_steps=1,
                          ablation_questions=6, ablation_rows=NEW_ROWS)
    results = reproduce_metaqa(data, out, cfg, log=quiet)
    assert list(results["ablations"]) == ["drkit", *NEW_ROWS]
    assert results["settings"]["ablation_rows"] == NEW_ROWS
    for name in NEW_ROWS:
        run = json.loads((out / f"train-{name}-1hop" / "run.json").read_text())
        row = ABLATIONS[name]
        for section, changed in (("model", row.model), ("follow", row.follow), ("train", row.train)):
            assert {k: run[section][k] for k in changed} == changed, name
        assert results["ablations"][name][1]["questions"] == 6
    assert not any((out / f"train-{name}-1hop").exists() for name in ABLATIONS if name not in NEW_ROWS)
    linked = json.loads((out / "eval-sample-linked_question_entity-1hop" / "metrics.json").read_text())
    assert linked["made_with"]["question_entity"] == "linked" and linked["question_entity"]["mode"] == "linked"
    assert "question_entity" not in json.loads((out / "eval-sample-cls_pool-1hop" / "metrics.json").read_text())["made_with"]
    table = (out / "results.md").read_text()
    assert "| - question entity never removed |" in table and "sum over the mentions" not in table
    evals = []
    real = drkit.qa.evaluate.evaluate
    monkeypatch.setattr(drkit.qa.evaluate, "evaluate", lambda *a, **k: evals.append(1) or real(*a, **k))
    timings = json.loads((out / "timings.json").read_text())
    again = reproduce_metaqa(data, out, dataclasses.replace(cfg, ablation_rows=NEW_ROWS[:2]), log=quiet)
    assert list(again["ablations"]) == ["drkit", *NEW_ROWS[:2]] and evals == []  # found done, nothing redone
    assert json.loads((out / "timings.json").read_text()) == timings


def test_entity_name_pieces_equal_the_tokenizers_call(kb, monkeypatch):
    """set_entities tokenizes names in blocks with a plain copy of the fast tokenizer's backend: the same pieces,
    name by name, as the tokenizer's own call, also after a call that left truncation and padding set on the
    backend, and with a slow tokenizer (no backend)."""
    import drkit.reason.model as model_module

    d, films, vkb, enc = kb
    model = _model(enc, vkb)
    names = list(vkb.entity_names) + ["", "Ça ne fait rien — naïve café", "river " * 600, "Tōkyō 東京 2019 (film)", "  "]
    model.tokenizer(["a b c d e f"] * 2, truncation=True, max_length=3, padding="max_length")  # leaves state behind
    monkeypatch.setattr(model_module, "NAME_BLOCK", 7)
    model.set_entities(names)
    want = model.tokenizer(names, add_special_tokens=False)["input_ids"]
    assert max(map(len, want)) > 500  # the long name is not cut
    got = [model.entity_pieces[model.entity_piece_indptr[i] : model.entity_piece_indptr[i + 1]].tolist()
           for i in range(len(names))]
    assert got == want
    monkeypatch.setattr(model_module, "_plain_backend", lambda tokenizer: None)  # the tokenizer's call itself
    model.set_entities(names)
    assert torch.equal(model.entity_pieces, torch.tensor([i for p in want for i in p]))
