"""Embedding mentions: f(m) = [f_start ; f_end] of every mention of a sparse index, computed passage by passage
(each passage unpadded, in a batch of its length, so that a vector depends on its passage alone; with
``quantize="int8"`` a little on its batch too, whose activations are quantised together). Below
both `drkit.dense.mentions` (the artifact, its local build) and `drkit.dense.embed_ray` (the same batches on
Ray), which both import it."""

from __future__ import annotations

import copy
import hashlib
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import torch

from drkit.dense.encoder import DualEncoder
from drkit.dense.quantize import QUANTIZE, quantize_transformer
from drkit.errors import ConfigError
from drkit.index.sparse import SparseIndex
from drkit.util.artifact import file_checksum
from drkit.util.hardware import Compute, choose, device_field, precision_field, state
from drkit.util.progress import progress
from drkit.util.warnlog import WarningLog

FP16_MAX = float(np.finfo(np.float16).max)
CHECKPOINT_S = 30.0  # seconds between the progress records of a resumable `drkit.dense.mentions.build_mention_index`


@dataclass(frozen=True)
class EmbedConfig:
    """How mentions are embedded."""

    batch_tokens: int = field(default=8192, metadata={"help": "word pieces per encoder batch (each batch holds passages of one length, so none is padded)"})
    precision: str = precision_field("the mention encoder (vectors are stored in fp16 either way)")
    device: str = device_field("the mention encoder")
    quantize: str = field(default="none", metadata={
        "help": "none, or int8: the passage transformer's Linear layers as int8 dynamic quantisation (on the CPU, "
                "which --device auto then means; activations in fp32; about 1.5x faster, the vectors close to "
                "fp32's but not equal: docs/precision.md)",
        "choices": QUANTIZE})

    def __post_init__(self):
        if self.batch_tokens < 1:
            raise ConfigError("batch_tokens must be at least 1")
        if self.quantize not in QUANTIZE:
            raise ConfigError(f"quantize must be 'none' or 'int8', got {self.quantize!r}")
        if self.quantize == "int8" and self.device == "cuda":
            raise ConfigError("--quantize int8 embeds on the CPU (torch's int8 dynamic quantisation has no GPU "
                              "kernels); pass --device cpu or auto, or --quantize none on the GPU")
        if self.quantize == "int8" and self.precision not in ("auto", "fp32"):
            raise ConfigError(f"--quantize int8 keeps the activations in fp32; it does not go with --precision "
                              f"{self.precision}")

    def compute(self):
        """The `drkit.util.hardware.Compute` the encoder runs with: with int8, fp32 on the CPU (what `auto` then means)."""
        if self.quantize == "int8":
            return state(Compute(torch.device("cpu"), "fp32", "int8 dynamic quantisation: its layers compute in fp32 "
                                 "on the CPU"), verb="embedding")
        return choose(self.precision, self.device)

    def resolved(self) -> "EmbedConfig":
        """The settings with precision and device as this machine resolves them (what a manifest records)."""
        compute = self.compute()
        return replace(self, precision=compute.precision, device=compute.device.type)

    @classmethod
    def from_manifest(cls, config: dict) -> "EmbedConfig":
        """The settings a mention index was embedded with, to embed more mentions alike (`drkit add`,
        `compact`): its precision (``bf16: true/false`` before the setting existed); the device is this
        machine's choice."""
        config = dict(config)
        if "bf16" in config:
            config["precision"] = "bf16" if config.pop("bf16") else "fp32"
        config.pop("device", None)
        if config.get("precision") == "fp16" and not torch.cuda.is_available():
            config["precision"] = "fp32"  # fp16 is a GPU's; a CPU embeds the new passages in fp32
        return cls(**config)


def encoder_identity(encoder_dir: str | Path) -> dict:
    """The encoder's weights and where they are, as an absolute path (a relative one would be read against
    whatever folder a later command runs in)."""
    return {"path": str(Path(encoder_dir).resolve()),
            "sha256": file_checksum(Path(encoder_dir) / "model.safetensors")["sha256"]}


