"""Encoder, pretraining loop, dense mention index and slot filling, with a tiny random transformer."""

import json

import numpy as np
import pytest
import torch

from drkit.cli import main
from drkit.dense.encoder import DualEncoder, EncoderConfig, mean_pool
from drkit.dense.mentions import EmbedConfig, MentionIndex, build_mention_index
from drkit.dense.pretrain import PretrainConfig, pretrain
from drkit.dense.slot_filling import rank_entities, read_slot_queries
from drkit.dense.spans import span_logits
from drkit.errors import ArtifactError, ConfigError, InputFormatError
from drkit.util.pages import mapping_of

FAST = dict(anchor_passages=2, queries_per_passage=3, max_passages=4, checkpoint_every=2, precision="fp32")


@pytest.fixture(scope="module")
def encoder(tiny_base):
    return DualEncoder.from_base(EncoderConfig(base=str(tiny_base), dim=16)).eval()


def slow_mean_pool(hidden, mask):
    rows = []
    for h, m in zip(hidden, mask):
        kept = [h[i] for i in range(len(m)) if m[i]]
        rows.append(sum(kept) / len(kept) if kept else torch.zeros(h.shape[-1], dtype=h.dtype))
    return torch.stack(rows)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_mean_pool_matches_slow_reference(dtype):
    gen = torch.Generator().manual_seed(0)
    hidden = torch.randn(5, 7, 3, generator=gen, dtype=dtype)
    mask = (torch.rand(5, 7, generator=gen) < 0.6).long()
    mask[0] = 1  # no padding
    mask[1] = 0  # nothing to pool: zeros
    mask[2, 1:] = 0  # one position
    assert torch.allclose(mean_pool(hidden, mask), slow_mean_pool(hidden, mask))
    assert mean_pool(hidden, mask).dtype == dtype


def test_query_encoder_is_mean_pooled(encoder):
    batch = encoder.query_batch(["Kismet, directed by, ?", "a much longer query, with more word pieces, ?"])
    ids, mask = batch["input_ids"], batch["attention_mask"]
    assert mask[0].sum() < mask[1].sum()  # the first is padded
    with torch.no_grad():
        qs, qe = encoder.encode_queries(ids, mask)
        h = encoder.query_model(input_ids=ids, attention_mask=mask).last_hidden_state
        pooled = slow_mean_pool(h, mask)
    assert torch.allclose(qs, encoder.query_start(pooled), atol=1e-6)
    assert torch.allclose(qe, encoder.query_end(pooled), atol=1e-6)


def test_untrained_projections_share_one_orthonormal_matrix(encoder):
    w = encoder.mention_start.weight
    torch.testing.assert_close(w @ w.T, torch.eye(8))
    for lin in (encoder.mention_end, encoder.query_start, encoder.query_end):
        torch.testing.assert_close(lin.weight, w)


def test_mention_vector_dot_query_is_start_plus_end_logit(encoder, toy_index):
    pieces = [toy_index.passage_pieces(p) for p in range(2)]
    m = np.asarray(toy_index.mentions)
    starts = [m[m[:, 1] == p, 2] for p in range(2)]
    ends = [m[m[:, 1] == p, 3] for p in range(2)]
    vecs = encoder.embed_mentions(pieces, starts, ends, precision="fp32")
    g = encoder.embed_queries(["Kismet, directed by, ?"], precision="fp32")[0]
    ids, mask = encoder.passage_batch(pieces)
    with torch.no_grad():
        fs, fe = encoder.encode_passages(ids, mask)
        batch = encoder.query_batch(["Kismet, directed by, ?"])
        qs, qe = encoder.encode_queries(batch["input_ids"], batch["attention_mask"])
        s_logit, e_logit = span_logits(fs, fe, qs, qe)
    for p in range(2):
        for k, (i, j) in enumerate(zip(starts[p], ends[p])):
            want = float(s_logit[0, p, i + 1] + e_logit[0, p, j + 1])
            assert float(vecs[p][k] @ g) == pytest.approx(want, rel=1e-4, abs=1e-4)


def test_passage_batch_layout(encoder, toy_index):
    ids, mask = encoder.passage_batch([np.array([5, 6, 7]), np.array([8])])
    tok = encoder.tokenizer
    assert ids[0].tolist() == [tok.cls_token_id, 5, 6, 7, tok.sep_token_id]
    assert ids[1].tolist()[:3] == [tok.cls_token_id, 8, tok.sep_token_id] and mask[1].tolist() == [1, 1, 1, 0, 0]
    with pytest.raises(ConfigError, match="word pieces"):
        encoder.passage_batch([np.zeros(600, dtype=np.int64)])


