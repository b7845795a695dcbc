"""AdamW's update as torch loops over tensors (its CPU default) against its fused kernel (`drkit.util.runs.adamw`),
side by side in one run.

A MiniLM-shaped BERT (`bench_dropout.minilm_shaped`: all-MiniLM-L6-v2's shape, 22.7M parameters, randomly
initialised) is given gradients, and AdamW steps over its parameters in two groups (as drkit's trainings have
a body and heads) with ``foreach=False`` (the loop), ``foreach=True`` and ``fused=True``, taking turns for
``--rounds`` rounds of ``--steps`` steps after a warm-up; the median step is reported. Then whole training steps
(forward, backward, update, inside `cheap_dropout` as drkit trains) of the shapes of `bench_dropout` with the loop
and the fused update, taking turns, and how far the fused weights are from the loop's after those steps. Writes
OUT/bench_adamw.json and .md.

    .venv/bin/python benchmarks/bench_adamw.py --out benchmarks/results/adamw
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch
from bench_dropout import SHAPES, minilm_shaped, train_step
from bench_quantize import machine_info, write_report

from drkit.dense.dropout import cheap_dropout
from drkit.util.hardware import configure_threads

UPDATES = {"loop (torch's CPU default)": {"foreach": False}, "foreach": {"foreach": True}, "fused (drkit)": {"fused": True}}


def optimiser(model, **kind) -> torch.optim.AdamW:
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW([{"params": params[:-4], "lr": 1e-4}, {"params": params[-4:], "lr": 1e-3}],
                             weight_decay=0.01, **kind)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=10, help="updates timed a round")
    ap.add_argument("--train-steps", type=int, default=3, help="whole training steps a shape a round")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    threads = configure_threads()
    model = minilm_shaped()
    for p in model.parameters():
        p.grad = torch.randn_like(p) * 1e-3
    opts = {name: optimiser(model, **kind) for name, kind in UPDATES.items()}
    update_ms: dict = {name: [] for name in UPDATES}
    for r in range(args.rounds):
        for name in (list(UPDATES) if r % 2 == 0 else list(UPDATES)[::-1]):
            opts[name].step()  # warm-up: its state made
            t = time.perf_counter()
            for _ in range(args.steps):
                opts[name].step()
            update_ms[name].append((time.perf_counter() - t) / args.steps * 1000)

    step_s: dict = {}
    drift: dict = {}
    for shape, (rows, pieces) in SHAPES.items():
        torch.manual_seed(1)
        ids = torch.randint(1000, 30000, (rows, pieces))
        mask = torch.ones(rows, pieces, dtype=torch.long)
        models = {kind: minilm_shaped().train() for kind in ("loop", "fused")}
        opts_shape = {"loop": optimiser(models["loop"], foreach=False), "fused": optimiser(models["fused"], fused=True)}
        step_s[shape] = {kind: [] for kind in models}
        for r in range(args.rounds):
            for kind in (["loop", "fused"] if r % 2 == 0 else ["fused", "loop"]):
                with cheap_dropout(models[kind], "cpu"):
                    for _ in range(args.train_steps):
                        torch.manual_seed(r)  # both take the same dropout draws in a round
                        step_s[shape][kind].append(train_step(models[kind], opts_shape[kind], ids, mask))
        loop, fused = (dict(models[k].named_parameters()) for k in ("loop", "fused"))
        drift[shape] = max(float((fused[n] - p).abs().max()) for n, p in loop.items())
        del models, opts_shape
    report = {"threads": threads, "machine": machine_info(), "update_ms": update_ms, "train_step_s": step_s,
              "max_weight_difference_fused_vs_loop": drift, "parameters": sum(p.numel() for p in model.parameters())}
    m = report["machine"]
    lines = [f"# AdamW: torch's loop over tensors against its fused kernel ({m['platform']}, {threads} threads, "
             f"torch {m['torch']}, CPU capability {m['cpu_capability']})", "",
             f"One update of a MiniLM-shaped model's {report['parameters'] / 1e6:.1f}M parameters, median of {args.rounds} "
             f"rounds of {args.steps}:", "", "| update | ms a step | rounds |", "|---|---|---|"]
    for name, ms in update_ms.items():
        lines.append(f"| {name} | {statistics.median(ms):.1f} | {', '.join(f'{x:.1f}' for x in ms)} |")
    lines += ["", f"Whole training steps (forward, backward, update; median of {args.rounds} x {args.train_steps}), "
              "and the largest weight difference after them:", "",
              "| shape (rows x pieces) | loop, s | fused, s | fused / loop | largest weight difference |", "|---|---|---|---|---|"]
    for shape, (rows, pieces) in SHAPES.items():
        a, b = (statistics.median(step_s[shape][k]) for k in ("loop", "fused"))
        lines.append(f"| {shape} ({rows} x {pieces}) | {a:.3f} | {b:.3f} | {b / a:.3f} | {drift[shape]:.2e} |")
    write_report(args.out, "bench_adamw", report, lines)


if __name__ == "__main__":
    main()
