"""Dropout that costs a CPU little, for training the transformers.

torch draws a CPU dropout mask one 32-bit number per element (``bernoulli_``, serially): on 2 AVX2 cores
a pretraining step spent about 14% of its time there, more than in its attention products. Here a
mask takes one 64-bit draw per four elements (each element keeps one 16-bit lane, kept when the lane
is below ``round((1 - p) * 2**16)``: p is exact to 1/65,536), from the same global generator (so
`torch.manual_seed` and a checkpoint's RNG state make runs repeat as before), and the kept values are
scaled by 1/(1 - p) as `torch.nn.functional.dropout` does; the backward multiplies by the same mask.
The distribution is dropout's; the draws are not torch's, so a run trained with it is not bit for bit
one trained without it. ``benchmarks/bench_dropout.py`` times the two.

`cheap_dropout(model, device)` turns it on for a training loop: every ``nn.Dropout`` of `model` is
swapped for `CheapDropout` (the same p), and the models' attention (transformers' "sdpa", whose CPU
dropout is torch's inside `scaled_dot_product_attention`) for ``"drkit_sdpa"``: transformers' own sdpa
attention when not training, on a GPU, without dropout or with anything a plain BERT attention does not
have (grouped keys, a position bias, a head mask, ...), else the same product written out (scores,
additive or boolean mask, softmax, `mask_dropout`, values), as transformers' "eager" attention computes
it. Everything is put back on leaving, so saved models and their configs do not change. On a GPU,
whose dropout is cheap, it does nothing. A transformers without attention and mask interfaces keeps its
own attention (torch's dropout there: slower, not wrong) and gets only the cheap ``nn.Dropout`` swap. A
run resumed from a checkpoint written before this existed continues with these masks.
"""

from __future__ import annotations

import contextlib
import functools
import math

import torch
from torch import nn

ATTENTION = "drkit_sdpa"  # the attention implementation's name while `cheap_dropout` is on


def keep_mask(shape: tuple[int, ...], p: float, device: torch.device | str = "cpu") -> torch.Tensor:
    """A boolean mask of `shape`, each element True with probability 1 - p (to 1/65,536)."""
    n = math.prod(int(s) for s in shape)
    kept = round((1.0 - p) * 65536)  # of the 65,536 values of an int16 lane, uniform over [-32768, 32767]
    if kept >= 65536:  # p under 2**-17: every element kept
        return torch.ones(shape, dtype=torch.bool, device=device)
    threshold = -32768 + kept
    bits = torch.randint(-2**63, 2**63 - 1, ((n + 3) // 4,), dtype=torch.int64, device=device).view(torch.int16)
    return (bits[:n] < threshold).view(shape)


def mask_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """``torch.nn.functional.dropout(x, p, training=True)`` with a mask from `keep_mask`."""
    if p <= 0.0:
        return x
    if p >= 1.0:
        return x * 0.0
    out = torch.where(keep_mask(tuple(x.shape), p, x.device), x, 0.0)  # the backward keeps the boolean mask
    return out.mul_(1.0 / (1.0 - p))  # the scale as a double, as torch's dropout applies it (exact in bf16 too)


class CheapDropout(nn.Dropout):
    """`nn.Dropout` whose mask is `keep_mask`'s."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training or self.p == 0.0:
            return x
        return mask_dropout(x, self.p)


_sdpa = None  # transformers' sdpa attention, bound by `_register`
_NOT_WRITTEN = ("position_bias", "softcap", "head_mask", "s_aux", "sliding_window")  # sdpa's own then


def _attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling: float | None = None,
               **kwargs):
    if (not dropout or not module.training or query.device.type != "cpu" or getattr(module, "is_causal", False)
            or kwargs.get("is_causal") or getattr(module, "num_key_value_groups", 1) != 1
            or any(kwargs.get(k) is not None for k in _NOT_WRITTEN)):
        if _sdpa is None:  # called before `cheap_dropout` registered it (a test calls it directly)
            _register()
        return _sdpa(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling, **kwargs)
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:  # sdpa's masks: True where a position is attended to
            weights = weights.masked_fill(~attention_mask, torch.finfo(weights.dtype).min)
        else:
            weights = weights + attention_mask
    weights = mask_dropout(torch.softmax(weights, dim=-1), dropout)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), None


@functools.lru_cache(maxsize=1)
def _register() -> bool:
    """Register ``"drkit_sdpa"`` with transformers (once); False where transformers has no interface for it."""
    global _sdpa
    try:
        from transformers import AttentionInterface
        from transformers.integrations.sdpa_attention import sdpa_attention_forward
        from transformers.masking_utils import AttentionMaskInterface, sdpa_mask
    except ImportError:
        return False
    _sdpa = sdpa_attention_forward
    AttentionInterface.register(ATTENTION, _attention)
    AttentionMaskInterface.register(ATTENTION, sdpa_mask)
    return True


@contextlib.contextmanager
def cheap_dropout(model: nn.Module, device: torch.device | str):
    """Train `model` with `CheapDropout` and the ``"drkit_sdpa"`` attention inside the block (module
    docstring), on a CPU `device`; on any other device, as it is."""
    if torch.device(device).type != "cpu":
        yield model
        return
    swapped = [(parent, name, child) for parent in model.modules() for name, child in parent.named_children()
               if type(child) is nn.Dropout]  # found first, swapped after: no module tree changes while walked
    for parent, name, child in swapped:
        setattr(parent, name, CheapDropout(child.p, child.inplace).train(child.training))
    configs = {}  # every transformers config a module of `model` reads (a layer copied out of its model has its own)
    if _register():
        from transformers import PretrainedConfig

        for m in model.modules():
            config = getattr(m, "config", None)
            if isinstance(config, PretrainedConfig) and getattr(config, "_attn_implementation", None) == "sdpa":
                configs[id(config)] = config
    configs = list(configs.values())
    for config in configs:
        config._attn_implementation = ATTENTION
    try:
        yield model
    finally:
        for config in configs:
            config._attn_implementation = "sdpa"
        for parent, name, child in swapped:
            child.train(getattr(parent, name).training)
            setattr(parent, name, child)