def test_encoder_save_load_round_trip(encoder, tmp_path, toy_index):
    encoder.save(tmp_path / "enc")
    loaded = DualEncoder.load(tmp_path / "enc")
    pieces = [toy_index.passage_pieces(0)]
    a = encoder.embed_mentions(pieces, [np.array([0, 2])], [np.array([1, 3])], precision="fp32")[0]
    b = loaded.embed_mentions(pieces, [np.array([0, 2])], [np.array([1, 3])], precision="fp32")[0]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(encoder.embed_queries(["x, y, ?"], precision="fp32"), loaded.embed_queries(["x, y, ?"], precision="fp32"))
    with pytest.raises(ArtifactError):
        DualEncoder.load(tmp_path)  # not an encoder artifact


def test_config_is_checked(tiny_base):
    with pytest.raises(ConfigError, match="even"):
        EncoderConfig(dim=7)
    with pytest.raises(ConfigError, match="hidden size"):
        DualEncoder.from_base(EncoderConfig(base=str(tiny_base), dim=128))
    with pytest.raises(ConfigError, match="layers"):
        DualEncoder.from_base(EncoderConfig(base=str(tiny_base), dim=16, query_layers=5))


def _weights(path):
    from safetensors.torch import load_file
    return load_file(str(path / "encoder" / "model.safetensors"))


def test_pretraining_resumes_exactly(tiny_base, toy_index, toy_files, tmp_path):
    enc = EncoderConfig(base=str(tiny_base), dim=16)
    cfg = PretrainConfig(steps=4, **FAST)
    quiet = lambda *a: None  # noqa: E731
    pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / "a", cfg, enc, log=quiet)
    pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / "b", cfg, enc, log=quiet)
    # simulate an interruption after step 2 of run b: drop its later state, then run the same command again
    import shutil
    shutil.rmtree(tmp_path / "b" / "checkpoints" / "step-4")
    shutil.rmtree(tmp_path / "b" / "encoder")
    lines = (tmp_path / "b" / "train_log.jsonl").read_text().splitlines()
    (tmp_path / "b" / "train_log.jsonl").write_text("\n".join(lines[:2]) + "\n")
    messages = []
    pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / "b", cfg, enc, log=messages.append)
    assert any("resuming" in m and "step 2" in m for m in messages)
    wa, wb = _weights(tmp_path / "a"), _weights(tmp_path / "b")
    assert wa.keys() == wb.keys()
    for k in wa:
        torch.testing.assert_close(wa[k], wb[k], rtol=0, atol=0, msg=k)
    log = [json.loads(line) for line in (tmp_path / "b" / "train_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log] == [1, 2, 3, 4]
    assert (tmp_path / "b" / "heldout.jsonl").exists()
    assert pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / "b", cfg, enc, log=quiet) == tmp_path / "b" / "encoder"
    with pytest.raises(ConfigError, match=r"other settings \(pretrain.steps: 4 in the run, 5 asked\)"):
        shutil.rmtree(tmp_path / "b" / "encoder")
        pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / "b", PretrainConfig(steps=5, **FAST), enc, log=quiet)


def test_pretraining_lowers_the_loss(tiny_base, toy_index, toy_files, tmp_path):
    cfg = PretrainConfig(steps=120, lr=1e-3, head_lr=1e-2, warmup=0.0, checkpoint_every=1000,
                         **{k: v for k, v in FAST.items() if k != "checkpoint_every"})
    pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / "run", cfg, EncoderConfig(base=str(tiny_base), dim=16),
             log=lambda *a: None)
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    first = np.mean([r["loss"] for r in log[:10]])
    last = np.mean([r["loss"] for r in log[-10:]])
    assert last < 0.6 * first, (first, last)


