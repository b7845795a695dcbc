"""The question-time and training path on a CUDA GPU against the CPU's (skipped where torch sees no GPU:
CI has none). The reference is the same model computing on the CPU in fp32; on the GPU in fp32 (`auto` there) each hop's
Z and query agree within 1e-4 (another summation order), in bf16 within 5e-2.
The follow's integer bookkeeping runs on the CPU in both; its scores and their gradient on the GPU."""

import copy

import numpy as np
import pytest
import torch
from test_model import films_kb  # noqa: F401  (a fixture)

from drkit.dense.encoder import DualEncoder
from drkit.qa.pipeline import DrKIT
from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import FollowConfig
from drkit.reason.mixing import HopMixingModel, MixConfig, mix
from drkit.reason.model import ModelConfig, MultiHopModel
from drkit.reason.train import TrainConfig, answer_set_loss, train
from drkit.reason.vkb import VirtualKB
from drkit.util.hardware import choose

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (CI has none)")

SMALL = ModelConfig(hops=2, shared_layers=1, hop_layers=1)


def _questions(d):
    lines = [line.split("\t") for line in (d / "dev.txt").read_text().splitlines() if line.strip()]
    return [q for q, _ in lines]


def _model_and_kbs(d, precision="fp32", follow=FollowConfig(top_k=200, temperature=1.0)):
    enc = DualEncoder.load(d / "enc" / "encoder")
    torch.manual_seed(0)
    cpu_model = MultiHopModel.from_encoder(enc, SMALL, follow)
    kb_cpu = VirtualKB.load(d / "index", d / "mentions", precision="fp32", device="cpu")
    kb_gpu = VirtualKB.load(d / "index", d / "mentions", precision=precision, device="cuda")
    cpu_model.set_entities(kb_cpu.entity_names)
    gpu_model = copy.deepcopy(cpu_model).to("cuda")
    return cpu_model.eval(), gpu_model.eval(), kb_cpu, kb_gpu


def _on_both(d, cpu_model, gpu_model, kb_cpu, kb_gpu, precision="fp32"):
    """Every hop's output for the dev questions: the CPU model in fp32, the GPU model in `precision`."""
    parsed = [kb_cpu.parse(q) for q in _questions(d)]
    topic = np.array([p.topic for p in parsed])
    with torch.no_grad():
        return (cpu_model([p.text for p in parsed], topic, kb_cpu, precision="fp32"),
                gpu_model([p.text for p in parsed], topic, kb_gpu, precision=precision))


def _close(a: EntitySet, b: EntitySet, n: int, tol: float) -> float:
    diff = float((a.to_dense(n).float() - b.to_dense(n).float()).abs().max())
    assert diff <= tol, diff
    return diff


@pytest.mark.parametrize("retrieval", ["restricted", "global"])
def test_a_model_answers_alike_on_the_gpu_and_the_cpu(films_kb, retrieval):  # noqa: F811
    d, _ = films_kb
    cpu_model, gpu_model, kb_cpu, kb_gpu = _model_and_kbs(d, follow=FollowConfig(top_k=200, temperature=1.0,
                                                                                   retrieval=retrieval))
    on_cpu, on_gpu = _on_both(d, cpu_model, gpu_model, kb_cpu, kb_gpu)
    assert kb_gpu.graph.device.type == "cuda" and gpu_model.device.type == "cuda"
    for a, b in zip(on_cpu, on_gpu):
        _close(a.z, b.z, kb_cpu.graph.n_entities, 1e-4)
        scale = float(a.query.abs().max())
        assert float((a.query - b.query).abs().max()) <= 1e-4 * scale


def test_the_front_door_moves_the_model_to_the_gpu_and_answers_as_the_cpu(films_kb):  # noqa: F811
    d, _ = films_kb
    cpu_model, _, kb_cpu, kb_gpu = _model_and_kbs(d)
    cpu_model.manifest = {}
    gpu_kit = DrKIT(copy.deepcopy(cpu_model), kb_gpu)
    assert gpu_kit.model.device.type == "cuda"
    cpu_kit = DrKIT(cpu_model, kb_cpu)
    texts = _questions(d)
    a, b = cpu_kit.answer_batch(texts, top=3), gpu_kit.answer_batch(texts, top=3)
    assert len(a) == len(b) == len(texts)
    for x, y in zip(a, b):
        assert len(x.answers) == len(y.answers)
        assert np.allclose([e.prob for e in x.answers], [e.prob for e in y.answers], atol=1e-4)
        tied = len(x.answers) > 1 and x.answers[0].prob - x.answers[1].prob < 1e-4  # a tie may fall either way
        assert tied or x.answers[0].entity == y.answers[0].entity


