"""The settings of the front door (`drkit.qa.pipeline.DrKIT`): how `DrKIT.load` builds the virtual KB
(`LoadConfig`: MIPS, precision, device, int8) and the per-call overrides of `DrKIT.answer` (`QueryConfig`).
Every command that loads a model takes their fields as flags (`drkit.cli.flags`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from drkit.dense.mips import MIPS_KINDS
from drkit.dense.quantize import QUANTIZE
from drkit.errors import ConfigError
from drkit.reason.follow import RETRIEVALS, FollowConfig
from drkit.util.hardware import device_field, precision_field

_FOLLOW_HELP = {f.name: f.metadata["help"] for f in dataclasses.fields(FollowConfig)}


@dataclass(frozen=True)
class LoadConfig:
    """How `DrKIT.load` builds the virtual KB."""

    mips: str = field(default="exact", metadata={
        "help": "MIPS over all mentions for global retrieval: exact (blocks in the score dtype in memory), faiss (IVF over the "
                "vectors) or ivfpq (IVF-PQ codes in memory, the short list scored again exactly from the memory-mapped "
                "vectors); faiss and ivfpq imply --retrieval global", "choices": MIPS_KINDS})
    ann: str | None = field(default=None, metadata={
        "help": "with --mips ivfpq: the IVF-PQ index 'drkit ann' saved for the mention index (without it the "
                "codes are trained when the model loads)", "type": str})
    nprobe: int = field(default=32, metadata={
        "help": "with --mips faiss or ivfpq: IVF lists a search visits (more: higher recall, slower)", "type": int})
    rerank: int = field(default=4, metadata={
        "help": "with --mips ivfpq: the best rerank x K candidates of the codes are scored again exactly (more: "
                "higher recall, slower)", "type": int})
    precision: str = precision_field("the question encoder and the mention scores")
    device: str = device_field("the question encoder and the mention scores")
    quantize: str = field(default="none", metadata={
        "help": "int8: the question encoder's transformer layers as int8 dynamic quantisation (CPU, fp32; "
                "benchmarks/bench_quantize.py measures its speed and recall against fp32)", "choices": QUANTIZE})


@dataclass(frozen=True)
class QueryConfig:
    """Per-call settings of `DrKIT.answer`; None keeps what the model was trained with."""

    hops: int | None = field(default=None, metadata={"help": "hops to run (at most the model's)", "type": int})
    top_k: int | None = field(default=None, metadata={"help": _FOLLOW_HELP["top_k"], "type": int})
    retrieval: str | None = field(default=None, metadata={"help": _FOLLOW_HELP["retrieval"], "choices": RETRIEVALS})
    min_weight: float | None = field(default=None, metadata={"help": _FOLLOW_HELP["min_weight"], "type": float})

    def __post_init__(self):
        if self.hops is not None and self.hops < 1:
            raise ConfigError(f"hops must be at least 1, got {self.hops}")

    def follow_config(self, base: FollowConfig) -> FollowConfig:
        """`base` with this call's overrides (FollowConfig checks their values)."""
        overrides = {k: v for k, v in (("top_k", self.top_k), ("retrieval", self.retrieval),
                                       ("min_weight", self.min_weight)) if v is not None}
        return dataclasses.replace(base, **overrides) if overrides else base
