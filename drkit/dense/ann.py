"""Saved approximate MIPS (`drkit ann`): an IVF-PQ index over a mention index's vectors, written as an
artifact so that question time loads its codes instead of training them (`LoadConfig.ann`)."""

from __future__ import annotations

import time
from pathlib import Path

from drkit.dense.mentions import MentionIndex
from drkit.dense.mips import FaissMIPS
from drkit.errors import ArtifactError
from drkit.util.artifact import ArtifactWriter, file_checksum, read_manifest

ANN_FORMAT = "drkit.ann_index"
ANN_FORMAT_VERSION = 1


def default_pq_m(dim: int) -> int:
    """Bytes a vector of IVF-PQ codes by default: about one a 8 values, dividing `dim`."""
    return next(m for m in range(max(1, dim // 8), 0, -1) if dim % m == 0)


def mention_identity(mentions: MentionIndex) -> dict:
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


def load_ann(mentions: MentionIndex, path: str | Path, nprobe: int = 32, rerank: int = 4) -> FaissMIPS:
    """The IVF-PQ index `build_ann_index` wrote for `mentions`; refused for another mention index."""
    path = Path(path)
    manifest = read_manifest(path, ANN_FORMAT, ANN_FORMAT_VERSION)
    if manifest["mentions"]["manifest_sha256"] != mention_identity(mentions)["manifest_sha256"]:
        raise ArtifactError(f"{path} was built over the mention index {manifest['mentions']['path']}, not "
                            f"{mentions.path}; build it again: drkit ann --mentions {mentions.path} --out {path} --overwrite")
    return FaissMIPS.load(path / "index.faiss", mentions.vectors, nprobe=nprobe, rerank=rerank)