def test_pretraining_without_attention_dropout_writes_an_encoder_and_question_model_without_it(tiny_base, toy_index,
                                                                                            toy_files, tmp_path):
    from drkit.reason.model import MultiHopModel

    enc = EncoderConfig(base=str(tiny_base), dim=16)
    for on in (True, False):
        cfg = PretrainConfig(steps=2, attention_dropout=on, **FAST)
        pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / str(on), cfg, enc, log=lambda *a: None)
        loaded = DualEncoder.load(tmp_path / str(on) / "encoder")
        rates = {m.config.attention_probs_dropout_prob for m in (loaded.passage_model, loaded.query_model)}
        assert rates == ({0.1} if on else {0.0})  # the base's own rate, or none
        question = MultiHopModel.from_encoder(loaded).encoder  # what train and train-mixing build on it
        assert question.bert_config.attention_probs_dropout_prob == (0.1 if on else 0.0)
        settings = json.loads((tmp_path / str(on) / "run.json").read_text())["pretrain"]
        assert settings["attention_dropout"] is on
    # a run made before the setting existed resumes as the recipe it was made with (dropout on)
    saved = json.loads((tmp_path / "True" / "run.json").read_text())
    del saved["pretrain"]["attention_dropout"]
    (tmp_path / "True" / "run.json").write_text(json.dumps(saved))
    assert pretrain(toy_index.path, toy_files / "kb.txt", tmp_path / "True", PretrainConfig(steps=2, **FAST), enc,
                    log=lambda *a: None) == tmp_path / "True" / "encoder"


@pytest.fixture(scope="module")
def embedded(tiny_base, toy_index, toy_files, tmp_path_factory):
    d = tmp_path_factory.mktemp("embedded")
    pretrain(toy_index.path, toy_files / "kb.txt", d / "run", PretrainConfig(steps=0, **FAST),
             EncoderConfig(base=str(tiny_base), dim=16), log=lambda *a: None)
    mi = build_mention_index(toy_index.path, d / "run", d / "mentions", EmbedConfig(batch_tokens=40, precision="fp32"),
                             log=lambda *a: None)
    return d, mi


def test_mention_index_holds_every_mention_vector(embedded, toy_index):
    d, mi = embedded
    enc = DualEncoder.load(d / "run" / "encoder")
    m = np.asarray(toy_index.mentions)
    loaded = MentionIndex.load(d / "mentions")
    assert mapping_of(loaded.vectors) is not None and loaded.vectors.dtype == np.float16  # memory-mapped, not read
    assert loaded.vectors.shape == (toy_index.n_mentions, 16)
    for p in range(toy_index.n_passages):
        rows = np.flatnonzero(m[:, 1] == p)
        want = enc.embed_mentions([toy_index.passage_pieces(p)], [m[rows, 2]], [m[rows, 3]], precision="fp32")[0]
        np.testing.assert_allclose(loaded.vectors[rows].astype(np.float32), want, rtol=2e-3, atol=2e-3)
    loaded.check_compatible(toy_index, d / "run")


def test_int8_embedding_is_the_quantised_encoder_s_and_says_so(embedded, toy_index, tmp_path):
    """--quantize int8: each vector is what an int8 copy of the encoder computes (a slow reference: that copy
    made here, passage by passage), close to but not equal to fp32's; the manifest records it."""
    from drkit.dense.quantize import quantize_transformer

    d, mi = embedded
    enc = DualEncoder.load(d / "run" / "encoder")
    built = build_mention_index(toy_index.path, d / "run", tmp_path / "int8",
                                EmbedConfig(batch_tokens=40, precision="fp32", quantize="int8"), log=lambda *a: None)
    assert built.manifest["config"]["quantize"] == "int8"
    assert not any("quantized" in type(m).__module__ for m in enc.modules())  # the loaded encoder is left alone
    int8 = DualEncoder.load(d / "run" / "encoder").eval()
    assert quantize_transformer(int8.passage_model, "fp32") > 0
    m = np.asarray(toy_index.mentions)
    fp32 = MentionIndex.load(d / "mentions").vectors
    vectors = MentionIndex.load(tmp_path / "int8").vectors
    for p in range(toy_index.n_passages):
        rows = np.flatnonzero(m[:, 1] == p)
        want = int8.embed_mentions([toy_index.passage_pieces(p)], [m[rows, 2]], [m[rows, 3]], precision="fp32")[0]
        np.testing.assert_allclose(vectors[rows].astype(np.float32), want, rtol=2e-3, atol=2e-3)
    a, b = np.asarray(fp32, np.float32), np.asarray(vectors, np.float32)
    assert not np.array_equal(a, b)
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    assert cos.mean() > 0.9
    with pytest.raises(ConfigError, match="quantize must be"):
        EmbedConfig(quantize="int4")


def test_mention_index_refuses_another_encoder(embedded, toy_index, tiny_base, tmp_path):
    d, mi = embedded
    other = DualEncoder.from_base(EncoderConfig(base=str(tiny_base), dim=16, init_seed=1))
    other.save(tmp_path / "other")
    with pytest.raises(ArtifactError, match="weights differ"):
        mi.check_compatible(toy_index, tmp_path / "other")


