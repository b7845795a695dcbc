"""The dense mention index: f(m) for every mention of a sparse index, computed once, stored in fp16.

Artifact format ``drkit.mention_index``: ``mention_vectors.npy`` (M, p) float16, row m = mention m of
the sparse index (memory-mapped when loaded), and ``manifest.json`` recording the encoder (path and
checksum of its weights), the sparse index it belongs to (checksum of its mention table) and the
embedding run's throughput. `MentionIndex.searcher` gives exact or approximate MIPS behind
``search(queries, k) -> (scores, ids)`` (`drkit.dense.mips`).
"""

from __future__ import annotations

import copy
import json
import os
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import numpy as np

from drkit.dense.embedding import (
    EmbedConfig,
    embed_mentions,
    encoder_identity,
    index_identity,
    vectors_key,
    warn_empty_passages,
)
from drkit.dense.encoder import DualEncoder
from drkit.dense.mips import MIPS_KINDS, ExactMIPS, FaissMIPS, default_pq_m, load_ann
from drkit.errors import ArtifactError, ConfigError
from drkit.index.sparse import SparseIndex
from drkit.util.artifact import ArtifactWriter, load_array, path_record, read_manifest, recorded_places
from drkit.util.warnlog import WarningLog

FORMAT = "drkit.mention_index"
FORMAT_VERSION = 1


def partial_dir(out: str | Path) -> Path:
    """Where `build_mention_index` keeps the vectors and progress of a build into `out` until it is done."""
    out = Path(out)
    return out.parent / f".{out.name}.partial"


def build_mention_index(index_dir: str | Path, encoder_dir: str | Path, out: str | Path,
                        config: EmbedConfig = EmbedConfig(), overwrite: bool = False, log=print,
                        engine: str = "local", ray_address: str | None = None) -> "MentionIndex":
    """Embed every mention of the index at `index_dir` with the encoder at `encoder_dir` into the mention
    index `out`. The vectors are written to disk as they are computed (``.OUT.partial/``, memory-mapped),
    with a progress record every `CHECKPOINT_S` seconds: an interrupted build run again with the same
    index, encoder and settings resumes where the record says; with others it starts over.

    `engine="ray"`: the encoder batches run on Ray actors (`embed_mentions_on_ray`), on this machine or the
    cluster at `ray_address`; the vectors equal a local build's (the same batches, the same code). A Ray
    build does not resume."""
    if engine not in ("local", "ray"):
        raise ConfigError(f"engine must be 'local' or 'ray', got {engine!r}")
    encoder_dir = resolve_encoder_dir(encoder_dir)
    if engine == "ray":  # Ray's actors embed on their CPUs
        if config.device == "cuda":
            raise ConfigError("--engine ray embeds on the Ray workers' CPUs; use --device auto or cpu")
        config = replace(config, device="cpu").resolved()  # the actors compute what the manifest records
    recorded = config.resolved()  # the manifest records the precision the vectors were computed in
    index = SparseIndex.load(index_dir)
    if index.live is not None:
        raise ConfigError(f"{index_dir} has documents added or removed since it was built (version {index.live.version}); "
                          "'drkit embed' reads a compacted index: run 'drkit compact' (which writes the mention index "
                          "too, reusing the vectors it has)")
    encoder = DualEncoder.load(encoder_dir)
    if encoder.manifest.get("tokenizer", {}).get("vocab_sha256") != index.manifest.get("tokenizer", {}).get("vocab_sha256"):
        raise ArtifactError(f"{encoder_dir} and {index_dir} use different tokenizers; rebuild one with the other's")
    out = Path(out)
    if out.exists() and not overwrite:
        raise ArtifactError(f"{out} already exists; choose another --out or pass --overwrite")
    identity = {"format_version": FORMAT_VERSION, "config": asdict(recorded), "encoder": encoder_identity(encoder_dir),
                "index": index_identity(index), "dim": encoder.config.dim}
    if engine == "ray":
        from drkit.util.ray_engine import import_ray

        import_ray()  # before anything is written
    work = partial_dir(out)
    record = work / "progress.json"
    skip = _resumable_batches(work, record, identity, log) if engine == "local" else _fresh(work)
    warnings = WarningLog()
    with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite, work_dir=work) as w:
        vectors = w.open_array("mention_vectors", (index.n_mentions, encoder.config.dim), np.float16,
                               note="row = mention id of the sparse index; f(m) = [f_start ; f_end]")
        if skip and not w.reused:  # the record counts batches of a vectors file that is gone or unreadable
            log(f"{work}: the vectors of the interrupted embedding are missing or unreadable; starting over")
            skip = 0

        def checkpoint(done: int) -> None:  # the vectors on disk first, then the record that counts them
            vectors.flush()
            tmp = record.with_suffix(".tmp")
            tmp.write_text(json.dumps({"identity": identity, "batches_done": done}))
            os.replace(tmp, record)

        if engine == "ray":
            from drkit.dense.embed_ray import embed_mentions_on_ray

            warn_empty_passages(index, warnings)
            shards = w.path("ray-batches")
            timing = embed_mentions_on_ray(index, Path(index_dir), encoder_dir, config, vectors, shards, ray_address, log)
            shutil.rmtree(shards)
            vectors.flush()
        else:
            _, timing = embed_mentions(index, encoder, config, warnings, out=vectors, skip_batches=skip,
                                       checkpoint=checkpoint)
            vectors.flush()
        record.unlink(missing_ok=True)
        encoder = {**identity["encoder"], **path_record(encoder_dir, out, "from_mentions")}  # found from `out` too
        w.manifest.update(config=identity["config"], encoder=encoder, index=identity["index"],
                          dim=identity["dim"], mentions=index.n_mentions, embedding=timing,
                          warnings=warnings.to_dict())
    for line in warnings.lines():
        log(line)
    log(f"embedded {index.n_mentions:,} mentions in {timing['seconds']:.0f} s ({timing['mentions_per_s']:.0f} mentions/s"
        + (f"; resumed after {timing['resumed_after_batches']} batches" if "resumed_after_batches" in timing else "") + ")")
    return MentionIndex(out)


