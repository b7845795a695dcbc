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


def _embed_batch(index: SparseIndex, encoder: DualEncoder, mentions: np.ndarray, rows: list[np.ndarray],
                 passages: np.ndarray, config: EmbedConfig) -> list[tuple[np.ndarray, np.ndarray]]:
    """f(m) of the mentions `rows[i]` of each passage `passages[i]`, one encoder batch: [(mention ids, fp16 (n, p))]."""
    vecs = encoder.embed_mentions([index.passage_pieces(int(p)) for p in passages],
                                  [mentions[r, 2] for r in rows], [mentions[r, 3] for r in rows], bf16=config.bf16)
    out = []
    for r, v in zip(rows, vecs):
        if not np.isfinite(v).all() or np.abs(v).max() > FP16_MAX:
            raise FloatingPointError(f"mention vectors of passage {int(mentions[r[0], 1])} overflow fp16")
        out.append((r, v.astype(np.float16)))
    return out


def _batch_plan(index: SparseIndex, config: EmbedConfig) -> list[np.ndarray]:
    """The passages of each encoder batch, in the order a build embeds them (by length)."""
    lengths = np.diff(np.asarray(index.piece_offsets))
    with_mentions = np.flatnonzero(np.diff(index.passage_mention_indptr) > 0)
    return [with_mentions[b] for b in _length_batches(lengths[with_mentions], config.batch_tokens)]


class _EmbedShard:
    """A Ray actor holding the encoder: embeds whole encoder batches, each written to a file of its own (its
    mention ids and fp16 vectors; no two workers write one file), and returns what it wrote."""

    def __init__(self, index_dir: str, encoder_dir: str, config: dict, shard_dir: str, threads: int):
        torch.set_num_threads(threads)
        self.index = SparseIndex.load(index_dir)
        self.encoder = DualEncoder.load(encoder_dir).eval()
        self.config = EmbedConfig(**config)
        self.mentions = np.asarray(self.index.mentions)
        self.indptr = self.index.passage_mention_indptr
        self.shard_dir = Path(shard_dir)

    def __call__(self, batch: dict) -> dict:
        done, written, paths = [], [], []
        with torch.inference_mode():
            for n, passages in zip(batch["batch"], batch["passages"]):
                passages = np.asarray(passages, dtype=np.int64)
                rows = [np.arange(self.indptr[p], self.indptr[p + 1]) for p in passages]
                pairs = _embed_batch(self.index, self.encoder, self.mentions, rows, passages, self.config)
                path = self.shard_dir / f"batch-{int(n):09d}"
                path.mkdir(parents=True, exist_ok=True)
                np.save(path / "mention_ids.npy", np.concatenate([r for r, _ in pairs]).astype(np.int64))
                np.save(path / "vectors.npy", np.concatenate([v for _, v in pairs]))
                done.append(int(n))
                written.append(int(sum(len(r) for r in rows)))
                paths.append(str(path))
        return {"batch": np.asarray(done, dtype=np.int64), "mentions": np.asarray(written, dtype=np.int64),
                "path": np.asarray(paths)}


