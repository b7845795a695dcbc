"""IVF-PQ's recall against exact MIPS, and its speed, over its parameters, on a built index and mention vectors.

    .venv/bin/python benchmarks/bench_ann.py --index runs/scale/1000000/index \
        --mentions runs/scale/1000000/mentions --encoder runs/scale/encoder-base/encoder

The queries are the first hop's of an untrained 2-hop model on `--questions` questions naming entities drawn
by degree, as `bench_scale.py` asks them. The exact top-K (K = `--k`) is computed once, block by block, from
the memory-mapped fp16 vectors; then for each IVF-PQ index (`--nlist` lists x `--pq-m` bytes a mention, k-means
on a sample) and each search setting (`--nprobe` lists visited x `--rerank`: the best rerank x K candidates of
the codes scored again exactly), the recall@K and the queries/s of the search alone at batch 1 and 64.
Writes ``OUT/bench_ann.json`` and ``OUT/bench_ann.md``.
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

from drkit.dense.encoder import DualEncoder
from drkit.dense.mips import ExactMIPS, FaissMIPS
from drkit.reason.entity_set import EntitySet
from drkit.reason.model import ModelConfig, MultiHopModel
from drkit.reason.vkb import VirtualKB


def first_hop_queries(vkb: VirtualKB, encoder: Path, n: int, seed: int = 7) -> np.ndarray:
    """(n, p) float32: the first hop's queries of questions naming entities drawn by degree (bench_scale's)."""
    model = MultiHopModel.from_encoder(DualEncoder.load(encoder), ModelConfig(hops=2)).eval()
    model.set_entities(vkb.entity_names)
    degree = np.bincount(np.asarray(vkb.index.mention_entity), minlength=vkb.index.n_entities)
    topics = np.random.default_rng(seed).choice(len(degree), n, p=degree / degree.sum())
    texts = [f"which entities are linked from the page of {vkb.entity_names[e]}" for e in topics]
    with torch.no_grad():
        return model.hop_queries(model.encode(texts, True), 0, EntitySet.one_hot(topics)).float().numpy()


def qps(searcher, queries: np.ndarray, k: int, batch: int) -> float:
    searcher.search(queries[:batch], k)  # warm-up
    t = time.perf_counter()
    for lo in range(0, len(queries), batch):
        searcher.search(queries[lo : lo + batch], k)
    return len(queries) / (time.perf_counter() - t)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--index", type=Path, required=True)
    p.add_argument("--mentions", type=Path, required=True)
    p.add_argument("--encoder", type=Path, required=True, help="the encoder folder the queries are made with")
    p.add_argument("--questions", type=int, default=64)
    p.add_argument("--k", type=int, default=1000)
    p.add_argument("--nlist", type=int, nargs="+", default=[1024, 4096])
    p.add_argument("--pq-m", type=int, nargs="+", default=[32, 64])
    p.add_argument("--nprobe", type=int, nargs="+", default=[16, 64, 256])
    p.add_argument("--rerank", type=int, nargs="+", default=[4, 16])
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/ann"))
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    args.out.mkdir(parents=True, exist_ok=True)
    vkb = VirtualKB.load(args.index, args.mentions, "exact")
    vectors = vkb.mentions.vectors
    queries = first_hop_queries(vkb, args.encoder, args.questions)
    t = time.perf_counter()
    _, exact = ExactMIPS(vectors, block_size=1 << 20).search(queries, args.k)
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
              "parameters": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(args).items()},
              "mentions": int(len(vectors)), "exact_s": round(time.perf_counter() - t, 2), "rows": []}
    print(f"{len(vectors):,} mentions; exact top-{args.k} of {len(queries)} queries in {result['exact_s']} s")
    for nlist in args.nlist:
        for pq_m in args.pq_m:
            t = time.perf_counter()
            searcher = FaissMIPS(vectors, nlist=nlist, pq_m=pq_m)
            build_s = round(time.perf_counter() - t, 1)
            for nprobe in args.nprobe:
                for rerank in args.rerank:
                    searcher.index.nprobe = min(nprobe, nlist)
                    searcher.rerank = rerank
                    _, found = searcher.search(queries, args.k)
                    recall = np.mean([len(np.intersect1d(a[a >= 0], e[e >= 0])) / max(1, int((e >= 0).sum()))
                                      for a, e in zip(found, exact)])
                    row = {"nlist": nlist, "pq_m": pq_m, "nprobe": nprobe, "rerank": rerank, "build_s": build_s,
                           "codes_mb": round(searcher.memory_bytes / 2**20, 1), f"recall_at_{args.k}": round(float(recall), 4),
                           "qps_batch1": round(qps(searcher, queries[:32], args.k, 1), 1),
                           "qps_batch64": round(qps(searcher, queries, args.k, 64), 1)}
                    result["rows"].append(row)
                    print(row, flush=True)
            del searcher
            (args.out / "bench_ann.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"IVF-PQ against exact MIPS over {len(vectors):,} mentions ({args.index}); {len(queries)} first-hop "
             f"queries of an untrained model; search alone, {os.cpu_count()} cores", "",
             f"| lists | bytes a mention | lists visited | rerank x K | recall@{args.k} | q/s b1 | q/s b64 | build s |",
             "|---|---|---|---|---|---|---|---|"]
    for r in result["rows"]:
        lines.append(f"| {r['nlist']} | {r['pq_m']} | {r['nprobe']} | {r['rerank']} | {r[f'recall_at_{args.k}']} | "
                     f"{r['qps_batch1']} | {r['qps_batch64']} | {r['build_s']} |")
    (args.out / "bench_ann.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