def test_exact_search_over_the_mention_index(embedded):
    _, mi = embedded
    q = np.random.default_rng(0).normal(size=(3, 16)).astype(np.float32)
    scores, ids = mi.searcher("exact", compute_dtype=torch.float32).search(q, 5)
    full = mi.vectors.astype(np.float32) @ q.T
    for r in range(3):
        np.testing.assert_allclose(scores[r], np.sort(full[:, r])[::-1][:5], rtol=1e-5)
    with pytest.raises(ConfigError):
        mi.searcher("annoy")


def test_rank_entities_matches_slow_reference(embedded, toy_index):
    _, mi = embedded
    rng = np.random.default_rng(1)
    vec = mi.vectors.astype(np.float32)
    for subject in range(len(toy_index.entities)):
        q = rng.normal(size=16).astype(np.float32)
        best = {}
        A = toy_index.A()
        for m in A[subject].indices:
            e = int(toy_index.mention_entity[m])
            if e == subject:
                continue
            s = float(vec[m] @ q)
            best[e] = max(best.get(e, -np.inf), s)
        want = sorted(best, key=lambda e: -best[e])[:5]
        ents, scores, _ = rank_entities(toy_index, mi.vectors, subject, q)
        assert ents.tolist() == want
        np.testing.assert_allclose(scores, [best[e] for e in want], rtol=1e-5)


def test_cli_pretrain_embed_slot_fill(tiny_base, toy_index, toy_files, tmp_path, capsys):
    run, mentions, out = tmp_path / "run", tmp_path / "mentions", tmp_path / "eval"
    assert main(["pretrain", "--index", str(toy_index.path), "--kb", str(toy_files / "kb.txt"), "--out", str(run),
                 "--steps", "2", "--base", str(tiny_base), "--dim", "16", "--precision", "fp32", "--holdout", "0.3",
                 "--anchor-passages", "2", "--max-passages", "4"]) == 0
    assert main(["embed", "--index", str(toy_index.path), "--encoder", str(run), "--out", str(mentions)]) == 0
    assert main(["slot-fill", "--index", str(toy_index.path), "--mentions", str(mentions), "--encoder", str(run),
                 "--queries", str(run / "heldout.jsonl"), "--out", str(out)]) == 0
    metrics = json.loads((out / "metrics.json").read_text())
    n = len((run / "heldout.jsonl").read_text().splitlines())
    assert metrics["queries"] == n > 0 and 0 <= metrics["hits@1"] <= metrics["hits@5"] <= 1
    assert len((out / "predictions.jsonl").read_text().splitlines()) == n
    assert "Hits@1" in capsys.readouterr().out
    # the mention index belongs to this encoder only
    other = tmp_path / "other"
    DualEncoder.from_base(EncoderConfig(base=str(tiny_base), dim=16, init_seed=5)).save(other)
    assert main(["slot-fill", "--index", str(toy_index.path), "--mentions", str(mentions), "--encoder", str(other),
                 "--queries", str(run / "heldout.jsonl"), "--out", str(out)]) == 2
    assert "weights differ" in capsys.readouterr().err


def test_slot_queries_bad_lines(toy_index, tmp_path):
    f = tmp_path / "q.jsonl"
    f.write_text('{"text": "Kismet, directed by, ?", "subject": "Kismet", "answers": ["William Dieterle"]}\n{"text": 1}\n')
    with pytest.raises(InputFormatError, match=r"q.jsonl:2.*text"):
        read_slot_queries(f, toy_index)
    f.write_text('{"text": "x", "subject": "Nobody", "answers": ["Kismet"]}\n')
    with pytest.raises(InputFormatError, match=r"q.jsonl:1.*Nobody"):
        read_slot_queries(f, toy_index)
    f.write_text('not json\n')
    with pytest.raises(InputFormatError, match=r"q.jsonl:1: not valid JSON"):
        read_slot_queries(f, toy_index)
    f.write_text('{"text": "Kismet, directed by, ?", "subject": "kismet", "answers": ["William Dieterle"]}\n\n')
    [q] = read_slot_queries(f, toy_index)
    assert q["subject_id"] == toy_index.entities.lookup("Kismet") and q["line"] == 1


