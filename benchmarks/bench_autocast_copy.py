#!/usr/bin/env python
"""The lean layers' products under CPU bf16 autocast: `F.linear` with autocast casting the fp32 weight at each
question against a bf16 copy of the weight made once (`drkit.dense.layers._autocast_copy`), side by side in one
run, taking turns (``--rounds`` rounds, the median kept).

A question enters autocast for its shared layers and again for each hop's layers, and each weight is used once
in each, so autocast's own cache of cast weights (kept until autocast is left) never serves a question alone:
"autocast" here times one product inside an autocast region of its own. For each of MiniLM's three weight shapes
and a range of rows: ms a product each way, and whether the two give the same bits.

With ``--run RUN`` (a `drkit reproduce-2wiki` run folder), also the whole retriever in bf16 (passages of the first
``--questions`` dev questions, top 20) at batch 1 and 64, and the run's reader reading drkit's top 5 of the first
``--read`` of them at batch 1 (the comparison rules off), each way in turns in one process (the copy switched off
for "autocast casts"), and whether the two give the same passages, scores and answers. In one process the two
ways share the machine's drift, which on a shared virtual machine moves more than the difference between two
processes (`benchmarks/bench_retriever.py --code before=OLD@bf16 --code after=.@bf16` compares code versions so).
Writes OUT/bench_autocast_copy.json and OUT/bench_autocast_copy.md.

    .venv/bin/python benchmarks/bench_autocast_copy.py --run runs/2wiki-f0 --out benchmarks/results/autocast-copy
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

from bench_products import SHAPES, _ms
from bench_quantize import machine_info, write_report

import drkit.dense.layers  # noqa: E402

WAYS = ("autocast casts", "bf16 copy")
REAL = drkit.dense.layers._autocast_copy
ROOT = Path(__file__).resolve().parent.parent


def products(rows_list: list[int], rounds: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    from drkit.dense.layers import _linear

    out = []
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for n_in, n_out in SHAPES:
            lin = torch.nn.Linear(n_in, n_out)
            for rows in rows_list:
                x = torch.randn(rows, n_in, generator=gen)

                def cast():  # what the code did before: autocast's F.linear, the weight cast in the call
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return F.linear(x, lin.weight, lin.bias)

                def copy():  # the lean layer now: the copy made once, read in each region
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        return _linear(lin, x)

                reps = 400 if rows <= 64 else 40
                times = {w: [] for w in WAYS}
                for _ in range(rounds):
                    for w, fn in zip(WAYS, (cast, copy)):
                        times[w].append(_ms(fn, reps))
                got, want = copy(), cast()
                out.append({"in": n_in, "out": n_out, "rows": rows, "dtype": str(got.dtype),
                            **{f"ms {w}": round(statistics.median(t), 4) for w, t in times.items()},
                            "equal": bool(torch.equal(got, want))})
    return out


def _way(name: str):
    """The lean layers with the bf16 copy ("bf16 copy") or without it ("autocast casts")."""
    import drkit.dense.layers as layers

    layers._autocast_copy = REAL if name == "bf16 copy" else (lambda module, x: None)


def whole(run: Path, n: int, n_read: int, rounds: int) -> dict:
    import torch

    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.reader.examples import ReaderExample, read_passages
    from drkit.reader.model import Reader
    from drkit.reader.reading import ReadConfig
    from drkit.util.hardware import choose

    retriever = DrKITRetriever.load(run / "index", run / "train-drkit", answers=False, precision="bf16")
    rows = [json.loads(line) for line in (run / "split" / "dev.jsonl").read_text().splitlines()][:n]
    questions = [r["question"] for r in rows]
    reader = Reader.load(run / "train-reader")
    corpus = {p.id: p for p in read_passages(ROOT / "../shared/data/2wiki/corpus.jsonl")}
    examples = []
    for r in retriever.retrieve(questions[:n_read], top=5):
        q = questions[len(examples)]
        examples.append(ReaderExample(str(len(examples)), q, tuple(corpus[retriever.pages.keys[a]] for a in r.articles[:5])))
    config, compute = ReadConfig(compare=False), choose("bf16", "cpu")
    times = {(w, k): [] for w in WAYS for k in ("b1", "b64", "reader b1")}
    outputs = {}
    for w in WAYS:  # warm-up, and each way's outputs
        _way(w)
        got = retriever.retrieve(questions, top=20)
        outputs[w] = ([(r.articles, r.scores) for r in got], [x.answer for x in reader.read(examples, 1, compute=compute, config=config)])
    with torch.no_grad():
        for _ in range(rounds):
            for w in WAYS:
                _way(w)
                t = time.perf_counter()
                for q in questions:
                    retriever.retrieve([q], top=20)
                times[w, "b1"].append(len(questions) / (time.perf_counter() - t))
                t = time.perf_counter()
                for i in range(0, len(questions), 64):
                    retriever.retrieve(questions[i:i + 64], top=20)
                times[w, "b64"].append(len(questions) / (time.perf_counter() - t))
                t = time.perf_counter()
                reader.read(examples, 1, compute=compute, config=config)
                times[w, "reader b1"].append(1000 * (time.perf_counter() - t) / len(examples))
    _way("bf16 copy")
    return {"run": str(run), "questions": len(questions), "read": len(examples),
            "same outputs": outputs[WAYS[0]] == outputs[WAYS[1]],
            **{f"{k} {w}": round(statistics.median(v), 2) for (w, k), v in times.items()},
            "rounds": {f"{k} {w}": [round(x, 2) for x in v] for (w, k), v in times.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, nargs="+", default=[1, 8, 24, 48, 64, 512],
                    help="rows of the products (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=5, help="turns of each way; the median is kept (default: %(default)s)")
    ap.add_argument("--run", type=Path, default=None, help="a reproduce-2wiki run folder: time the retriever and reader too")
    ap.add_argument("--questions", type=int, default=192, help="dev questions retrieved (default: %(default)s)")
    ap.add_argument("--read", type=int, default=60, help="of them, read by the reader (default: %(default)s)")
    ap.add_argument("--out", default="benchmarks/results/autocast-copy", help="output folder (default: %(default)s)")
    args = ap.parse_args()

    found = {"machine": machine_info(), "products": products(args.rows, args.rounds)}
    if args.run is not None:
        found["whole"] = whole(args.run, args.questions, args.read, args.rounds)
    lines = [f"# bf16 autocast products: the weight cast in each call against a bf16 copy made once, side by side "
             f"({args.rounds} rounds, medians)", "", f"Machine: {found['machine']}.", "",
             "| in x out | rows | ms autocast casts | ms bf16 copy | same bits |", "|---|---|---|---|---|"]
    for r in found["products"]:
        lines.append(f"| {r['in']} x {r['out']} | {r['rows']} | {r['ms autocast casts']} | {r['ms bf16 copy']} | "
                     f"{'yes' if r['equal'] else 'no'} |")
    if "whole" in found:
        w = found["whole"]
        lines += ["", f"{w['run']}, bf16, in one process, the ways in turns: {w['questions']} dev questions retrieved "
                  f"(top 20), {w['read']} read (drkit's top 5, the comparison rules off); same outputs: {w['same outputs']}.",
                  "", "| | autocast casts | bf16 copy |", "|---|---|---|"]
        lines += [f"| {label} | {w[key + ' autocast casts']} | {w[key + ' bf16 copy']} |" for key, label in
                  (("b1", "passages, questions/s at batch 1"), ("b64", "passages, questions/s at batch 64"),
                   ("reader b1", "reader, ms a question at batch 1"))]
    write_report(args.out, "bench_autocast_copy", found, lines)


if __name__ == "__main__":
    main()