def embed_mentions_on_ray(index: SparseIndex, index_dir: Path, encoder_dir: Path, config: EmbedConfig,
                          vectors: np.ndarray, shard_dir: Path, address: str | None = None, log=print) -> dict:
    """`embed_mentions` on Ray: the encoder batches (the same as a local build's) are Ray Data rows, mapped
    by actors that each hold the encoder and write each batch's vectors to a file of its own under
    `shard_dir` (on a cluster: storage every node sees); the driver checks that every batch came back once
    with its mention count and the mention ids it should hold, and copies it into `vectors`. Returns the
    timing figures."""
    from drkit.util.ray_engine import check_tiling, ray_session

    plan = _batch_plan(index, config)
    per_passage = np.diff(index.passage_mention_indptr)
    expected = [int(per_passage[ps].sum()) for ps in plan]
    index_dir, encoder_dir, shard_dir = Path(index_dir).resolve(), Path(encoder_dir).resolve(), Path(shard_dir).resolve()
    t = time.perf_counter()
    with ray_session(address=address) as ray:
        cpus = max(1, int(ray.available_resources().get("CPU", 1)))
        workers = max(1, min(cpus, len(plan)))
        ds = ray.data.from_items([{"batch": n, "passages": ps.tolist()} for n, ps in enumerate(plan)],
                                 override_num_blocks=max(1, min(len(plan), 4 * workers)))
        out = ds.map_batches(_EmbedShard, batch_size=max(1, len(plan) // (4 * workers)), concurrency=workers,
                             num_cpus=1, batch_format="numpy",
                             fn_constructor_args=(str(index_dir), str(encoder_dir), asdict(config), str(shard_dir),
                                                  max(1, cpus // workers)))
        rows = out.take_all()
    got: dict[int, tuple[int, str]] = {}
    for r in rows:
        if int(r["batch"]) in got:
            raise ArtifactError(f"Ray embedding: encoder batch {int(r['batch'])} came back twice")
        got[int(r["batch"])] = (int(r["mentions"]), str(r["path"]))
    check_tiling([(n, n + 1) for n in got], len(plan), "encoder batches")
    indptr = index.passage_mention_indptr
    for n, (count, path) in sorted(got.items()):
        ids = np.load(Path(path) / "mention_ids.npy")
        want = np.concatenate([np.arange(indptr[p], indptr[p + 1]) for p in plan[n]])
        if count != expected[n] or not np.array_equal(ids, want):
            raise ArtifactError(f"Ray embedding: encoder batch {n} ({path}) holds {len(ids)} mentions, not its "
                                f"{expected[n]}")
        vectors[ids] = np.load(Path(path) / "vectors.npy")
    seconds = time.perf_counter() - t
    lengths = np.diff(np.asarray(index.piece_offsets))
    with_mentions = np.concatenate(plan) if plan else np.zeros(0, np.int64)
    log(f"embedded on Ray: {len(plan)} encoder batches, {workers} workers")
    return {"seconds": round(seconds, 2), "mentions_per_s": round(index.n_mentions / max(seconds, 1e-9), 1),
            "passages": int(len(with_mentions)), "tokens": int(lengths[with_mentions].sum() + 2 * len(with_mentions)),
            "engine": "ray", "workers": workers}


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
            for r, v in _embed_batch(index, encoder, mentions, rows, ps, config):
                out[r] = v
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
    index = SparseIndex.load(index_dir)
    encoder = DualEncoder.load(encoder_dir)
    if encoder.manifest.get("tokenizer", {}).get("vocab_sha256") != index.manifest.get("tokenizer", {}).get("vocab_sha256"):
        raise ArtifactError(f"{encoder_dir} and {index_dir} use different tokenizers; rebuild one with the other's")
    out = Path(out)
    if out.exists() and not overwrite:
        raise ArtifactError(f"{out} already exists; choose another --out or pass --overwrite")
    identity = {"format_version": FORMAT_VERSION, "config": asdict(config), "encoder": encoder_identity(encoder_dir),
                "index": index_identity(index), "dim": encoder.config.dim}
    if engine == "ray":
        from drkit.util.ray_engine import import_ray

        import_ray()  # before anything is written
    work = out.parent / f".{out.name}.partial"
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
            lengths = np.diff(np.asarray(index.piece_offsets))
            if (lengths == 0).any():
                warnings.add("empty_passage", "passages with no word pieces have no mentions to embed",
                             count=int((lengths == 0).sum()))
            shards = w.path("ray-batches")
            timing = embed_mentions_on_ray(index, Path(index_dir), encoder_dir, config, vectors, shards, ray_address, log)
            shutil.rmtree(shards)
            vectors.flush()
        else:
            _, timing = embed_mentions(index, encoder, config, warnings, out=vectors, skip_batches=skip,
                                       checkpoint=checkpoint)
            vectors.flush()
        record.unlink(missing_ok=True)
        w.manifest.update(config=asdict(config), encoder=identity["encoder"], index=identity["index"],
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


ANN_FORMAT = "drkit.ann_index"
ANN_FORMAT_VERSION = 1


def default_pq_m(dim: int) -> int:
    """Bytes a vector of IVF-PQ codes by default: about one a 8 values, dividing `dim`."""
    return next(m for m in range(max(1, dim // 8), 0, -1) if dim % m == 0)


def mention_identity(mentions: "MentionIndex") -> dict:
    """What names a mention index exactly: its path, size and the checksum of its manifest (which holds its
    creation time, encoder and sparse index), without reading its vectors."""
    return {"path": str(mentions.path), "manifest_sha256": file_checksum(mentions.path / "manifest.json")["sha256"],
            "mentions": len(mentions), "dim": mentions.dim}


def build_ann_index(mentions_dir: str | Path, out: str | Path, nlist: int | None = None, pq_m: int | None = None,
                    train_size: int = 100_000, seed: int = 0, overwrite: bool = False, log=print) -> Path:
    """Train and fill an IVF-PQ index over a mention index's vectors and write it as an artifact
    (``drkit.ann_index``: ``index.faiss`` and a manifest naming the mention index), so that question time
    loads the codes instead of training them (`LoadConfig.ann`)."""
    mentions = MentionIndex.load(mentions_dir)
    pq_m = pq_m or default_pq_m(mentions.dim)
    t = time.perf_counter()
    searcher = FaissMIPS(mentions.vectors, nlist=nlist, pq_m=pq_m, train_size=train_size, seed=seed)
    seconds = time.perf_counter() - t
    with ArtifactWriter(out, ANN_FORMAT, ANN_FORMAT_VERSION, overwrite=overwrite) as w:
        searcher.save(w.path("index.faiss"))
        w.files["index.faiss"] = {"bytes": w.path("index.faiss").stat().st_size, "note": "FAISS IVF-PQ, faiss.write_index"}
        w.manifest.update(mentions=mention_identity(mentions), config={
            "nlist": int(searcher.index.nlist), "pq_m": pq_m, "train_size": train_size, "seed": seed},
            build_s=round(seconds, 2), codes_bytes=searcher.memory_bytes)
    log(f"IVF-PQ over {len(mentions):,} mentions ({searcher.index.nlist} lists, {pq_m} bytes a vector) in {seconds:.0f} s")
    return Path(out)


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

    def load_ann(self, path: str | Path, nprobe: int = 32, rerank: int = 4) -> FaissMIPS:
        """The IVF-PQ index `build_ann_index` wrote for this mention index; refused for another one."""
        path = Path(path)
        manifest = read_manifest(path, ANN_FORMAT, ANN_FORMAT_VERSION)
        if manifest["mentions"]["manifest_sha256"] != mention_identity(self)["manifest_sha256"]:
            raise ArtifactError(f"{path} was built over the mention index {manifest['mentions']['path']}, not {self.path}; "
                                f"build it again: drkit ann --mentions {self.path} --out {path} --overwrite")
        return FaissMIPS.load(path / "index.faiss", self.vectors, nprobe=nprobe, rerank=rerank)

    def searcher(self, kind: str = "exact", **kwargs):
        """``search(queries, k) -> (scores, ids)`` over all mentions: ``exact`` (blocked bf16 matrix product,
        vectors cached in memory), ``faiss`` (IVF; kwargs nlist, nprobe) or ``ivfpq`` (IVF-PQ codes in memory,
        the short list scored again from the memory-mapped vectors; kwargs nlist, nprobe, pq_m (default
        p / 8), rerank, or ann: the folder of a saved one, `build_ann_index`)."""
        if kind == "exact":
            return ExactMIPS(self.vectors, **kwargs).cache()
        if kind == "faiss":
            return FaissMIPS(self.vectors, **kwargs)
        if kind == "ivfpq":
            ann = kwargs.pop("ann", None)
            if ann is not None:
                return self.load_ann(ann, **kwargs)
            return FaissMIPS(self.vectors, **{"pq_m": default_pq_m(self.dim), **kwargs})
        raise ConfigError(f"unknown MIPS kind {kind!r}; expected one of {', '.join(MIPS_KINDS)}")
