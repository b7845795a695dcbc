"""A reader taught by a trained one (`drkit.reader.distill`, ``train-reader --teacher``): the layers the student
keeps, its weights against the teacher's, the soft targets' loss against a plain loop over the definitions, and a
training run with a teacher (recorded, resumable only with the same teacher)."""

import dataclasses
import json
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from test_reader import example, reader_run  # noqa: F401  (reader_run: a fixture)
from test_retrieve import mixing_run, title_corpus, write_jsonl  # noqa: F401  (fixtures)

from drkit.errors import ConfigError
from drkit.reader.distill import kept_layers, soft_loss, student_of
from drkit.reader.examples import OrderConfig
from drkit.reader.model import Reader, ReaderConfig
from drkit.util.artifact import file_checksum


def test_the_student_keeps_the_last_layer_of_each_group():
    assert kept_layers(6, 4) == [1, 2, 4, 5]
    assert kept_layers(6, 3) == [1, 3, 5]
    assert kept_layers(6, 2) == [2, 5]
    assert kept_layers(6, 0) == kept_layers(6, 6) == [0, 1, 2, 3, 4, 5]
    assert kept_layers(2, 1) == [1]
    with pytest.raises(ConfigError, match="has 6"):
        kept_layers(6, 7)


def test_a_student_is_the_teachers_kept_layers_and_heads(tiny_base):
    teacher = Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=96)).eval()
    whole = student_of(teacher, ReaderConfig(base=str(tiny_base), max_pieces=96)).eval()
    e = example()
    f = teacher.featurize(e)
    with torch.no_grad():
        a, b = teacher(**teacher.batch([f])), whole(**whole.batch([f]))
    assert all(torch.equal(a[k], b[k]) for k in a)  # every layer kept: the teacher's outputs
    for p in teacher.parameters():  # as training freezes it
        p.requires_grad_(False)
    one = student_of(teacher, ReaderConfig(base=str(tiny_base), max_pieces=96, layers=1))
    assert all(p.requires_grad for p in one.parameters())  # every weight of the student trains
    assert one.transformer.config.num_hidden_layers == len(one.transformer.encoder.layer) == 1
    t, s = teacher.state_dict(), one.state_dict()
    for k, v in s.items():  # its layer 0 is the teacher's layer 1; the embeddings and heads are the teacher's
        assert torch.equal(v, t[k.replace("encoder.layer.0.", "encoder.layer.1.")]), k
    assert next(one.parameters()).data_ptr() != next(teacher.parameters()).data_ptr()  # a copy: training it leaves the teacher
    with pytest.raises(ConfigError, match="max_pieces 128 against the teacher's 96"):
        student_of(teacher, ReaderConfig(base=str(tiny_base), max_pieces=128, layers=1))


def _reference(student, teacher, features, t):
    """The module docstring's loss, one row and one position at a time in float64."""
    def kl(p_logits, q_logits):
        p = np.exp(p_logits - np.logaddexp.reduce(p_logits))
        q = np.exp(q_logits - np.logaddexp.reduce(q_logits))
        return float(sum(pi * (math.log(pi) - math.log(qi)) for pi, qi in zip(p, q) if pi > 0))

    s = {k: v.detach().double().numpy() for k, v in student.items()}
    q = {k: v.detach().double().numpy() for k, v in teacher.items()}
    parts = [np.mean([kl(q["type"][r] / t, s["type"][r] / t) for r in range(len(features))])]
    for name in ("start", "end"):
        rows = []
        for r in range(len(features)):
            keep = np.isfinite(q["start"][r]) & np.isfinite(s["start"][r])
            if keep.any():
                rows.append(kl(q[name][r][keep] / t, s[name][r][keep] / t))
        parts.append(np.mean(rows))
    bern = []
    for r, f in enumerate(features):
        for m in f.markers:
            p, x = 1 / (1 + math.exp(-q["support"][r, m] / t)), 1 / (1 + math.exp(-s["support"][r, m] / t))
            bern.append(p * math.log(p / x) + (1 - p) * math.log((1 - p) / (1 - x)))
    parts.append(np.mean(bern))
    return float(np.mean(parts)) * t * t


