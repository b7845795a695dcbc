#!/usr/bin/env python
"""MIPS throughput and recall on synthetic mention vectors of MetaQA size.

Vectors: `--mentions` (default 295,128, the mentions of the MetaQA index) x `--dim` (default 400)
drawn around `--clusters` random centres (mention vectors cluster by entity type), stored float16
and memory-mapped, as the dense mention index will be. Queries are drawn the same way. For exact
search (`drkit.dense.mips.ExactMIPS`, bf16 blocks cached in memory) and approximate search
(`drkit.dense.mips.FaissMIPS`, IVF) it reports queries/s at batch 1 and batch 64 and, for the approximate
index, recall@k against exact float32 search (also reported for the bf16 exact search). Writes a JSON file (default benchmarks/results/bench_mips.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from drkit.dense.mips import ExactMIPS, FaissMIPS, recall_at_k

ROOT = Path(__file__).resolve().parent.parent


def throughput(index, queries: np.ndarray, batch: int, k: int, seconds: float) -> float:
    index.search(queries[:batch], k)  # warm-up
    done, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        lo = (done % (len(queries) - batch + 1))
        index.search(queries[lo : lo + batch], k)
        done += batch
    return done / (time.perf_counter() - start)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--mentions", type=int, default=295_128)
    p.add_argument("--dim", type=int, default=400)
    p.add_argument("--clusters", type=int, default=1000)
    p.add_argument("--k", type=int, default=100)
    p.add_argument("--nprobe", type=int, nargs="+", default=[8, 32])
    p.add_argument("--seconds", type=float, default=5.0, help="time per throughput measurement")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "bench_mips.json")
    args = p.parse_args()

    rng = np.random.default_rng(args.seed)
    centres = rng.standard_normal((args.clusters, args.dim)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "vectors.npy"
        vectors = np.lib.format.open_memmap(path, mode="w+", dtype=np.float16, shape=(args.mentions, args.dim))
        for lo in range(0, args.mentions, 1 << 16):
            n = min(1 << 16, args.mentions - lo)
            vectors[lo : lo + n] = centres[rng.integers(0, args.clusters, n)] + 0.5 * rng.standard_normal((n, args.dim))
        vectors.flush()
        vectors = np.load(path, mmap_mode="r")
        queries = (centres[rng.integers(0, args.clusters, 512)] + 0.5 * rng.standard_normal((512, args.dim))).astype(np.float32)

        results = {"benchmark": "mips", "machine": {"nproc": os.cpu_count(), "platform": platform.platform(),
                                                    "torch": torch.__version__, "torch_threads": torch.get_num_threads()},
                   "parameters": vars(args) | {"out": str(args.out)}, "index_bytes_on_disk": path.stat().st_size,
                   "rows": []}
        t = time.perf_counter()
        exact = ExactMIPS(vectors).cache()
        results["exact_load_s"] = round(time.perf_counter() - t, 2)
        results["exact_bytes_in_memory"] = args.mentions * args.dim * 2
        for batch in (1, 64):
            qps = throughput(exact, queries, batch, args.k, args.seconds)
            results["rows"].append({"index": "exact bf16", "batch": batch, "queries_per_s": round(qps, 1)})
            print(f"exact bf16          batch {batch:3d}: {qps:8.1f} queries/s")
        reference = ExactMIPS(vectors, compute_dtype=torch.float32)  # recall is measured against fp32 exact search
        results[f"exact_bf16_recall_at_{args.k}"] = round(recall_at_k(exact, reference, queries[:256], args.k), 4)
        print(f"exact bf16 recall@{args.k} against fp32: {results[f'exact_bf16_recall_at_{args.k}']:.3f}")
        import faiss  # noqa: F401  (FaissMIPS needs it)
        t = time.perf_counter()
        approx = FaissMIPS(vectors, nprobe=args.nprobe[0])
        results["faiss_build_s"] = round(time.perf_counter() - t, 2)
        for nprobe in args.nprobe:
            approx.index.nprobe = nprobe
            recall = recall_at_k(approx, reference, queries[:256], args.k)
            for batch in (1, 64):
                qps = throughput(approx, queries, batch, args.k, args.seconds)
                results["rows"].append({"index": f"faiss IVF{approx.index.nlist} nprobe {nprobe}", "batch": batch,
                                        "queries_per_s": round(qps, 1), f"recall_at_{args.k}": round(recall, 4)})
                print(f"faiss nprobe {nprobe:3d}    batch {batch:3d}: {qps:8.1f} queries/s  recall@{args.k} {recall:.3f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
