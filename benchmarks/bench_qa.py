#!/usr/bin/env python
"""Question-answering throughput of trained DrKIT models: questions/s by hop count, batch size,
retrieval, K and MIPS kind, with a breakdown of where one batch's time goes.

For each `--model HOPS:DIR` it answers a seeded sample of that hop count's dev questions
(`--questions` per model) and reports questions/s at batch 1 and 64 for restricted retrieval and for
global retrieval with exact MIPS, for each K in `--k`; global retrieval with FAISS IVF (`--nprobe`)
at the model's K; and Hits@1 on the same sample for each setting (so
speed is never reported without the accuracy it comes with). Timings exclude loading; each setting
is run once untimed on the first batch first. Writes JSON (default benchmarks/results/bench_qa.json).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from drkit.data.questions import load_questions
from drkit.qa.pipeline import DrKIT
from drkit.reason.predict import answer_batches, hits
from drkit.reason.vkb import VirtualKB
from drkit.util.sampling import sample_rows

ROOT = Path(__file__).resolve().parent.parent


def sample(path, entities, n, seed=0):
    items = [it for it in load_questions(path, entities) if it.problem is None]
    return [items[i] for i in sample_rows(len(items), n, seed)]


def measure(model, vkb, items, batch, hops):
    texts, topics = [it.text for it in items], np.array([it.topic for it in items])
    answer_batches(model, vkb, texts[:batch], topics[:batch], batch, top=1, hops=hops)  # warm-up
    ids, _, seconds = answer_batches(model, vkb, texts, topics, batch, top=1, hops=hops)
    return {"questions": len(items), "questions_per_s": round(len(items) / seconds, 1),
            "hits@1": round(float(hits(ids, items, 1).mean()), 4)}


@torch.no_grad()
def breakdown(model, vkb, items, batch=64):
    """Seconds of one batch spent in the question encoder, the MIPS and the rest of the follow."""
    texts, topics = [it.text for it in items[:batch]], np.array([it.topic for it in items[:batch]])
    spent = {"search": 0.0}
    search = vkb.search

    def timed_search(q, k):
        t = time.perf_counter()
        r = search(q, k)
        spent["search"] += time.perf_counter() - t
        return r

    pair_scores = vkb.graph.pair_scores

    def timed_pairs(*a, **kw):
        t = time.perf_counter()
        r = pair_scores(*a, **kw)
        spent["search"] += time.perf_counter() - t
        return r

    vkb.search, vkb.graph.pair_scores = timed_search, timed_pairs
    t = time.perf_counter()
    model(texts, topics, vkb)
    total = time.perf_counter() - t
    vkb.search, vkb.graph.pair_scores = search, pair_scores
    t = time.perf_counter()
    ids, mask = model.tokenize(texts)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        model.encoder.encode(ids, mask)
    encode = time.perf_counter() - t
    return {"batch": len(texts), "retrieval": model.follow_config.retrieval, "total_s": round(total, 4),
            "mips_or_pair_scores_s": round(spent["search"], 4),
            "shared_encoder_s": round(encode, 4), "rest_s": round(total - spent["search"] - encode, 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", default="runs/metaqa-index")
    ap.add_argument("--model", action="append", required=True, metavar="HOPS:DIR",
                    help="a trained model and its hop count, e.g. 3:runs/m3 (repeatable)")
    ap.add_argument("--data", default="../shared/data/metaqa")
    ap.add_argument("--questions", type=int, default=640, help="dev questions per model")
    ap.add_argument("--k", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--nprobe", type=int, default=64)
    ap.add_argument("--out", default=str(ROOT / "benchmarks/results/bench_qa.json"))
    args = ap.parse_args()

    results = {"machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                           "processor": platform.processor(), "python": platform.python_version()},
               "index": args.index, "models": {}}
    for spec in args.model:
        hops, _, path = spec.partition(":")
        hops = int(hops)
        kit = DrKIT.load(args.index, path)
        model, vkb = kit.model, kit.vkb
        items = sample(Path(args.data) / f"{hops}-hop/vanilla/qa_dev.txt", vkb.index.entities, args.questions)
        base = model.follow_config
        rows = []
        for retrieval in ("restricted", "global"):
            for k in args.k:
                model.follow_config = dataclasses.replace(base, top_k=k, retrieval=retrieval)
                for batch in (64, 1):
                    r = measure(model, vkb, items if batch == 64 else items[: min(len(items), 200)], batch, hops)
                    rows.append({"retrieval": retrieval, "mips": "exact", "K": k, "batch": batch, **r})
                    print(f"{hops}-hop {retrieval} exact K={k} batch {batch}: {r}", flush=True)
        model.follow_config = base
        entry = {"model": str(path), "follow": dataclasses.asdict(base), "exact": rows,
                 "breakdown_batch64": breakdown(model, vkb, items)}
        try:
            model.follow_config = dataclasses.replace(base, retrieval="global")
            vkb_f = VirtualKB(vkb.index, vkb.mentions, "faiss", nprobe=args.nprobe)
            for batch in (64, 1):
                r = measure(model, vkb_f, items if batch == 64 else items[:200], batch, hops)
                entry.setdefault("faiss", []).append({"nprobe": args.nprobe, "K": base.top_k, "batch": batch, **r})
                print(f"{hops}-hop faiss nprobe={args.nprobe} batch {batch}: {r}", flush=True)
        except Exception as exc:  # faiss is optional
            entry["faiss_error"] = str(exc)
        model.follow_config = base
        results["models"][f"{hops}-hop"] = entry
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
