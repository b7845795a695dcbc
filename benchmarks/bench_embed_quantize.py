"""Embedding mentions with the mention encoder in fp32 against int8 dynamic quantisation, side by side in one run.

For a sparse index and the encoder that embeds it (a `drkit pretrain` run or its encoder), ``--batches``
encoder batches of `drkit embed`'s plan (seeded, spread over the passage lengths) are embedded by the
fp32 encoder and by a copy whose passage transformer's Linear layers are int8 dynamic quantisation
(`drkit.dense.embedding.mention_encoder`, what ``drkit embed --quantize int8`` embeds with), taking
turns for ``--rounds`` rounds. Records word pieces a second for each, and how far the int8 vectors are from
the fp32 ones (the cosine of each mention's two vectors, and the relative error of them all). Writes
OUT/bench_embed_quantize.json and .md.

    .venv/bin/python benchmarks/bench_embed_quantize.py --index runs/2wiki-f0-bkt/index \
        --encoder runs/2wiki-f0-bkt/pretrain-kb_qa --out benchmarks/results/embed-int8
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np
import torch
from bench_quantize import machine_info, write_report

from drkit.dense.embedding import EmbedConfig, batch_plan, embed_batch, mention_encoder, mention_rows
from drkit.dense.encoder import DualEncoder
from drkit.dense.mentions import resolve_encoder_dir
from drkit.dense.quantize import transformer_linears
from drkit.index.sparse import SparseIndex
from drkit.util.hardware import configure_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--encoder", required=True, type=Path, help="a drkit pretrain run or its encoder directory")
    ap.add_argument("--batches", type=int, default=40, help="encoder batches of the plan embedded each way")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    configure_threads(0)
    index = SparseIndex.load(args.index)
    fp32 = DualEncoder.load(resolve_encoder_dir(args.encoder)).eval()
    int8 = mention_encoder(fp32, EmbedConfig(quantize="int8"))  # what drkit embed --quantize int8 embeds with
    quantized = len(transformer_linears(fp32.passage_model))
    config = EmbedConfig(precision="fp32", device="cpu")
    plan = batch_plan(index, config)
    picked = sorted(np.random.default_rng(args.seed).choice(len(plan), min(args.batches, len(plan)), replace=False))
    mentions, indptr = np.asarray(index.mentions), index.passage_mention_indptr
    lengths = np.diff(np.asarray(index.piece_offsets))
    pieces = int(sum(lengths[p] + 2 for i in picked for p in plan[i]))
    seconds: dict[str, list[float]] = {"fp32": [], "int8": []}
    vectors = {}
    with torch.inference_mode():
        for r in range(args.rounds):
            for name in (("fp32", "int8") if r % 2 == 0 else ("int8", "fp32")):
                encoder = fp32 if name == "fp32" else int8
                t = time.perf_counter()
                out = [v for i in picked for _, v in embed_batch(index, encoder, mentions, mention_rows(indptr, plan[i]),
                                                                 plan[i], config)]
                seconds[name].append(time.perf_counter() - t)
                vectors[name] = np.concatenate(out).astype(np.float32)
    a, b = vectors["fp32"], vectors["int8"]
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    found = {"index": str(args.index), "encoder": str(args.encoder), "batches": len(picked), "pieces": pieces,
             "mentions": len(a), "linears_quantised": quantized,
             "seconds": {k: [round(s, 2) for s in v] for k, v in seconds.items()},
             "pieces_per_s": {k: round(pieces / statistics.median(v), 1) for k, v in seconds.items()},
             "cosine": {"mean": round(float(cos.mean()), 4), "p01": round(float(np.quantile(cos, 0.01)), 4),
                        "min": round(float(cos.min()), 4)},
             "relative_error": round(float(np.linalg.norm(a - b) / np.linalg.norm(a)), 4), "machine": machine_info()}
    m = found["machine"]
    lines = [f"# Embedding in fp32 and int8 ({args.index}, {len(picked)} batches, {pieces:,} word pieces, "
             f"{len(a):,} mentions)", "",
             f"Machine: {m['platform']}, {m['threads']} torch threads, CPU capability {m['cpu_capability']}, torch "
             f"{m['torch']}; {quantized} Linear layers quantised.", "",
             "| encoder | seconds (each round) | word pieces/s (median) |", "|---|---|---|"]
    lines += [f"| {k} | {', '.join(f'{s:.1f}' for s in v)} | {found['pieces_per_s'][k]:,.0f} |" for k, v in seconds.items()]
    lines += ["", f"int8 against fp32, each mention's vector: cosine mean {found['cosine']['mean']}, 1st percentile "
                  f"{found['cosine']['p01']}, min {found['cosine']['min']}; relative error of them all "
                  f"{found['relative_error']}."]
    write_report(args.out, "bench_embed_quantize", found, lines)


if __name__ == "__main__":
    main()