def test_empty_passage_is_counted_not_dropped(encoder, toy_index):
    from drkit.dense.mentions import embed_mentions
    from drkit.index.csr import passage_mention_indptr as indptr_of
    from drkit.util.warnlog import WarningLog

    class WithEmptyPassage:
        """The toy index with an empty passage inserted before passage 1."""
        path = toy_index.path
        n_passages = toy_index.n_passages + 1
        mentions = np.asarray(toy_index.mentions).copy()
        mentions[mentions[:, 1] >= 1, 1] += 1
        offsets = np.asarray(toy_index.piece_offsets)
        piece_offsets = np.concatenate([offsets[:2], offsets[1:]])
        passage_mention_indptr = indptr_of(mentions[:, 1], n_passages)

        def passage_pieces(self, p):
            return np.zeros(0, np.int64) if p == 1 else toy_index.passage_pieces(p - 1 if p > 1 else p)

    w = WarningLog()
    vectors, _ = embed_mentions(WithEmptyPassage(), encoder, EmbedConfig(precision="fp32"), w)
    direct, _ = embed_mentions(toy_index, encoder, EmbedConfig(precision="fp32"))
    assert w.count("empty_passage") == 1
    np.testing.assert_array_equal(vectors, direct)


def test_overwrite_deletes_only_a_run_directory(toy_index, toy_files, tmp_path, tiny_base):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    with pytest.raises(ConfigError, match="not empty"):
        pretrain(toy_index.path, toy_files / "kb.txt", precious, PretrainConfig(steps=0, **FAST),
                 EncoderConfig(base=str(tiny_base), dim=16), overwrite=True, log=lambda *a: None)
    assert (precious / "thesis.tex").exists()


def test_chance_hits_matches_enumeration():
    from itertools import combinations

    from drkit.dense.slot_filling import chance_hits

    for n, g in [(1, 1), (4, 1), (7, 2), (6, 0), (3, 3)]:
        gold = set(range(g))
        for k, got in zip((1, 5), chance_hits(n, g)):
            subsets = list(combinations(range(n), min(k, n)))
            want = sum(bool(gold & set(s)) for s in subsets) / len(subsets)
            assert got == pytest.approx(want)


def test_a_transformer_folder_without_safetensors_is_refused_not_unpickled(tiny_base, tmp_path):
    import shutil

    import torch
    from transformers import BertModel

    from drkit.dense.encoder import load_transformer
    from drkit.errors import ConfigError

    assert load_transformer(tiny_base) is not None
    pickled = tmp_path / "pickled"  # the same model, its weights as a pickle only
    pickled.mkdir()
    for f in tiny_base.iterdir():
        if f.name != "model.safetensors":
            shutil.copy(f, pickled / f.name)
    torch.save(BertModel.from_pretrained(str(tiny_base)).state_dict(), pickled / "pytorch_model.bin")
    called = []
    real_load = torch.load
    torch.load = lambda *a, **k: called.append(1) or real_load(*a, **k)
    try:
        with pytest.raises(ConfigError, match="cannot load a transformer"):
            load_transformer(pickled)
    finally:
        torch.load = real_load
    assert not called


def test_grouped_passage_encoding_equals_the_padded_batch(encoder):
    """Passages encoded in groups of similar length, each cut to its own longest, give every real position
    the vectors of the whole right-padded batch (to float rounding), zeros past each group's width, and the
    same gradient."""
    rng = np.random.default_rng(0)
    pieces = [rng.integers(1000, 2000, size=n) for n in (3, 40, 7, 25, 1, 40, 12)]
    ids, mask = encoder.passage_batch(pieces)
    fs, fe = encoder.encode_passages(ids, mask)
    for budget in (1, 50, 120, 10_000):  # one passage a group, several, all in one
        gs, ge = encoder.encode_passages_grouped(ids, mask, group_tokens=budget)
        assert gs.shape == fs.shape and ge.shape == fe.shape
        real = mask.bool()
        torch.testing.assert_close(gs[real], fs[real], rtol=1e-4, atol=1e-5)
        torch.testing.assert_close(ge[real], fe[real], rtol=1e-4, atol=1e-5)
    w = torch.randn_like(fs)
    grad_full = torch.autograd.grad((fs * w * mask[..., None]).sum(), encoder.mention_start.weight)[0]
    gs, _ = encoder.encode_passages_grouped(ids, mask, group_tokens=50)
    grad_grouped = torch.autograd.grad((gs * w * mask[..., None]).sum(), encoder.mention_start.weight)[0]
    torch.testing.assert_close(grad_grouped, grad_full, rtol=1e-4, atol=1e-4)
    alone, _ = encoder.encode_passages_grouped(ids, mask, group_tokens=1)  # each passage its own group
    assert alone[~mask.bool()].abs().sum() == 0  # nothing computed past a passage's own end
