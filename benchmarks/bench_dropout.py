"""A training step with torch's dropout against `drkit.dense.dropout`'s cheap mask, side by side in one run.

A MiniLM-shaped BERT (6 layers, hidden 384, 12 heads, feed-forward 1536: all-MiniLM-L6-v2's shape,
randomly initialised: the time does not depend on the weights) takes AdamW steps (forward, backward,
optimiser) on batches of the shapes drkit trains on: a pretraining step's passages (20 x 96 word
pieces), a reader step (8 x 512) and a hop-mixing step's questions (16 x 24). Each shape is timed
with torch's own dropout and inside `cheap_dropout`, taking turns for ``--rounds`` rounds after a
warm-up step each; the median step is reported. Dropout alone (a 20 x 12 x 96 x 96 tensor of attention
weights) is timed the two ways as well. Writes OUT/bench_dropout.json and .md.

    .venv/bin/python benchmarks/bench_dropout.py --out benchmarks/results/dropout
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from bench_quantize import machine_info, write_report

from drkit.dense.dropout import cheap_dropout, mask_dropout
from drkit.util.hardware import configure_threads

SHAPES = {"pretraining passages": (20, 96), "reader": (8, 512), "questions": (16, 24)}


def minilm_shaped():
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    return BertModel(BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                intermediate_size=1536, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1))


def train_step(model, opt, ids, mask) -> float:
    t = time.perf_counter()
    out = model(input_ids=ids, attention_mask=mask).last_hidden_state
    out.square().mean().backward()
    opt.step()
    opt.zero_grad(set_to_none=True)
    return time.perf_counter() - t


def timed(fn, n: int) -> float:
    fn()
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=4, help="steps timed each way and shape")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    configure_threads(0)
    model = minilm_shaped().train()
    model.embeddings.word_embeddings.weight.requires_grad_(False)  # as drkit's training keeps them
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-5)
    gen = torch.Generator().manual_seed(0)
    steps: dict[str, dict[str, list[float]]] = {}
    for shape, (batch, length) in SHAPES.items():
        ids = torch.randint(1000, 30000, (batch, length), generator=gen)
        mask = torch.ones(batch, length, dtype=torch.long)
        mask[batch // 2:, length * 3 // 4:] = 0  # half the batch a quarter shorter, as padded batches are
        steps[shape] = {"torch": [], "cheap": []}
        for r in range(args.rounds + 1):  # round 0 warms up
            for way in (("torch", "cheap") if r % 2 == 0 else ("cheap", "torch")):
                if way == "cheap":
                    with cheap_dropout(model, "cpu"):
                        s = train_step(model, opt, ids, mask)
                else:
                    s = train_step(model, opt, ids, mask)
                if r:
                    steps[shape][way].append(s)
    x = torch.rand(20, 12, 96, 96)
    alone = {"torch": timed(lambda: torch.nn.functional.dropout(x, 0.1, True), 20),
             "cheap": timed(lambda: mask_dropout(x, 0.1), 20)}
    found = {"model": "MiniLM-shaped BERT (6 x 384, 12 heads), random weights", "rounds": args.rounds,
             "shapes": {k: list(v) for k, v in SHAPES.items()},
             "step_s": {k: {w: [round(s, 4) for s in v] for w, v in d.items()} for k, d in steps.items()},
             "median_step_s": {k: {w: round(statistics.median(v), 4) for w, v in d.items()} for k, d in steps.items()},
             "dropout_alone_ms": {k: round(v * 1000, 2) for k, v in alone.items()}, "machine": machine_info()}
    m = found["machine"]
    lines = ["# A training step with torch's dropout and with drkit's cheap mask", "",
             f"Machine: {m['platform']}, {m['threads']} torch threads, CPU capability {m['cpu_capability']}, torch "
             f"{m['torch']}. {found['model']}; AdamW steps, fp32; median of {args.rounds} steps each way, taking turns.",
             "", "| batch (sequences x word pieces) | torch dropout, s/step | cheap mask, s/step | speed-up |",
             "|---|---|---|---|"]
    for k, d in found["median_step_s"].items():
        b, L = SHAPES[k]
        lines.append(f"| {k} ({b} x {L}) | {d['torch']:.3f} | {d['cheap']:.3f} | {d['torch'] / d['cheap']:.2f}x |")
    lines += ["", f"Dropout alone on 20 x 12 x 96 x 96 attention weights: torch {found['dropout_alone_ms']['torch']} ms, "
                  f"cheap mask {found['dropout_alone_ms']['cheap']} ms."]
    write_report(args.out, "bench_dropout", found, lines)


if __name__ == "__main__":
    main()
