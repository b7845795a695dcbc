"""`drkit embed --engine ray`: the encoder batches of a local build, run on Ray Data actors that each hold
the encoder (`embed_mentions_on_ray`, called by `build_mention_index`)."""

from __future__ import annotations

import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from drkit.dense.embedding import EmbedConfig, batch_plan, embed_batch, embed_timing, mention_encoder, mention_rows
from drkit.dense.encoder import DualEncoder
from drkit.errors import ArtifactError
from drkit.index.sparse import SparseIndex


class _EmbedShard:
    """A Ray actor holding the encoder: embeds whole encoder batches, each written to a file of its own (its
    mention ids and fp16 vectors; no two workers write one file), and returns what it wrote."""

    def __init__(self, index_dir: str, encoder_dir: str, config: dict, shard_dir: str, threads: int):
        torch.set_num_threads(threads)
        self.index = SparseIndex.load(index_dir)
        self.config = EmbedConfig(**config)
        self.encoder = mention_encoder(DualEncoder.load(encoder_dir), self.config)
        self.mentions = np.asarray(self.index.mentions)
        self.indptr = self.index.passage_mention_indptr
        self.shard_dir = Path(shard_dir)

    def __call__(self, batch: dict) -> dict:
        done, written, paths = [], [], []
        with torch.inference_mode():
            for n, passages in zip(batch["batch"], batch["passages"]):
                passages = np.asarray(passages, dtype=np.int64)
                rows = mention_rows(self.indptr, passages)
                pairs = embed_batch(self.index, self.encoder, self.mentions, rows, passages, self.config)
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

    plan = batch_plan(index, config)
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
        want = np.concatenate(mention_rows(indptr, plan[n]))
        if count != expected[n] or not np.array_equal(ids, want):
            raise ArtifactError(f"Ray embedding: encoder batch {n} ({path}) holds {len(ids)} mentions, not its "
                                f"{expected[n]}")
        vectors[ids] = np.load(Path(path) / "vectors.npy")
    log(f"embedded on Ray: {len(plan)} encoder batches, {workers} workers")
    return {**embed_timing(index, plan, time.perf_counter() - t, index.n_mentions), "engine": "ray", "workers": workers}
