#!/usr/bin/env python
"""Questions/s of `DrKITRetriever` (what `drkit retrieve` runs for a hop-mixing model) on a reproduce-2wiki run
folder, at batch 1 and batch 64, passages alone (the command's default) and with the entity answer; optionally
two versions of drkit's code (or its question encoder in int8, or computing in another precision) side by side.

    python benchmarks/bench_retriever.py --run runs/2wiki-f0 --code before=/work/wt --code after=. --rounds 3
    python benchmarks/bench_retriever.py --run runs/2wiki-f0 --code fp32=.@fp32 --code bf16=.@bf16 --code int8=.@int8
    python benchmarks/bench_retriever.py --run runs/2wiki-f0 --code native=. --code avx2=.@auto+avx2

A version ending in ``+avx2`` runs with torch's, MKL's and oneDNN's kernels held to AVX2 (``AVX2_CODE``): the code
path of an AVX2-only CPU on this one (``auto`` then computes in fp32), not that CPU's speed (its cores, clocks
and caches are this machine's).

Each (round, version) is its own process (the version's folder first on PYTHONPATH), so the versions alternate
and the machine's drift touches each alike; a process loads the index and model, answers 5 questions untimed,
then times the run's first `--questions` dev questions one at a time and in batches of 64, with `--top 20`, and
records the passages it returned (a version that changes them is reported as such). Writes OUT/retriever.json and
OUT/retriever.md: each version's median over the rounds, and every round.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# torch's ATen, MKL and oneDNN kept to AVX2 code, as on a CPU without AVX-512
AVX2_CODE = {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"}


def worker(run: Path, n: int, quantize: str) -> dict:
    """`quantize`: none, int8 (the question encoder quantised, in fp32), or a precision (fp32, bf16, auto)."""
    import torch

    from drkit.qa.drkit_retriever import DrKITRetriever

    precision = "fp32" if quantize == "int8" else ("auto" if quantize == "none" else quantize)
    retriever = DrKITRetriever.load(run / "index", run / "train-drkit", answers=False, precision=precision)
    if quantize == "int8":  # as `drkit retrieve --quantize int8` (drkit.qa.pipeline.DrKIT._quantized)
        from drkit.dense.quantize import quantize_transformer

        quantize_transformer(retriever.model, retriever.vkb.compute.precision)
    questions = [json.loads(line)["question"] for line in (run / "split" / "dev.jsonl").read_text().splitlines()][:n]
    for q in questions[:5]:
        retriever.retrieve([q], top=20)
    out, ranked = {"torch_threads": torch.get_num_threads(), "precision": retriever.vkb.compute.precision,
                   "cpu_capability": str(torch.backends.cpu.get_cpu_capability())}, {}
    for answers in (False, True):
        for batch in (1, 64):
            t = time.perf_counter()
            got = []
            for s in range(0, len(questions), batch):
                got += retriever.retrieve(questions[s:s + batch], top=20, answers=answers)
            name = f"{'answers' if answers else 'passages'}_b{batch}"
            out[name] = round(len(questions) / (time.perf_counter() - t), 2)
            ranked[name] = [[r.articles, [round(x, 6) for x in r.scores], r.hops, r.chain, r.answer] for r in got]
    out["output"] = ranked
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, default=ROOT / "runs" / "2wiki-f0", help="a reproduce-2wiki run folder")
    p.add_argument("--questions", type=int, default=192, help="dev questions timed at each batch size")
    p.add_argument("--code", action="append", default=None, metavar="NAME=DIR[@int8|@fp32|@bf16|@auto][+avx2]",
                   help="a version of drkit's code (a checkout's root), with @int8 its question encoder quantised as "
                        "--quantize int8 does (in fp32), with @fp32 or @bf16 computing in that precision (default: "
                        "auto's choice), with +avx2 its kernels held to AVX2; repeat to compare (default: this checkout)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "retriever-speed")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--quantize", default="none", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.run, args.questions, args.quantize)))
        return
    versions = dict(c.split("=", 1) for c in (args.code or [f"this={ROOT}"]))
    rounds: dict[str, list[dict]] = {v: [] for v in versions}
    outputs = {}
    for r in range(args.rounds):
        for name, spec in versions.items():
            code, _, quantize = spec.partition("@")
            quantize, avx2 = quantize.removesuffix("+avx2"), quantize.endswith("+avx2")
            env = dict(os.environ, PYTHONPATH=str(Path(code).resolve()), DRKIT_PROGRESS="0", **(AVX2_CODE if avx2 else {}))
            done = subprocess.run([sys.executable, __file__, "--worker", "--run", str(args.run), "--questions",
                                   str(args.questions), "--quantize", quantize or "none"], env=env,
                                  capture_output=True, text=True, check=True)
            got = json.loads(done.stdout.strip().splitlines()[-1])
            outputs.setdefault(name, got.pop("output"))
            rounds[name].append(got)
            print(f"round {r} {name}: {got}", flush=True)
    keys = ["passages_b1", "passages_b64", "answers_b1", "answers_b64"]
    said = {v: f"{rows[0]['precision']}, {rows[0]['cpu_capability']}" for v, rows in rounds.items()}
    first = next(iter(outputs.values()))
    import torch

    result = {"machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                          "cpu_capability": str(torch.backends.cpu.get_cpu_capability()), "torch": torch.__version__},
              "run": str(args.run), "questions": args.questions, "versions": versions, "rounds": rounds,
              "median": {v: {k: statistics.median(x[k] for x in rows) for k in keys} for v, rows in rounds.items()},
              "same_output_as_first": {v: o == first for v, o in outputs.items()}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "retriever.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [f"# DrKITRetriever questions/s, {args.run} ({args.questions} dev questions, top 20, medians of "
             f"{args.rounds} alternating rounds)", "",
             "| version | computed in, kernels | passages, batch 1 | passages, batch 64 | with answers, batch 1 | "
             "with answers, batch 64 | same passages, hops, chain and answers as the first |", "|---|---|---|---|---|---|---|"]
    for v, m in result["median"].items():
        lines.append(f"| {v} | {said[v]} | " + " | ".join(f"{m[k]:.2f}" for k in keys)
                     + f" | {result['same_output_as_first'][v]} |")
    (args.out / "retriever.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