def test_auto_is_fp32_on_the_gpu_and_bf16_answers_close_to_fp32(films_kb):  # noqa: F811
    """`auto` on a GPU is fp32 (bf16 autocast measured slower for drkit's encoder); bf16, when asked for, turns
    cuDNN attention off and answers within 5e-2 of the CPU's fp32."""
    d, _ = films_kb
    auto = choose("auto", "cuda")
    assert auto.device.type == "cuda" and auto.precision == "fp32"
    if not torch.cuda.is_bf16_supported():
        pytest.skip("this GPU has no bf16")
    assert choose("bf16", "cuda").precision == "bf16" and not torch.backends.cuda.cudnn_sdp_enabled()
    cpu_model, gpu_model, kb_cpu, kb_gpu = _model_and_kbs(d, precision="bf16")
    on_cpu, on_gpu = _on_both(d, cpu_model, gpu_model, kb_cpu, kb_gpu, precision="bf16")
    _close(on_cpu[-1].z, on_gpu[-1].z, kb_cpu.graph.n_entities, 5e-2)


def test_a_training_step_has_the_same_loss_and_gradient_on_the_gpu(films_kb):  # noqa: F811
    """Dropout off (eval mode), fp32: the answer-set loss and the gradient of every trained parameter agree."""
    d, _ = films_kb
    cpu_model, gpu_model, kb_cpu, kb_gpu = _model_and_kbs(d)
    lines = [line.split("\t") for line in (d / "train.txt").read_text().splitlines()[:16]]
    parsed = [kb_cpu.parse(q) for q, _ in lines]
    answers = [np.array([kb_cpu.index.entities.lookup(a) for a in ans.split("|")]) for _, ans in lines]
    topic = np.array([p.topic for p in parsed])
    losses, grads = {}, {}
    for name, model, kb in (("cpu", cpu_model, kb_cpu), ("cuda", gpu_model, kb_gpu)):
        outs = model([p.text for p in parsed], topic, kb, precision="fp32")
        loss, _ = answer_set_loss(outs[-1].z, answers, kb.graph.n_entities)
        loss.backward()
        losses[name] = loss.item()
        grads[name] = {n: p.grad.detach().cpu() for n, p in model.named_parameters() if p.grad is not None}
    assert abs(losses["cpu"] - losses["cuda"]) <= 1e-4 * max(1.0, abs(losses["cpu"]))
    assert grads["cpu"].keys() == grads["cuda"].keys() and grads["cpu"]
    for n, g in grads["cpu"].items():
        assert float((g - grads["cuda"][n]).abs().max()) <= 1e-3 * max(1e-6, float(g.abs().max())), n


def test_a_hop_mixing_model_mixes_alike_on_the_gpu(films_kb):  # noqa: F811
    d, _ = films_kb
    enc = DualEncoder.load(d / "enc" / "encoder")
    torch.manual_seed(0)
    model = HopMixingModel.from_encoder(enc, MixConfig(hops=2), SMALL, FollowConfig(top_k=200, temperature=1.0))
    torch.nn.init.normal_(model.pi_head.weight, std=0.1)  # a mixture that is not uniform
    with torch.no_grad():
        model.named_weight.fill_(1.5)  # on the GPU with the model; Z_0 and its named entities on the CPU
    kb_cpu = VirtualKB.load(d / "index", d / "mentions", precision="fp32", device="cpu")
    kb_gpu = VirtualKB.load(d / "index", d / "mentions", precision="fp32", device="cuda")
    model.base.set_entities(kb_cpu.entity_names)
    on_gpu_model = copy.deepcopy(model).to("cuda").eval()
    texts = _questions(d)
    parsed = [kb_cpu.parse(q) for q in texts]
    z0 = EntitySet.one_hot([p.topic for p in parsed])
    z0 = mix([z0, EntitySet.one_hot([(p.topic + 1) % kb_cpu.graph.n_entities for p in parsed])],
             torch.full((len(parsed), 2), 0.5))  # two entities a question, one of them named
    named = np.array([[p.topic] for p in parsed])
    with torch.no_grad():
        a = model.eval()([p.text for p in parsed], z0, kb_cpu, precision="fp32", named=named)
        b = on_gpu_model([p.text for p in parsed], z0, kb_gpu, precision="fp32", named=named)
    assert float((a.pi - b.pi).abs().max()) <= 1e-5
    _close(a.z_star, b.z_star, kb_cpu.graph.n_entities, 1e-4)