def _fresh(work: Path) -> int:
    """No resume (a Ray build): an interrupted build's work folder is removed."""
    if work.exists():
        shutil.rmtree(work)
    return 0


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
            raise ArtifactError(f"{self.path} was built from another sparse index than {index.path}: embed that "
                                f"index's mentions (drkit embed --index {index.path} --encoder <the model's encoder> "
                                "--out DIR) and pass them (--mentions DIR; in Python, DrKIT.load(..., mentions=DIR))")
        if encoder_dir is not None:
            enc = encoder_identity(resolve_encoder_dir(encoder_dir))
            if enc["sha256"] != self.manifest["encoder"]["sha256"]:
                raise ArtifactError(f"{self.path} was embedded with the encoder {self.manifest['encoder']['path']}, "
                                    f"not {encoder_dir} (their weights differ)")

    def encoder_dir(self) -> Path:
        """The encoder that embedded this index, where the manifest says it is: the recorded path, else the
        recorded path from this index's folder (a moved tree of runs). Refused with both places when neither
        holds it. Indexes embedded before 2026-12-02 recorded the path as given, which may be relative to the
        folder that `drkit embed` ran in."""
        tried = recorded_places(self.manifest["encoder"], self.path, "from_mentions")
        for path in tried:
            if path.exists():
                return resolve_encoder_dir(path)
        where = " nor at ".join(f"'{p}'" for p in tried)
        if not tried[0].is_absolute():
            where += " (recorded relative to the folder 'drkit embed' ran in)"
        raise ArtifactError(f"the encoder that embedded {self.path} is not at {where}: put it back, run from that "
                            "folder, or embed again ('drkit embed --encoder DIR')")

    def encoder_record_at(self, out: str | Path) -> dict:
        """This index's encoder record for a copy of it written at `out` (`drkit compact`): the same encoder,
        found from `out`'s folder too. Kept as it is when the encoder is not where the record says."""
        record = dict(self.manifest["encoder"])
        try:
            return {**record, **path_record(self.encoder_dir(), out, "from_mentions")}
        except ArtifactError:
            return record

    def vectors_key(self) -> str:
        """The name of this index's vectors in a segment of a grown sparse index (`drkit.dense.update`): one per
        encoder and embedding settings."""
        return vectors_key(self.manifest)

    def for_index(self, index: SparseIndex) -> "MentionIndex":
        """This mention index as the live view of `index` sees it: itself when nothing was added or removed;
        else a copy whose `vectors` (in memory) are the base's live rows and each segment's vectors, in the
        live view's mention order. Check `check_compatible(index)` first."""
        if index.live is None:
            return self
        parts = []
        for k, (folder, kept) in enumerate(zip(index.live.part_dirs, index.live.part_kept_mentions)):
            if k == 0:
                parts.append(np.asarray(self.vectors[kept]))
                continue
            name = f"vectors-{self.vectors_key()}"
            if not (folder / f"{name}.npy").exists():
                raise ArtifactError(f"the segment {folder} has no vectors of the mention index {self.path} (it was added "
                                    f"without --mentions {self.path}); the next 'drkit add' or 'drkit compact' with "
                                    f"--mentions {self.path} embeds them")
            parts.append(np.asarray(load_array(folder, name)[kept]))
        view = copy.copy(self)
        view.vectors = np.concatenate(parts) if parts else np.zeros((0, self.dim), np.float16)
        view.live_version = index.live.version
        return view

    def searcher(self, kind: str = "exact", **kwargs):
        """``search(queries, k) -> (scores, ids)`` over all mentions: ``exact`` (blocked matrix product in the score dtype,
        vectors cached in memory), ``faiss`` (IVF; kwargs nlist, nprobe) or ``ivfpq`` (IVF-PQ codes in memory,
        the short list scored again from the memory-mapped vectors; kwargs nlist, nprobe, pq_m (default
        p / 8), rerank, or ann: the folder of a saved one, `build_ann_index`)."""
        if kind == "exact":
            return ExactMIPS(self.vectors, **kwargs).cache()
        if kind == "faiss":
            return FaissMIPS(self.vectors, **kwargs)
        if kind == "ivfpq":
            ann = kwargs.pop("ann", None)
            if ann is not None and getattr(self, "live_version", None) is not None:
                raise ConfigError(f"the saved IVF-PQ index {ann} covers the mentions the sparse index had when it was "
                                  "built, not those added or removed since; compact the index and run 'drkit ann' "
                                  "again, or leave out --ann (an IVF-PQ index is then trained at load)")
            if ann is not None:
                return load_ann(self, ann, **kwargs)
            return FaissMIPS(self.vectors, **{"pq_m": default_pq_m(self.dim), **kwargs})
        raise ConfigError(f"unknown MIPS kind {kind!r}; expected one of {', '.join(MIPS_KINDS)}")
