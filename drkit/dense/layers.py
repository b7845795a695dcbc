"""BERT layers at inference without transformers' per-call machinery.

transformers' `BertLayer` spends, on every call, a good part of a short question's time in Python
(keyword deprecation wrappers, `inspect.signature`, the attention-interface lookup, feed-forward
chunking): on 2 AVX2 cores a 24-piece question through one MiniLM layer took 4.4 ms that way and 3.7 ms
here (`benchmarks/bench_layers.py`), its products alone about 1.7. `bert_layer` computes the same layer
with the same operations in the same order (three projections, `scaled_dot_product_attention` with the
additive mask and the layer's scale, the two residual layer norms, the activation), so its output is
the layer's own, bit for bit, except that an fp32 product of 8 to 48 rows on the CPU (a question alone),
outside autograd, multiplies by the weight stored transposed (`_transposed`: MKL on AVX-512 is 2 to 4x faster so),
whose sums may differ from `F.linear`'s in their last bits; `tests/test_layers.py` checks both. It is used
only where it is the
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
    """A plain `nn.Linear` as its function, or as a product with its weight stored transposed where `_transposed`
    gives that; torch's int8 dynamically quantised Linear (``--quantize int8``) as the op its forward calls, with
    the same arguments (the module call and the op's Python dispatch cost about 20 us, 48 times a question); any
    other as itself."""
    kind = type(module)
    if kind is nn.Linear:
        wt = _transposed(module, x)
        if wt is None:
            return F.linear(x, module.weight, module.bias)
        rows = x.reshape(-1, x.shape[-1])
        out = rows @ wt if module.bias is None else torch.addmm(module.bias, rows, wt)
        return out.view(*x.shape[:-1], wt.shape[1])
    if kind.__name__ == "Linear" and kind.__module__ == _DYNAMIC_LINEAR:
        packed = module._packed_params
        if packed.dtype == torch.qint8:
            op = torch.ops.quantized.linear_dynamic.default
            if module.version is None or module.version < 4:
                return op(x, packed._packed_params).to(x.dtype)
            return op(x, packed._packed_params, True).to(x.dtype)  # reduce_range=True, as its forward
    return module(x)


_DYNAMIC_LINEAR = "torch.ao.nn.quantized.dynamic.modules.linear"  # where torch's dynamic int8 Linear lives

TRANSPOSED_ROWS = (8, 48)  # fp32 products of so many rows on the CPU use the weight stored transposed


def _transposed(module: nn.Linear, x: torch.Tensor) -> torch.Tensor | None:
    """The (in, out) contiguous copy of `module`'s weight, for ``x @ W^T`` as a product with a plain matrix, or
    None where `F.linear` is kept: rows outside `TRANSPOSED_ROWS`, not fp32 on the CPU, autocast on, or
    autograd on (the copy carries no gradient to the weight). MKL's fp32 product with a transposed right
    factor, which `F.linear` asks for, is slow for 8 to 48 rows (a question alone): on 2 AVX-512 cores a
    24-row product by MiniLM's 384 x 1536 weight took 0.59 ms that way and 0.24 ms with the weight stored
    transposed; from 64 rows on, and for one row, `F.linear` is as fast or faster (`benchmarks/bench_products.py`).
    The copy is made once and made again when the weight changes: another tensor (the cache holds the weight it
    was made from, so a new weight cannot take its address), another storage, or a write in place (its version
    counter). Its sums may round differently from `F.linear`'s in the last bits."""
    if torch.is_grad_enabled() or x.dtype is not torch.float32 or x.device.type != "cpu":
        return None
    rows = x.numel() // max(x.shape[-1], 1)
    w = module.weight
    if not TRANSPOSED_ROWS[0] <= rows <= TRANSPOSED_ROWS[1] or w.dtype is not torch.float32 or \
            torch.is_autocast_enabled("cpu"):
        return None
    key = (w._version, w.data_ptr())
    cached = module.__dict__.get("_drkit_transposed")
    if cached is None or cached[0] is not w or cached[1] != key:
        with torch.inference_mode(False), torch.no_grad():
            cached = (w, key, w.detach().t().contiguous())
        module.__dict__["_drkit_transposed"] = cached
    return cached[2]


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
