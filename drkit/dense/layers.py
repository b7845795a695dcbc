"""BERT layers at inference without transformers' per-call machinery.

transformers' `BertLayer` spends, on every call, a good part of a short question's time in Python
(keyword deprecation wrappers, `inspect.signature`, the attention-interface lookup, feed-forward
chunking): on 2 AVX2 cores a 24-piece question through one MiniLM layer took 4.4 ms that way and 3.7 ms
here (`benchmarks/bench_layers.py`), its products alone about 1.7. `bert_layer` computes the same layer
with the same operations in the same order (three projections, `scaled_dot_product_attention` with the
additive mask and the layer's scale, the two residual layer norms, the activation), so its output is
the layer's own, bit for bit; `tests/test_layers.py` checks that. It is used only where it is the
same computation: an `eval()` layer (no dropout) of a plain encoder (no cross-attention, no
decoder, no chunked feed-forward) whose attention is "sdpa" (or `drkit.dense.dropout`'s, which is sdpa in
`eval()`); any other layer runs as itself. A Linear
that is not a plain `nn.Linear` is called as itself inside the lean path, but for torch's int8 dynamic one
(``--quantize int8``'s), whose quantised product is called directly (`_linear`).
`hidden_states` does the same for a whole `BertModel` (embeddings, then its layers); it gains where
sequences are short (a query), and little at 512 pieces, where the products dominate.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from drkit.dense.dropout import ATTENTION  # sdpa's own when not training

NEEDED = ("attention.self.query", "attention.self.key", "attention.self.value", "attention.self.attention_head_size",
          "attention.self.scaling", "attention.output.dense", "attention.output.LayerNorm", "intermediate.dense",
          "intermediate.intermediate_act_fn", "output.dense", "output.LayerNorm")  # what `bert_layer` reads


def _has(obj, path: str) -> bool:
    for name in path.split("."):
        if not hasattr(obj, name):
            return False
        obj = getattr(obj, name)
    return True


def _lean(layer) -> bool:
    """Whether `bert_layer` may compute `layer` itself (see the module's docstring)."""
    cached = getattr(layer, "_drkit_lean", None)
    if cached is None:
        from transformers.models.bert.modeling_bert import BertLayer

        attn = getattr(getattr(layer, "attention", None), "self", None)
        config = getattr(attn, "config", None)
        cached = (type(layer) is BertLayer and not layer.is_decoder and not layer.add_cross_attention
                  and not layer.chunk_size_feed_forward and config is not None
                  and getattr(config, "_attn_implementation", None) in ("sdpa", ATTENTION)
                  and all(_has(layer, path) for path in NEEDED))  # a transformers without them: its own layer
        layer._drkit_lean = cached
    return cached and not layer.training


def bert_layer(layer, h: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """``layer(h, mask)`` for a transformers `BertLayer`: h (B, L, hidden), `mask` the additive
    (B, 1, 1, L) attention mask (or None). The lean path where `_lean` allows it, else the layer."""
    if not _lean(layer):
        return layer(h, mask)
    att = layer.attention.self
    shape = (*h.shape[:-1], -1, att.attention_head_size)
    q = _linear(att.query, h).view(shape).transpose(1, 2)
    k = _linear(att.key, h).view(shape).transpose(1, 2)
    v = _linear(att.value, h).view(shape).transpose(1, 2)
    ctx = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=att.scaling, is_causal=False)
    ctx = ctx.transpose(1, 2).contiguous().reshape(*h.shape[:-1], -1)
    out = layer.attention.output
    h = _norm(out.LayerNorm, _linear(out.dense, ctx) + h)
    inner = layer.intermediate
    inner = inner.intermediate_act_fn(_linear(inner.dense, h))
    out = layer.output
    return _norm(out.LayerNorm, _linear(out.dense, inner) + h)


def _linear(module, x: torch.Tensor) -> torch.Tensor:
    """A plain `nn.Linear` as its function; torch's int8 dynamically quantised Linear (``--quantize int8``) as the
    op its forward calls, with the same arguments (the module call and the op's Python dispatch cost about 20 us,
    48 times a question); any other as itself."""
    kind = type(module)
    if kind is nn.Linear:
        return F.linear(x, module.weight, module.bias)
    if kind.__name__ == "Linear" and kind.__module__ == _DYNAMIC_LINEAR:
        packed = module._packed_params
        if packed.dtype == torch.qint8:
            op = torch.ops.quantized.linear_dynamic.default
            if module.version is None or module.version < 4:
                return op(x, packed._packed_params).to(x.dtype)
            return op(x, packed._packed_params, True).to(x.dtype)  # reduce_range=True, as its forward
    return module(x)


_DYNAMIC_LINEAR = "torch.ao.nn.quantized.dynamic.modules.linear"  # where torch's dynamic int8 Linear lives


def _norm(norm, x: torch.Tensor) -> torch.Tensor:
    return F.layer_norm(x, norm.normalized_shape, norm.weight, norm.bias, norm.eps)


def additive_mask(mask: torch.Tensor) -> torch.Tensor:
    """(B, L) 0/1 -> (B, 1, 1, L) additive attention mask: 0 where attended, float32's lowest elsewhere."""
    return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min


def hidden_states(model, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """``model(input_ids=..., attention_mask=...).last_hidden_state`` (B, L, hidden) of a transformers model;
    for an `eval()` `BertModel` whose every layer `bert_layer` computes itself, its embeddings and then those
    layers, the same values bit for bit (`tests/test_layers.py`)."""
    from transformers.models.bert.modeling_bert import BertModel

    if type(model) is BertModel and not model.training and all(_lean(layer) for layer in model.encoder.layer):
        h = model.embeddings(input_ids=input_ids)
        mask = additive_mask(attention_mask)
        for layer in model.encoder.layer:
            h = bert_layer(layer, h, mask)
        return h
    return model(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
