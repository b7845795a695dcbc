"""``--quantize int8``: the question encoder's transformer Linear layers become int8 dynamically quantised ones
(and nothing else does), answers and rankings stay close to fp32's, and the settings it cannot go with are
refused with the reason."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from serve_fixtures import QUESTIONS, sample_run  # noqa: F401  (a fixture)
from test_retrieve import mixing_run  # noqa: F401  (a fixture)

from drkit.dense.quantize import quantize_transformer, transformer_linears
from drkit.errors import ConfigError
from drkit.qa.pipeline import DrKIT, LoadConfig

pytest.importorskip("torch.ao.quantization")


def quantized(model) -> list[str]:
    return [n for n, m in model.named_modules() if "quantized" in type(m).__module__ and type(m).__name__ == "Linear"]


def test_only_the_transformer_linears_are_quantised(mixing_run):  # noqa: F811
    d = mixing_run
    fp32 = DrKIT.load(d / "index1", d / "run", config=LoadConfig(precision="fp32"))
    names = transformer_linears(fp32.model)
    assert names and all(isinstance(dict(fp32.model.named_modules())[n], torch.nn.Linear) for n in names)
    plain = {n for n, m in fp32.model.named_modules() if isinstance(m, torch.nn.Linear)} - set(names)
    int8 = DrKIT.load(d / "index1", d / "run", config=LoadConfig(precision="fp32", quantize="int8"))
    assert quantized(int8.model) == names  # every transformer Linear, and only those
    assert {n for n, m in int8.model.named_modules() if type(m) is torch.nn.Linear} == plain  # the rest stays fp32
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()[:8]]
    a, b = fp32.retriever.retrieve(questions, 5), int8.retriever.retrieve(questions, 5)
    assert np.allclose([r.pi for r in a], [r.pi for r in b], atol=0.05)  # the hop weights barely move
    overlap = [len(set(x.articles) & set(y.articles)) / max(len(x.articles), 1) for x, y in zip(a, b)]
    assert np.mean(overlap) >= 0.8, overlap  # and the top 5 passages mostly stay


def test_a_multi_hop_model_answers_alike_in_int8(sample_run):  # noqa: F811
    fp32 = DrKIT.load(*sample_run, config=LoadConfig(precision="fp32"))
    int8 = DrKIT.load(*sample_run, config=LoadConfig(precision="fp32", quantize="int8"))
    assert len(quantized(int8.model)) == len(transformer_linears(fp32.model)) > 0
    a, b = fp32.answer_batch(QUESTIONS, top=5), int8.answer_batch(QUESTIONS, top=5)
    for x, y in zip(a, b):
        assert x.question_entity_id == y.question_entity_id
        assert len({e.entity_id for e in x.answers} & {e.entity_id for e in y.answers}) >= 3


def test_settings_it_cannot_go_with_are_refused(sample_run):  # noqa: F811
    with pytest.raises(ConfigError, match="pass --precision fp32"):
        quantize_transformer(torch.nn.Linear(2, 2), "bf16")
    with pytest.raises(ConfigError, match="no transformer Linear layer"):
        quantize_transformer(torch.nn.Sequential(torch.nn.Linear(2, 2)), "fp32")
    with pytest.raises(ConfigError, match="quantize must be one of"):
        DrKIT.load(*sample_run, config=LoadConfig(quantize="int4"))
