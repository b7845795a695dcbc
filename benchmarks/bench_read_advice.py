"""Batch-1 passage retrieval with read advice's warm memo on and off, side by side in one process.

`drkit.util.pages.will_need` takes a mapping found warm (at most `WARM` of its pages out of memory) as warm for
`RECHECK` seconds; with ``RECHECK`` below 0 it looks at the whole mapping (one mincore call over all its pages) at
every read, as it did before the memo (with the same 1% rule, which the code before it did not have: over a file
wholly in memory the two are the same). The two settings take turns on blocks of the same questions in one process
(one index, one model, one page cache), so the machine's drift touches both alike:

    python benchmarks/bench_read_advice.py --run runs/2wiki-f0 --rounds 8 --quantize none int8

Each (quantize) setting is its own process. Writes OUT/read_advice.json and OUT/read_advice.md: questions/s at
batch 1 of each setting per round and their medians, and whether both returned the same passages.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def worker(run: Path, quantize: str, rounds: int, block: int) -> dict:
    import torch

    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.util import pages

    retriever = DrKITRetriever.load(run / "index", run / "train-drkit", answers=False)
    if quantize == "int8":  # as `drkit retrieve --quantize int8`
        from drkit.dense.quantize import quantize_transformer

        quantize_transformer(retriever.model, retriever.vkb.compute.precision)
    questions = [json.loads(line)["question"] for line in (run / "split" / "dev.jsonl").read_text().splitlines()]
    warm, timed = questions[:10], questions[10:10 + block]
    for q in warm:
        retriever.retrieve([q], top=20)
    memo = pages.RECHECK
    qps = {"memo": [], "no memo": []}
    ranked = {}
    for r in range(rounds):
        order = ("memo", "no memo") if r % 2 == 0 else ("no memo", "memo")
        for name in order:
            pages.RECHECK = memo if name == "memo" else -1.0
            t = time.perf_counter()
            got = [retriever.retrieve([q], top=20)[0] for q in timed]
            qps[name].append(round(len(timed) / (time.perf_counter() - t), 2))
            ranked[name] = [[g.articles, [round(x, 6) for x in g.scores]] for g in got]
    pages.RECHECK = memo
    return {"quantize": quantize, "torch_threads": torch.get_num_threads(), "questions": len(timed),
            "qps_b1": qps, "median_b1": {k: statistics.median(v) for k, v in qps.items()},
            "same_passages": ranked["memo"] == ranked["no memo"]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--run", type=Path, default=ROOT / "runs" / "2wiki-f0", help="a reproduce-2wiki run folder")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--block", type=int, default=100, help="dev questions timed per round and setting")
    p.add_argument("--quantize", nargs="+", default=["none", "int8"], choices=["none", "int8"])
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "retriever-speed")
    p.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        run, quantize, rounds, block = args.worker
        print(json.dumps(worker(Path(run), quantize, int(rounds), int(block))))
        return
    results = []
    for quantize in args.quantize:
        cmd = [sys.executable, __file__, "--worker", str(args.run), quantize, str(args.rounds), str(args.block)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
        results.append(json.loads(out.strip().splitlines()[-1]))
        print(quantize, results[-1]["median_b1"], flush=True)
    import torch

    machine = {"cpu": platform.machine(), "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "read_advice.json").write_text(json.dumps({"run": str(args.run), "machine": machine,
                                                           "results": results}, indent=1) + "\n")
    lines = [f"# Batch-1 passage retrieval, read advice's warm memo on and off ({args.run}, {args.block} dev "
             f"questions a round, {args.rounds} rounds taking turns in one process)", "",
             f"Machine: {machine}.", "",
             "| question encoder | memo: q/s (median) | no memo: q/s (median) | rounds, memo | rounds, no memo | "
             "same passages |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['quantize']} | {r['median_b1']['memo']:.2f} | {r['median_b1']['no memo']:.2f} | "
                     f"{r['qps_b1']['memo']} | {r['qps_b1']['no memo']} | {r['same_passages']} |")
    (args.out / "read_advice.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