def test_training_on_the_gpu_writes_a_model_that_answers_on_the_cpu(films_kb, tmp_path):  # noqa: F811
    d, _ = films_kb
    cfg = TrainConfig(steps=6, batch_size=8, eval_every=3, dev_sample=0, checkpoint_every=3, precision="auto",
                      device="cuda")
    train(d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "run", model_config=SMALL,
          follow_config=FollowConfig(top_k=200, temperature=1.0), config=cfg, log=lambda *a: None)
    model = MultiHopModel.load(tmp_path / "run" / "model")
    assert model.device.type == "cpu"
    kit = DrKIT(model, VirtualKB.load(d / "index", d / "mentions", precision="fp32", device="cpu"))
    assert all(r.answers for r in kit.answer_batch(_questions(d)[:4], top=1))


def test_the_reader_reads_and_trains_alike_on_the_gpu(tiny_reader):
    """The reader (random weights, eval mode, fp32) on the GPU against its copy on the CPU: every logit, the loss
    and the gradient of every parameter, and what `read` answers with its type probabilities and span score."""
    from test_reader import example

    examples = [example(), example(answers=("no",))]
    on_gpu = copy.deepcopy(tiny_reader).to("cuda").eval()
    cpu = tiny_reader.eval()
    features = [cpu.featurize(e, labels=True) for e in examples]
    results = {}
    for name, reader in (("cpu", cpu), ("cuda", on_gpu)):
        reader.zero_grad()
        batch = reader.batch(features)
        out = reader(batch["input_ids"], batch["attention_mask"], batch["content"])
        loss, _ = reader.loss(out, features)
        loss.backward()
        results[name] = ({k: v.detach().cpu() for k, v in out.items()}, float(loss),
                         {n: p.grad.detach().cpu() for n, p in reader.named_parameters() if p.grad is not None},
                         reader.read(examples))
        reader.zero_grad()
    (out_c, loss_c, grad_c, read_c), (out_g, loss_g, grad_g, read_g) = results["cpu"], results["cuda"]
    for k, v in out_c.items():
        finite = torch.isfinite(v)
        assert torch.equal(finite, torch.isfinite(out_g[k])), k
        assert float((v[finite] - out_g[k][finite]).abs().max()) <= 1e-4, k
    assert abs(loss_c - loss_g) <= 1e-4 * max(1.0, abs(loss_c))
    assert grad_c.keys() == grad_g.keys() and grad_c
    scale = max(float(g.abs().max()) for g in grad_c.values())  # some gradients are 0 in exact arithmetic (a span
    for n, g in grad_c.items():  # head's bias under the softmax): each is held to 1e-3 of the largest
        assert float((g - grad_g[n]).abs().max()) <= 1e-3 * scale, n
    for a, b in zip(read_c, read_g):
        assert a.type_probs.keys() == b.type_probs.keys()
        assert all(abs(a.type_probs[t] - b.type_probs[t]) <= 1e-4 for t in a.type_probs)
        assert (a.span is None) == (b.span is None)
        if a.span is not None:
            assert abs(a.span.score - b.span.score) <= 1e-3


def test_the_dense_peer_embeds_and_ranks_alike_on_the_gpu(tiny_base):
    """`DenseRetriever` (the dense peer, and the single-step control built on it) computes where `device` says:
    on the GPU in fp32 its passage vectors agree with the CPU's within 1e-4 and it ranks the passages alike."""
    from drkit.qa.peers import DenseRetriever

    texts = ["Moon Over Miami is a 1941 film directed by Walter Lang.", "Walter Lang was born in Memphis.",
             "Kismet is a 1944 film directed by William Dieterle.", "Memphis is a city in Tennessee."]
    questions = ["Who directed Moon Over Miami?", "Where was Walter Lang born?"]
    on = {d: DenseRetriever(texts, base=str(tiny_base), precision="fp32", device=d) for d in ("cpu", "cuda")}
    assert next(on["cuda"].model.parameters()).device.type == "cuda" and on["cuda"].vectors.device.type == "cpu"
    assert float((on["cpu"].vectors - on["cuda"].vectors).abs().max()) <= 1e-4
    a, b = (on[d].retrieve(questions, 4) for d in ("cpu", "cuda"))
    for x, y in zip(a, b):
        assert x.articles == y.articles and np.allclose(x.scores, y.scores, atol=1e-4)
