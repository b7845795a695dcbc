"""Embedding mentions with the mention encoder in fp32, int8 dynamic quantisation and bf16 autocast, side by side
in one run.

For a sparse index and the encoder that embeds it (a `drkit pretrain` run or its encoder), ``--batches``
encoder batches of `drkit embed`'s plan (seeded, spread over the passage lengths) are embedded by the
fp32 encoder, by a copy whose passage transformer's Linear layers are int8 dynamic quantisation
(`drkit.dense.embedding.mention_encoder`, what ``drkit embed --quantize int8`` embeds with) and, with
``--variants ... bf16``, by the fp32 encoder under bf16 autocast (``drkit embed --precision bf16``), taking
turns for ``--rounds`` rounds. Records word pieces a second for each, and how far the int8 and bf16 vectors
are from the fp32 ones (the cosine of each mention's two vectors, and the relative error of them all). Writes
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

VARIANTS = ("fp32", "int8", "bf16")


def closeness(a: np.ndarray, b: np.ndarray) -> dict:
    """How far the vectors `b` are from `a`, row by row: the cosine of each pair, and the relative error of all."""
    cos = (a * b).sum(1) / np.maximum(np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1), 1e-12)
    return {"cosine": {"mean": round(float(cos.mean()), 4), "p01": round(float(np.quantile(cos, 0.01)), 4),
                       "min": round(float(cos.min()), 4)},
            "relative_error": round(float(np.linalg.norm(a - b) / np.linalg.norm(a)), 4)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--index", required=True, type=Path)
    ap.add_argument("--encoder", required=True, type=Path, help="a drkit pretrain run or its encoder directory")
    ap.add_argument("--batches", type=int, default=40, help="encoder batches of the plan embedded each way")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=["fp32", "int8"],
                    help="what embeds: fp32, int8 (dynamic quantisation, fp32 activations), bf16 (autocast)")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    configure_threads(0)
    index = SparseIndex.load(args.index)
    fp32 = DualEncoder.load(resolve_encoder_dir(args.encoder)).eval()
    int8 = mention_encoder(fp32, EmbedConfig(quantize="int8"))  # what drkit embed --quantize int8 embeds with
    quantized = len(transformer_linears(fp32.passage_model))
    config = EmbedConfig(precision="fp32", device="cpu")
    configs = {"fp32": config, "int8": config, "bf16": EmbedConfig(precision="bf16", device="cpu")}
    encoders = {"fp32": fp32, "int8": int8, "bf16": fp32}
    variants = ["fp32"] + [v for v in args.variants if v != "fp32"]  # fp32 is what the others are compared with
    plan = batch_plan(index, config)
    picked = sorted(np.random.default_rng(args.seed).choice(len(plan), min(args.batches, len(plan)), replace=False))
    mentions, indptr = np.asarray(index.mentions), index.passage_mention_indptr
    lengths = np.diff(np.asarray(index.piece_offsets))
    pieces = int(sum(lengths[p] + 2 for i in picked for p in plan[i]))
    seconds: dict[str, list[float]] = {name: [] for name in variants}
    vectors = {}
    with torch.inference_mode():
        for r in range(args.rounds):
            for name in (variants if r % 2 == 0 else variants[::-1]):  # each round in turn, the next one reversed
                t = time.perf_counter()
                out = [v for i in picked for _, v in embed_batch(index, encoders[name], mentions,
                                                                 mention_rows(indptr, plan[i]), plan[i], configs[name])]
                seconds[name].append(time.perf_counter() - t)
                vectors[name] = np.concatenate(out).astype(np.float32)
    a = vectors["fp32"]
    found = {"index": str(args.index), "encoder": str(args.encoder), "batches": len(picked), "pieces": pieces,
             "mentions": len(a), "linears_quantised": quantized,
             "seconds": {k: [round(s, 2) for s in v] for k, v in seconds.items()},
             "pieces_per_s": {k: round(pieces / statistics.median(v), 1) for k, v in seconds.items()},
             "against_fp32": {name: closeness(a, vectors[name]) for name in variants[1:]}, "machine": machine_info()}
    m = found["machine"]
    lines = [f"# Embedding in {', '.join(variants)} ({args.index}, {len(picked)} batches, {pieces:,} word pieces, "
             f"{len(a):,} mentions)", "",
             f"Machine: {m['platform']}, {m['threads']} torch threads, CPU capability {m['cpu_capability']}, torch "
             f"{m['torch']}; {quantized} Linear layers quantised.", "",
             "| encoder | seconds (each round) | word pieces/s (median) |", "|---|---|---|"]
    lines += [f"| {k} | {', '.join(f'{s:.1f}' for s in v)} | {found['pieces_per_s'][k]:,.0f} |" for k, v in seconds.items()]
    lines += [""] + [f"{name} against fp32, each mention's vector: cosine mean {c['cosine']['mean']}, 1st percentile "
                     f"{c['cosine']['p01']}, min {c['cosine']['min']}; relative error of them all {c['relative_error']}."
                     for name, c in found["against_fp32"].items()]
    write_report(args.out, "bench_embed_quantize", found, lines)


if __name__ == "__main__":
    main()