def vectors_key(manifest: dict) -> str:
    """A short fingerprint of a mention index's encoder weights and embedding settings."""
    blob = json.dumps({"encoder": manifest["encoder"]["sha256"], "config": manifest.get("config"),
                       "dim": manifest.get("dim")}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def index_identity(index: SparseIndex) -> dict:
    return {"path": str(index.path), "mentions_sha256": file_checksum(index.path / "mentions.npy")["sha256"],
            "mentions": index.n_mentions}


def length_batches(lengths: np.ndarray, batch_tokens: int):
    """Batches of passages of one length each, shortest first, of at most `batch_tokens` tokens (at least one
    passage). No passage is padded, so a mention's vector depends on its passage alone, not on the batch it
    falls in: a passage embedded by `drkit add` or reused by `drkit compact` gets the vector a build gives it."""
    order = np.argsort(lengths, kind="stable")
    batch: list[int] = []
    width = -1
    for p in order:
        length = int(lengths[p]) + 2
        if batch and (length != width or length * (len(batch) + 1) > batch_tokens):
            yield batch
            batch = []
        batch.append(int(p))
        width = length
    if batch:
        yield batch


def mention_encoder(encoder: DualEncoder, config: EmbedConfig) -> DualEncoder:
    """`encoder` ready to embed with `config`: in eval mode on its device; with ``quantize="int8"`` a copy whose
    passage transformer is int8 (`drkit.dense.quantize.quantize_transformer`; the caller's stays as it is)."""
    compute = config.compute()
    encoder = encoder.eval().to(compute.device)
    if config.quantize == "int8":
        encoder = copy.deepcopy(encoder)
        quantize_transformer(encoder.passage_model, compute.precision)
    return encoder


def embed_batch(index: SparseIndex, encoder: DualEncoder, mentions: np.ndarray, rows: list[np.ndarray],
                 passages: np.ndarray, config: EmbedConfig) -> list[tuple[np.ndarray, np.ndarray]]:
    """f(m) of the mentions `rows[i]` of each passage `passages[i]`, one encoder batch: [(mention ids, fp16 (n, p))]."""
    vecs = encoder.embed_mentions([index.passage_pieces(int(p)) for p in passages],
                                  [mentions[r, 2] for r in rows], [mentions[r, 3] for r in rows],
                                  precision=config.precision)
    out = []
    for r, v in zip(rows, vecs):
        if not np.isfinite(v).all() or np.abs(v).max() > FP16_MAX:
            raise FloatingPointError(f"mention vectors of passage {int(mentions[r[0], 1])} overflow fp16")
        out.append((r, v.astype(np.float16)))
    return out


def batch_plan(index: SparseIndex, config: EmbedConfig, passages: np.ndarray | None = None) -> list[np.ndarray]:
    """The passages of each encoder batch, in the order a build embeds them (by length); `passages`: only
    these (of those with mentions)."""
    lengths = np.diff(np.asarray(index.piece_offsets))
    with_mentions = np.flatnonzero(np.diff(index.passage_mention_indptr) > 0)
    if passages is not None:
        with_mentions = np.intersect1d(with_mentions, passages)
    return [with_mentions[b] for b in length_batches(lengths[with_mentions], config.batch_tokens)]


def mention_rows(indptr: np.ndarray, passages: np.ndarray) -> list[np.ndarray]:
    """The mention ids of each passage (mentions are stored in passage order)."""
    return [np.arange(indptr[p], indptr[p + 1]) for p in passages]


def warn_empty_passages(index: SparseIndex, warnings: WarningLog) -> None:
    empty = int((np.diff(np.asarray(index.piece_offsets)) == 0).sum())
    if empty:
        warnings.add("empty_passage", "passages with no word pieces have no mentions to embed", count=empty)


def embed_timing(index: SparseIndex, plan: list[np.ndarray], seconds: float, embedded: int) -> dict:
    """The figures a mention index records of its embedding run."""
    lengths = np.diff(np.asarray(index.piece_offsets))
    passages = np.concatenate(plan) if plan else np.zeros(0, np.int64)
    return {"seconds": round(seconds, 2), "mentions_per_s": round(embedded / max(seconds, 1e-9), 1),
            "passages": int(len(passages)), "tokens": int(lengths[passages].sum() + 2 * len(passages))}


def embed_mentions(index: SparseIndex, encoder: DualEncoder, config: EmbedConfig = EmbedConfig(),
                   warnings: WarningLog | None = None, out: np.ndarray | None = None, skip_batches: int = 0,
                   checkpoint=None) -> tuple[np.ndarray, dict]:
    """f(m) for every mention of `index`: (M, p) float16, and timing figures.

    `out`: the (M, p) float16 array to fill (a memory map: the vectors go to disk as they are computed);
    by default a new one in memory. The passages are embedded in a fixed order of batches;
    `skip_batches` leaves the first ones out (a resumed build whose `out` holds them already), and
    `checkpoint(batches_done)` is called every `CHECKPOINT_S` seconds and at the end."""
    warnings = warnings if warnings is not None else WarningLog()
    config = config.resolved()
    mentions = np.asarray(index.mentions)
    indptr = index.passage_mention_indptr
    warn_empty_passages(index, warnings)
    plan = batch_plan(index, config)
    if out is None:
        out = np.zeros((len(mentions), encoder.config.dim), dtype=np.float16)
    elif out.shape != (len(mentions), encoder.config.dim) or out.dtype != np.float16:
        raise ValueError(f"out must be ({len(mentions)}, {encoder.config.dim}) float16, got {out.shape} {out.dtype}")
    encoder = mention_encoder(encoder, config)
    t = last = time.perf_counter()
    done = embedded = 0
    with torch.inference_mode(), progress(total=len(mentions), desc="embed", unit="mention") as bar:
        for n, ps in enumerate(plan):
            rows = mention_rows(indptr, ps)
            if n < skip_batches:  # embedded by an earlier, interrupted build
                bar.update(sum(len(r) for r in rows))
                done = n + 1
                continue
            for r, v in embed_batch(index, encoder, mentions, rows, ps, config):
                out[r] = v
            bar.update(sum(len(r) for r in rows))
            embedded += sum(len(r) for r in rows)
            done = n + 1
            if checkpoint is not None and time.perf_counter() - last >= CHECKPOINT_S:
                checkpoint(done)
                last = time.perf_counter()
    if checkpoint is not None:
        checkpoint(done)
    timing = embed_timing(index, plan, time.perf_counter() - t, embedded)
    if skip_batches:
        timing["resumed_after_batches"] = int(min(skip_batches, done))
    return out, timing
