"""Saved approximate MIPS (`drkit ann`): an IVF-PQ index over a mention index's vectors, written as an
artifact so that question time loads its codes instead of training them (`LoadConfig.ann`; loaded by
`drkit.dense.mips.load_ann`)."""

from __future__ import annotations

import time
from pathlib import Path

from drkit.dense.mentions import MentionIndex
from drkit.dense.mips import ANN_FORMAT, ANN_FORMAT_VERSION, FaissMIPS, default_pq_m, mention_identity
from drkit.util.artifact import ArtifactWriter


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