@pytest.mark.parametrize("seed", range(3))
def test_the_soft_loss_is_the_kl_divergence_of_its_definition(seed):
    g = torch.Generator().manual_seed(seed)
    b, length = 3, 20
    content = torch.rand(b, length, generator=g) < 0.6
    content[:, 0] = False
    content[1] = False
    content[1, 7] = True  # a row with one piece of passage text: its start and end match exactly
    def logits():
        span = torch.randn(b, length, 2, generator=g) * 3
        span = span.masked_fill(~content.unsqueeze(-1), float("-inf"))
        return {"type": torch.randn(b, 3, generator=g) * 2, "start": span[..., 0], "end": span[..., 1],
                "support": torch.randn(b, length, generator=g) * 2}

    features = [SimpleNamespace(markers=[1, 5, 9]), SimpleNamespace(markers=[2]), SimpleNamespace(markers=[])]
    student, teacher = logits(), logits()
    for k in student:
        student[k].requires_grad_(True)
    for t in (1.0, 2.0):
        loss, value = soft_loss(student, teacher, content, features, t)
        assert value == pytest.approx(_reference(student, teacher, features, t), rel=1e-5, abs=1e-7)
        loss.backward()
        assert all(torch.isfinite(v.grad).all() for v in student.values())
        _, zero = soft_loss({k: v.detach() for k, v in teacher.items()}, teacher, content, features, t)
        assert zero == pytest.approx(0, abs=1e-6) and value > 0.01


def test_training_with_a_teacher_records_it_and_resumes_only_with_it(mixing_run, reader_run, tiny_base, tmp_path):  # noqa: F811
    from drkit.reader.train import ReaderTrainConfig, train_reader

    d = mixing_run
    config = ReaderTrainConfig(epochs=1, batch_size=4, log_every=1, hops=False, precision="fp32",
                               teacher=str(reader_run.parent))
    args = (d / "corpus1.jsonl", d / "questions1.jsonl", tmp_path / "student", None,
            ReaderConfig(base=str(tiny_base), max_pieces=128, layers=1), OrderConfig(passages=3), config)
    said = []
    path = train_reader(*args, log=said.append)
    assert any("taught by" in s and "starting from 1 of its layers" in s for s in said), said
    log = [json.loads(line) for line in (path.parent / "train_log.jsonl").read_text().splitlines()]
    assert log and all(np.isfinite(r["distill"]) and r["distill"] >= 0 for r in log)
    student = Reader.load(path)
    assert student.config.layers == 1 and len(student.transformer.encoder.layer) == 1
    assert student.manifest["training"]["teacher"] == str(reader_run)
    taught = Reader.load(reader_run).state_dict()
    moved = [k for k, v in student.state_dict().items() if k.startswith("transformer.encoder.layer.0.")
             and not torch.equal(v, taught[k.replace("encoder.layer.0.", "encoder.layer.1.")])]
    assert moved, "the student's transformer did not train"
    run = json.loads((path.parent / "run.json").read_text())
    assert run["inputs"]["teacher"] == file_checksum(reader_run / "model.safetensors")
    assert student.read([example()])[0].answer_type in ("span", "yes", "no")
    with pytest.raises(ConfigError, match="other settings"):  # the same run with another teacher
        train_reader(*args[:-1], dataclasses.replace(config, teacher=str(path.parent)), log=lambda *a: None)
    with pytest.raises(ConfigError, match="distill_weight"):
        ReaderTrainConfig(distill_weight=1.5)
    with pytest.raises(ConfigError, match="does not exist"):
        train_reader(*args[:-1], dataclasses.replace(config, teacher=str(tmp_path / "none")), log=lambda *a: None)
