"""int8 dynamic quantisation of a transformer's Linear layers on a CPU: the question encoder's for answering
(``--quantize int8``), the reader's (``--reader-quantize int8``), the mention encoder's for embedding
(``drkit embed --quantize int8``, `drkit.dense.embedding.mention_encoder`).

The Linear layers inside the transformer's layers (attention and feed-forward) are replaced by torch's
dynamically quantised ones: weights stored as int8, activations quantised per batch, computed by FBGEMM on
x86 (AVX2 is enough). Of a question encoder the rest stays fp32: the entity embeddings, the hop projections V_t
and U_t, the mention vectors and the sparse follow. At batch 1 the question encoder dominates a question's time (about
60% of it for the 2Wiki hop-mixing model), and it is where int8 helps: measured in
`benchmarks/bench_quantize.py` (on 2 AVX2 cores, 2Wiki retrieval at batch 1 went from 27.9 / 25.6 to 37.4 /
33.2 questions/s on the two folds, R@5 from 0.952 / 0.934 to 0.951 / 0.933). torch marks these quantisation
APIs for a move to torchao in a later release; where they are gone, ``--quantize int8`` says so.
"""

from __future__ import annotations

import warnings

import torch

from drkit.errors import ConfigError

QUANTIZE = ("none", "int8")


def transformer_linears(model: torch.nn.Module) -> list[str]:
    """The names of the Linear layers of `model` that sit inside a Hugging Face transformers module (its
    attention and feed-forward layers), in the order `named_modules` gives."""
    inside: list[str] = []
    for name, module in model.named_modules():
        if type(module).__module__.startswith("transformers."):
            inside += [f"{name}.{child}" if name else child for child, m in module.named_modules()
                       if child and isinstance(m, torch.nn.Linear)]
    return sorted(set(inside), key=inside.index)


def quantize_transformer(model: torch.nn.Module, compute_precision: str) -> int:
    """Quantise `model`'s transformer Linear layers to int8 in place (it must be on the CPU, answering in fp32:
    `compute_precision` is the resolved precision). Returns how many layers were quantised. The question
    encoder of a DrKIT model and the reader (`drkit.reader.model.Reader`) both go through it."""
    if compute_precision != "fp32":
        raise ConfigError(f"--quantize int8 keeps the activations in fp32; it does not go with --precision "
                          f"{compute_precision} (pass --precision fp32)")
    if any(p.device.type != "cpu" for p in model.parameters()):
        raise ConfigError("--quantize int8 is for answering on a CPU; the model is on a GPU (pass --device cpu)")
    if "fbgemm" in torch.backends.quantized.supported_engines:
        torch.backends.quantized.engine = "fbgemm"
    names = transformer_linears(model)
    if not names:
        raise ConfigError("--quantize int8: the model has no transformer Linear layer to quantise")
    try:
        spec = {name: torch.ao.quantization.default_dynamic_qconfig for name in names}
        with warnings.catch_warnings():  # torch's own notice that these APIs will move (to torchao): not the user's
            warnings.filterwarnings("ignore", message=".*quantize_per_tensor.*deprecated", category=UserWarning)
            warnings.filterwarnings("ignore", message="torch.ao.quantization is deprecated", category=DeprecationWarning)
            torch.ao.quantization.quantize_dynamic(model, spec, dtype=torch.qint8, inplace=True)
    except (AttributeError, RuntimeError) as exc:
        raise ConfigError(f"--quantize int8 is not available in this torch ({torch.__version__}): {exc}") from None
    return len(names)
