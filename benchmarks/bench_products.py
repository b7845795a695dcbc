#!/usr/bin/env python
"""The lean layers' fp32 products as `F.linear` against the weight stored transposed
(`drkit.dense.layers._transposed`), side by side in one run.

Two measurements, each taking turns between the two ways (``--rounds`` rounds, the median kept):

* products alone: ms of ``x W^T + b`` for MiniLM's three weight shapes over a range of rows, and whether
  the two give the same values (else the largest difference);
* a hop-mixing model (``--mixing INDEX RUN QUESTIONS``, repeatable): passage retrieval alone, questions/s at
  batch 1 (the first ``--timed`` questions) and 64, and R@5 and the top 5 of every question by each way.

Run it again with torch's, MKL's and oneDNN's kernels held to AVX2 code (the variables of
``bench_retriever.AVX2_CODE``: ``ATEN_CPU_CAPABILITY=avx2 MKL_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2``)
to see what a CPU without AVX-512 gets; the report says which code ran. Writes OUT/bench_products.json and
OUT/bench_products.md.

    .venv/bin/python benchmarks/bench_products.py \\
        --mixing runs/2wiki-f0/index runs/2wiki-f0/train-drkit runs/2wiki-f0/split/dev.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

from bench_layers import side_by_side
from bench_quantize import load_mixing, machine_info, top5, write_report

WAYS = ("F.linear", "transposed")
SHAPES = ((384, 1536), (1536, 384), (384, 384))  # (in, out) of MiniLM's feed-forward and attention products


@contextlib.contextmanager
def way(name: str, window: tuple[int, int] | None = None):
    """Inside, the lean layers' fp32 products use `F.linear` ("F.linear") or, where `_transposed` chooses it,
    the transposed weight: for the rows of `TRANSPOSED_ROWS`, or of `window` when given."""
    import drkit.dense.layers as layers

    rows = layers.TRANSPOSED_ROWS
    layers.TRANSPOSED_ROWS = (1, 0) if name == "F.linear" else window or rows
    try:
        yield
    finally:
        layers.TRANSPOSED_ROWS = rows


def _ms(fn, reps: int) -> float:
    for _ in range(max(reps // 20, 3)):
        fn()
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps * 1000


def products(rows_list: list[int], rounds: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from drkit.dense.layers import _linear

    every = (1, max(rows_list))  # the products alone: the transposed weight at every number of rows
    out = []
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n_in, n_out in SHAPES:
            lin = torch.nn.Linear(n_in, n_out)
            for rows in rows_list:
                x = torch.randn(rows, n_in, generator=gen)
                reps = 400 if rows <= 64 else 40
                times = {w: [] for w in WAYS}
                for _ in range(rounds):
                    for w in WAYS:
                        with way(w, every):
                            times[w].append(_ms(lambda: _linear(lin, x), reps))
                with way("transposed", every):
                    got = _linear(lin, x)
                want = F.linear(x, lin.weight, lin.bias)
                out.append({"in": n_in, "out": n_out, "rows": rows, **{f"ms {w}": round(statistics.median(t), 4)
                                                                        for w, t in times.items()},
                            "equal": bool(torch.equal(got, want)), "max_diff": float((got - want).abs().max())})
    return out


def mixing(index: str, run: str, questions: str, n_timed: int, rounds: int) -> dict:
    from drkit.qa.stats import per_question

    kit, rows, texts = load_mixing(index, run, questions, "none")
    retriever = kit.retriever
    found = {"run": run, "questions": len(rows)}
    ranked = {}
    for w in WAYS:
        with way(w):
            ranked[w] = top5(retriever, texts)
        found[f"R@5 {w}"] = round(float(per_question(ranked[w], [r["supporting"] for r in rows], 5).mean()), 4)
    found["same top 5"] = sum(a == b for a, b in zip(*ranked.values()))
    speed = side_by_side(lambda c: retriever.retrieve(c, 5), texts, n_timed, rounds, WAYS, way)
    for w in WAYS:
        found[f"q/s b1 {w}"], found[f"q/s b64 {w}"] = speed[w]["qps_batch1"], speed[w]["qps_batch64"]
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mixing", nargs=3, action="append", default=[], metavar=("INDEX", "RUN", "QUESTIONS"),
                    help="a hop-mixing model's index, run (or model) folder and JSONL questions (repeatable)")
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 4, 8, 16, 24, 40, 48, 64, 128, 512],
                    help="rows of the products timed alone (default: %(default)s)")
    ap.add_argument("--timed", type=int, default=100, help="questions timed at batch 1 (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="turns of each way; the median is kept (default: %(default)s)")
    ap.add_argument("--out", default="benchmarks/results/products", help="output folder (default: %(default)s)")
    args = ap.parse_args()

    machine = machine_info() | {k: os.environ[k] for k in ("MKL_ENABLE_INSTRUCTIONS", "ATEN_CPU_CAPABILITY")
                                if k in os.environ}
    found = {"machine": machine, "products": products(args.rows, args.rounds),
             "mixing": [mixing(*m, args.timed, args.rounds) for m in args.mixing]}
    lines = [f"# fp32 products: F.linear against the weight stored transposed, side by side ({args.rounds} rounds, "
             "medians)", "", f"Machine: {json.dumps(machine)}.", "",
             "| in x out | rows | ms F.linear | ms transposed | same values |", "|---|---|---|---|---|"]
    for r in found["products"]:
        same = "yes" if r["equal"] else f"no (max diff {r['max_diff']:.1e})"
        lines.append(f"| {r['in']} x {r['out']} | {r['rows']} | {r['ms F.linear']} | {r['ms transposed']} | {same} |")
    if found["mixing"]:
        lines += ["", "| hop-mixing run | questions | R@5 F.linear / transposed | same top 5 | q/s batch 1 | q/s batch 64 |",
                  "|---|---|---|---|---|---|"]
        for m in found["mixing"]:
            lines.append(f"| {m['run']} | {m['questions']} | {m['R@5 F.linear']} / {m['R@5 transposed']} | "
                         f"{m['same top 5']} of {m['questions']} | {m['q/s b1 F.linear']} -> {m['q/s b1 transposed']} | "
                         f"{m['q/s b64 F.linear']} -> {m['q/s b64 transposed']} |")
    write_report(args.out, "bench_products", found, lines)


if __name__ == "__main__":
    main()
