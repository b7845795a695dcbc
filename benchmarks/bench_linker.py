"""Seconds to build the question linker of an index (`QuestionLinker.from_index`: every command that links plain
questions pays it at its start), for one or more versions of drkit's code side by side.

    python benchmarks/bench_linker.py --index runs/2wiki-f0/index --code before=/work/wt --code after=. --rounds 3

Each (round, version) is its own process (the version's folder on PYTHONPATH) that builds the linker three
times; the versions take turns. Writes OUT/linker.json and OUT/linker.md: each version's median build, its
rounds, and whether every version's linker gives the same Z_0 on a few questions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ["Who is the father of the director of film Palo Alto (2013 Film)?",
             "Which film came out first, Blind Shaft or The Mask Of Fu Manchu?",
             "Where was the composer of song By The Beautiful Sea born?"]


def worker(index: str) -> dict:
    import time

    from drkit.index.question_linking import QuestionLinker
    from drkit.index.sparse import SparseIndex

    idx = SparseIndex.load(index)
    seconds = []
    for _ in range(3):
        t = time.perf_counter()
        linker = QuestionLinker.from_index(idx)
        seconds.append(round(time.perf_counter() - t, 3))
    linked = linker.link(QUESTIONS)
    return {"seconds": seconds, "entities": idx.n_entities,
            "z0": [linked.rows.tolist(), linked.ids.tolist(), [round(float(w), 6) for w in linked.weights]]}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--index", type=Path, default=ROOT / "runs" / "2wiki-f0" / "index")
    p.add_argument("--code", action="append", default=[], metavar="NAME=DIR",
                   help="a version of drkit's code (a checkout's root); repeat to compare (default: this checkout)")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "linker")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker)))
        return
    versions = dict(c.split("=", 1) for c in args.code) or {"this": str(ROOT)}
    runs = {name: [] for name in versions}
    for _ in range(args.rounds):
        for name, code in versions.items():  # the script's own folder first on sys.path, then the version's
            env = {**os.environ, "PYTHONPATH": str(Path(code).resolve())}
            out = subprocess.run([sys.executable, __file__, "--worker", str(args.index.resolve())], check=True,
                                 capture_output=True, text=True, cwd=ROOT, env=env).stdout
            runs[name].append(json.loads(out.strip().splitlines()[-1]))
    first = next(iter(runs.values()))[0]["z0"]
    result = {name: {"median_s": statistics.median(s for r in rs for s in r["seconds"]),
                     "seconds": [r["seconds"] for r in rs], "same_z0": all(r["z0"] == first for r in rs)}
              for name, rs in runs.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "linker.json").write_text(json.dumps({"index": str(args.index), "versions": versions,
                                                      "result": result}, indent=1) + "\n")
    lines = [f"# QuestionLinker.from_index over {args.index} ({next(iter(runs.values()))[0]['entities']} entities; "
             f"{args.rounds} rounds of 3 builds, versions taking turns)", "",
             "| version | median build (s) | builds (s) | same Z_0 as the first |", "|---|---|---|---|"]
    lines += [f"| {n} | {r['median_s']:.2f} | {r['seconds']} | {r['same_z0']} |" for n, r in result.items()]
    (args.out / "linker.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
