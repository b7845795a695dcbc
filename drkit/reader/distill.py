"""A shallower reader taught by a trained one (knowledge distillation; ``drkit train-reader --teacher``).

The student starts as the teacher with fewer transformer layers: of the teacher's n layers it keeps k, the last of
each of k equal groups (`kept_layers`: 4 of 6 keeps the 2nd, 3rd, 5th and 6th), so its top layer is the one the
teacher's heads read; the heads are the teacher's. It then trains on the same examples as any reader, its loss

    (1 - w) * (the reader's own loss, `drkit.reader.model.Reader.loss`) + w * (the teacher's soft targets)

with the soft targets at temperature T (Hinton et al., 2015; DistilBERT's start from every other layer of its
teacher): the answer type's distribution, the start and the end distributions over the passages' pieces, and
each sentence marker's probability of being evidence, each matched by its cross-entropy less the teacher's own
entropy (a KL divergence, 0 where the student's outputs are the teacher's), times T^2, and their mean.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Sequence

import torch
from torch.nn import functional as F

from drkit.errors import ConfigError
from drkit.reader.model import Reader, keep_layers, layer_stack


def kept_layers(n: int, k: int) -> list[int]:
    """Which of a teacher's `n` layers (numbered from 0) a student of `k` keeps: the last of each of `k` equal
    groups; every layer when `k` is 0 or `n`. More than `n` is a `ConfigError`."""
    if k < 0 or k > n:
        raise ConfigError(f"a student of {k} layers: its teacher has {n}")
    k = k or n
    return [math.ceil((i + 1) * n / k) - 1 for i in range(k)]


def student_of(teacher, config):
    """A `drkit.reader.model.Reader` of `config` (a `ReaderConfig`: its ``layers`` the student's, 0 for as many as
    the teacher's) made from `teacher`: a copy of its weights with `kept_layers` of its transformer's layers and its
    heads. `config` must read as the teacher does otherwise (same base, same word pieces): a `ConfigError` says
    which setting differs."""
    same = {f.name for f in dataclasses.fields(config)} - {"layers"}
    differ = [f"{name} {getattr(config, name)!r} against the teacher's {getattr(teacher.config, name)!r}"
              for name in sorted(same) if getattr(config, name) != getattr(teacher.config, name)]
    if differ:
        raise ConfigError(f"the student reads as its teacher does: {'; '.join(differ)}")
    transformer = copy.deepcopy(teacher.transformer)
    stack = layer_stack(transformer, "the teacher's transformer has no encoder.layer stack to take layers from")
    keep_layers(transformer, stack, kept_layers(len(stack), config.layers))
    for p in transformer.parameters():  # a frozen teacher's copies would stay frozen
        p.requires_grad_(True)
    student = Reader(config, transformer, teacher.tokenizer)
    for name in ("answer_type", "span", "support"):
        getattr(student, name).load_state_dict(getattr(teacher, name).state_dict())
    return student.to(teacher.device)


def soft_loss(student: dict, teacher: dict, content: torch.Tensor, features: Sequence,
              temperature: float) -> tuple[torch.Tensor, float]:
    """The mean over the four outputs of KL(teacher || student) at `temperature`, times its square (module
    docstring), over a batch of `features` (`drkit.reader.features.Features`) whose logits the two readers gave
    (`Reader.forward`), the span over the batch's passage text `content` (B, L; `Reader.batch`); and it as a
    float."""
    t = temperature
    dev = student["type"].device
    parts = [_kl(student["type"] / t, teacher["type"].float() / t, torch.ones_like(student["type"], dtype=torch.bool))]
    for name in ("start", "end"):
        parts.append(_kl(student[name] / t, teacher[name].float() / t, content))
    rows = [(r, m) for r, f in enumerate(features) for m in f.markers]
    if rows:
        r, m = (torch.tensor(x, device=dev) for x in zip(*rows))
        s, q = student["support"][r, m] / t, torch.sigmoid(teacher["support"][r, m].float() / t)
        # binary cross-entropy less the teacher's entropy: KL of the two Bernoulli distributions
        parts.append((F.binary_cross_entropy_with_logits(s, q) - F.binary_cross_entropy(q, q)).clamp_min(0))
    loss = torch.stack(parts).mean() * t * t
    return loss, float(loss.detach())


def _kl(student: torch.Tensor, teacher: torch.Tensor, where: torch.Tensor) -> torch.Tensor:
    """Mean over rows of KL(softmax(teacher) || softmax(student)) over the positions `where` of each row (B, L);
    rows with no such position are left out (0 where none has one)."""
    rows = where.any(-1)
    if not bool(rows.any()):
        return student.new_zeros(())
    student, teacher, where = student[rows], teacher[rows], where[rows]
    s = torch.log_softmax(student.masked_fill(~where, float("-inf")), -1)
    q = torch.log_softmax(teacher.masked_fill(~where, float("-inf")), -1)
    kl = torch.where(where, q.exp() * (q - s), torch.zeros_like(s)).sum(-1)
    return kl.mean()
