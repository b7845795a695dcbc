#!/usr/bin/env python
"""The dense mention index on real vectors: embedding throughput, size, MIPS speed and recall.

Needs a sparse index, a pretraining run (its encoder and held-out queries) and the mention index
built from them (`drkit index`, `drkit pretrain`, `drkit embed`). Reports:

* embedding throughput (mentions/s and passages/s) on `--embed-passages` passages, with bf16
  autocast and in float32, and how far the bf16 vectors are from the float32 ones (cosine);
* the index's size on disk and in memory once the exact searcher has cached it (RSS growth);
* queries/s at batch 1 and 64 for exact MIPS (bf16 blocks) and FAISS IVF (several nprobe), with
  the real query vectors g(q) of the held-out slot-filling queries;
* FAISS recall@k against exact search, for each k in `--k`.

Writes JSON (default benchmarks/results/bench_dense.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch
from bench_mips import throughput  # noqa: E402  (this script's folder is on sys.path)

from drkit.dense.encoder import DualEncoder
from drkit.dense.mentions import EmbedConfig, MentionIndex, embed_mentions, resolve_encoder_dir
from drkit.dense.mips import recall_at_k
from drkit.index.csr import passage_mention_indptr
from drkit.index.sparse import SparseIndex

ROOT = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


class _Slice:
    """The first n passages of a sparse index, for timing the embedding on part of the corpus."""

    def __init__(self, index: SparseIndex, n: int):
        self._index, self.n_passages = index, n
        m = np.asarray(index.mentions)
        self.mentions = m[m[:, 1] < n]
        self.piece_offsets = np.asarray(index.piece_offsets)[: n + 1]
        self.passage_mention_indptr = passage_mention_indptr(self.mentions[:, 1], n)
        self.path = index.path

    def passage_pieces(self, p):
        return self._index.passage_pieces(p)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", type=Path, default=ROOT / "runs" / "metaqa-index")
    p.add_argument("--pretrain", type=Path, default=ROOT / "runs" / "metaqa-pretrain", help="pretraining run directory")
    p.add_argument("--mentions", type=Path, default=ROOT / "runs" / "metaqa-mentions")
    p.add_argument("--embed-passages", type=int, default=1000)
    p.add_argument("--k", type=int, nargs="+", default=[100, 1000])
    p.add_argument("--nprobe", type=int, nargs="+", default=[16, 64])
    p.add_argument("--seconds", type=float, default=5.0, help="time per throughput measurement")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_dense.json")
    args = p.parse_args()

    index = SparseIndex.load(args.index)
    encoder = DualEncoder.load(resolve_encoder_dir(args.pretrain))
    mi = MentionIndex.load(args.mentions)
    mi.check_compatible(index, args.pretrain)
    results: dict = {"machine": {"cpus": os.cpu_count(), "processor": platform.processor() or platform.machine(),
                                 "torch_threads": torch.get_num_threads()},
                     "index": str(args.index), "mentions": str(args.mentions), "encoder": str(args.pretrain),
                     "n_mentions": len(mi), "dim": mi.dim}

    # embedding throughput, bf16 and float32, on a slice of the corpus
    part = _Slice(index, args.embed_passages)
    emb = {}
    vecs = {}
    for bf16 in (True, False):
        v, timing = embed_mentions(part, encoder, EmbedConfig(precision="bf16" if bf16 else "fp32"))
        vecs[bf16] = v.astype(np.float32)
        emb["bf16" if bf16 else "fp32"] = {**timing, "passages_per_s": round(timing["passages"] / timing["seconds"], 1)}
        print(f"embed ({'bf16' if bf16 else 'fp32'}): {timing['mentions_per_s']:.0f} mentions/s "
              f"on {len(v):,} mentions of {args.embed_passages} passages")
    a, b = vecs[True], vecs[False]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
    emb["bf16_vs_fp32_cosine"] = {"mean": round(float(cos.mean()), 5), "min": round(float(cos.min()), 5)}
    emb["full_index_run"] = mi.manifest.get("embedding")
    results["embedding"] = emb

    # size
    disk = (args.mentions / "mention_vectors.npy").stat().st_size
    before = rss_mb()
    exact = mi.searcher("exact")
    results["size"] = {"disk_mb": round(disk / 2**20, 1), "exact_cache_rss_growth_mb": round(rss_mb() - before, 1)}
    print(f"size: {results['size']}")

    # queries: g(q) of the held-out slot-filling queries
    texts = [json.loads(line)["text"] for line in open(args.pretrain / "heldout.jsonl", encoding="utf-8")]
    queries = np.concatenate([encoder.embed_queries(texts[i : i + 64]) for i in range(0, len(texts), 64)])
    results["queries"] = len(queries)
    kmax = max(args.k)
    mips = {"exact": {f"batch{bs}_qps": round(throughput(exact, queries, bs, kmax, args.seconds), 1) for bs in (1, 64)}}
    print(f"exact: {mips['exact']}")
    from drkit.dense.mips import FaissMIPS

    t = time.perf_counter()
    approx = FaissMIPS(mi.vectors, nprobe=max(args.nprobe))
    build_s = time.perf_counter() - t
    for nprobe in args.nprobe:
        approx.index.nprobe = nprobe
        row = {f"batch{bs}_qps": round(throughput(approx, queries, bs, kmax, args.seconds), 1) for bs in (1, 64)}
        for k in args.k:
            row[f"recall@{k}"] = round(recall_at_k(approx, exact, queries[:500], k), 4)
        row["nlist"] = approx.index.nlist
        row["build_s"] = round(build_s, 1)
        mips[f"faiss_ivf_nprobe{nprobe}"] = row
        print(f"faiss nprobe={nprobe}: {row}")
    results["mips"] = mips
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
