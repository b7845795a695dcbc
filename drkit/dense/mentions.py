"""The dense mention index: f(m) for every mention of a sparse index, computed once, stored in fp16.

Artifact format ``drkit.mention_index``: ``mention_vectors.npy`` (M, p) float16, row m = mention m of
the sparse index (memory-mapped when loaded), and ``manifest.json`` recording the encoder (path and
checksum of its weights), the sparse index it belongs to (checksum of its mention table) and the
embedding run's throughput. `MentionIndex.searcher` gives exact or approximate MIPS behind
``search(queries, k) -> (scores, ids)`` (`drkit.dense.mips`).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from drkit.dense.encoder import DualEncoder
from drkit.dense.mips import MIPS_KINDS, ExactMIPS, FaissMIPS
from drkit.errors import ArtifactError, ConfigError
from drkit.index.sparse import SparseIndex
from drkit.util.artifact import ArtifactWriter, file_checksum, load_array, read_manifest
from drkit.util.progress import progress
from drkit.util.warnlog import WarningLog

FORMAT = "drkit.mention_index"
FORMAT_VERSION = 1
FP16_MAX = float(np.finfo(np.float16).max)
CHECKPOINT_S = 30.0  # seconds between the progress records of a resumable `build_mention_index`


@dataclass(frozen=True)
class EmbedConfig:
    """How mentions are embedded."""

    batch_tokens: int = field(default=8192, metadata={"help": "word pieces per encoder batch (passages sorted by length)"})
    bf16: bool = field(default=True, metadata={"help": "bf16 autocast on the CPU (vectors are stored in fp16 either way)"})

    def __post_init__(self):
        if self.batch_tokens < 1:
            raise ConfigError("batch_tokens must be at least 1")


def encoder_identity(encoder_dir: str | Path) -> dict:
    return {"path": str(encoder_dir), "sha256": file_checksum(Path(encoder_dir) / "model.safetensors")["sha256"]}


def index_identity(index: SparseIndex) -> dict:
    return {"path": str(index.path), "mentions_sha256": file_checksum(index.path / "mentions.npy")["sha256"],
            "mentions": index.n_mentions}


def _length_batches(lengths: np.ndarray, batch_tokens: int):
    order = np.argsort(lengths, kind="stable")
    batch: list[int] = []
    longest = 0
    for p in order:
        longest_next = max(longest, int(lengths[p]) + 2)
        if batch and longest_next * (len(batch) + 1) > batch_tokens:
            yield batch
            batch, longest_next = [], int(lengths[p]) + 2
        batch.append(int(p))
        longest = longest_next
    if batch:
        yield batch


def embed_mentions(index: SparseIndex, encoder: DualEncoder, config: EmbedConfig = EmbedConfig(),
                   warnings: WarningLog | None = None, out: np.ndarray | None = None, skip_batches: int = 0,
                   checkpoint=None) -> tuple[np.ndarray, dict]:
    """f(m) for every mention of `index`: (M, p) float16, and timing figures.

    `out`: the (M, p) float16 array to fill (a memory map: the vectors go to disk as they are computed);
    by default a new one in memory. The passages are embedded in a fixed order of batches;
    `skip_batches` leaves the first ones out (a resumed build whose `out` holds them already), and
    `checkpoint(batches_done)` is called every `CHECKPOINT_S` seconds and at the end."""
    warnings = warnings if warnings is not None else WarningLog()
    mentions = np.asarray(index.mentions)
    indptr = index.passage_mention_indptr
    lengths = np.diff(np.asarray(index.piece_offsets))
    empty = int((lengths == 0).sum())
    if empty:
        warnings.add("empty_passage", "passages with no word pieces have no mentions to embed", count=empty)
    with_mentions = np.flatnonzero(np.diff(indptr) > 0)
    if out is None:
        out = np.zeros((len(mentions), encoder.config.dim), dtype=np.float16)
    elif out.shape != (len(mentions), encoder.config.dim) or out.dtype != np.float16:
        raise ValueError(f"out must be ({len(mentions)}, {encoder.config.dim}) float16, got {out.shape} {out.dtype}")
    encoder.eval()
    t = last = time.perf_counter()
    done = embedded = 0
    with torch.inference_mode(), progress(total=len(mentions), desc="embed", unit="mention") as bar:
        for n, batch in enumerate(_length_batches(lengths[with_mentions], config.batch_tokens)):
            ps = with_mentions[batch]
            rows = [np.arange(indptr[p], indptr[p + 1]) for p in ps]
            if n < skip_batches:  # embedded by an earlier, interrupted build
                bar.update(sum(len(r) for r in rows))
                done = n + 1
                continue
            vecs = encoder.embed_mentions([index.passage_pieces(int(p)) for p in ps],
                                          [mentions[r, 2] for r in rows], [mentions[r, 3] for r in rows], bf16=config.bf16)
            for r, v in zip(rows, vecs):
                if not np.isfinite(v).all() or np.abs(v).max() > FP16_MAX:
                    raise FloatingPointError(f"mention vectors of passage {int(mentions[r[0], 1])} overflow fp16")
                out[r] = v.astype(np.float16)
            bar.update(sum(len(r) for r in rows))
            embedded += sum(len(r) for r in rows)
            done = n + 1
            if checkpoint is not None and time.perf_counter() - last >= CHECKPOINT_S:
                checkpoint(done)
                last = time.perf_counter()
    if checkpoint is not None:
        checkpoint(done)
    seconds = time.perf_counter() - t
    timing = {"seconds": round(seconds, 2), "mentions_per_s": round(embedded / max(seconds, 1e-9), 1),
              "passages": int(len(with_mentions)), "tokens": int(lengths[with_mentions].sum() + 2 * len(with_mentions))}
    if skip_batches:
        timing["resumed_after_batches"] = int(min(skip_batches, done))
    return out, timing


def build_mention_index(index_dir: str | Path, encoder_dir: str | Path, out: str | Path,
                        config: EmbedConfig = EmbedConfig(), overwrite: bool = False, log=print) -> "MentionIndex":
    """Embed every mention of the index at `index_dir` with the encoder at `encoder_dir` into the mention
    index `out`. The vectors are written to disk as they are computed (``.OUT.partial/``, memory-mapped),
    with a progress record every `CHECKPOINT_S` seconds: an interrupted build run again with the same
    index, encoder and settings resumes where the record says; with others it starts over."""
    encoder_dir = resolve_encoder_dir(encoder_dir)
    index = SparseIndex.load(index_dir)
    encoder = DualEncoder.load(encoder_dir)
    if encoder.manifest.get("tokenizer", {}).get("vocab_sha256") != index.manifest.get("tokenizer", {}).get("vocab_sha256"):
        raise ArtifactError(f"{encoder_dir} and {index_dir} use different tokenizers; rebuild one with the other's")
    out = Path(out)
    if out.exists() and not overwrite:
        raise ArtifactError(f"{out} already exists; choose another --out or pass --overwrite")
    identity = {"format_version": FORMAT_VERSION, "config": asdict(config), "encoder": encoder_identity(encoder_dir),
                "index": index_identity(index), "dim": encoder.config.dim}
    work = out.parent / f".{out.name}.partial"
    record = work / "progress.json"
    skip = _resumable_batches(work, record, identity, log)
    warnings = WarningLog()
    with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite, work_dir=work) as w:
        vectors = w.open_array("mention_vectors", (index.n_mentions, encoder.config.dim), np.float16,
                               note="row = mention id of the sparse index; f(m) = [f_start ; f_end]")

        def checkpoint(done: int) -> None:  # the vectors on disk first, then the record that counts them
            vectors.flush()
            tmp = record.with_suffix(".tmp")
            tmp.write_text(json.dumps({"identity": identity, "batches_done": done}))
            os.replace(tmp, record)

        _, timing = embed_mentions(index, encoder, config, warnings, out=vectors, skip_batches=skip, checkpoint=checkpoint)
        vectors.flush()
        record.unlink()
        w.manifest.update(config=asdict(config), encoder=identity["encoder"], index=identity["index"],
                          dim=identity["dim"], mentions=index.n_mentions, embedding=timing,
                          warnings=warnings.to_dict())
    for line in warnings.lines():
        log(line)
    log(f"embedded {index.n_mentions:,} mentions in {timing['seconds']:.0f} s ({timing['mentions_per_s']:.0f} mentions/s"
        + (f"; resumed after {timing['resumed_after_batches']} batches" if "resumed_after_batches" in timing else "") + ")")
    return MentionIndex(out)


def _resumable_batches(work: Path, record: Path, identity: dict, log) -> int:
    """The batches an interrupted build left in `work` (0 when there is none, or it was made from other inputs)."""
    if not work.exists():
        return 0
    try:
        state = json.loads(record.read_text())
    except (OSError, ValueError):
        state = None
    if isinstance(state, dict) and state.get("identity") == identity and isinstance(state.get("batches_done"), int):
        log(f"resuming the interrupted embedding in {work}: {state['batches_done']} batches are done")
        return state["batches_done"]
    log(f"{work} holds an interrupted embedding of other inputs (or none recorded); starting over")
    shutil.rmtree(work)
    return 0


def resolve_encoder_dir(path: str | Path) -> Path:
    """An encoder artifact, or a pretraining run directory holding one in ``encoder/``."""
    path = Path(path)
    if not (path / "model.safetensors").exists() and (path / "encoder" / "model.safetensors").exists():
        return path / "encoder"
    if not path.exists():
        raise ArtifactError(f"{path} does not exist")
    return path


class MentionIndex:
    """A dense mention index, loaded with its vectors memory-mapped."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.manifest = read_manifest(self.path, FORMAT, FORMAT_VERSION)
        self.vectors = load_array(self.path, "mention_vectors")

    @classmethod
    def load(cls, path: str | Path) -> "MentionIndex":
        return cls(path)

    def __len__(self) -> int:
        return self.vectors.shape[0]

    @property
    def dim(self) -> int:
        return self.vectors.shape[1]

    def check_compatible(self, index: SparseIndex | None = None, encoder_dir: str | Path | None = None) -> None:
        """Refuse a sparse index or encoder other than the ones this index was built from."""
        if index is not None and self.manifest["index"]["mentions_sha256"] != index_identity(index)["mentions_sha256"]:
            raise ArtifactError(f"{self.path} was built from another sparse index than {index.path}")
        if encoder_dir is not None:
            enc = encoder_identity(resolve_encoder_dir(encoder_dir))
            if enc["sha256"] != self.manifest["encoder"]["sha256"]:
                raise ArtifactError(f"{self.path} was embedded with the encoder {self.manifest['encoder']['path']}, "
                                    f"not {encoder_dir} (their weights differ)")

    def searcher(self, kind: str = "exact", **kwargs):
        """``search(queries, k) -> (scores, ids)`` over all mentions: ``exact`` (blocked bf16 matrix product,
        vectors cached in memory), ``faiss`` (IVF; kwargs nlist, nprobe) or ``ivfpq`` (IVF-PQ codes in memory,
        the short list scored again from the memory-mapped vectors; kwargs nlist, nprobe, pq_m (default
        p / 8), rerank)."""
        if kind == "exact":
            return ExactMIPS(self.vectors, **kwargs).cache()
        if kind == "faiss":
            return FaissMIPS(self.vectors, **kwargs)
        if kind == "ivfpq":
            return FaissMIPS(self.vectors, **{"pq_m": max(1, self.dim // 8), **kwargs})
        raise ConfigError(f"unknown MIPS kind {kind!r}; expected one of {', '.join(MIPS_KINDS)}")
