"""How long the ``drkit`` command takes to start: ``drkit --help`` and a command's ``--help``, each in a fresh
Python process, for one or more source trees side by side (each tree's ``drkit`` package put first on the path,
so a checkout of an earlier commit can be compared with this one), taking turns for ``--rounds`` rounds.
Records the wall time of each run and whether torch was imported. Writes OUT/bench_cli.json and .md.

    git worktree add --detach /tmp/drkit-before <commit>
    .venv/bin/python benchmarks/bench_cli.py --trees /tmp/drkit-before . --out benchmarks/results/cli
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench_quantize import machine_info, write_report

PROBE = ("import sys\nfrom drkit.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
         "print('torch imported' if 'torch' in sys.modules else 'no torch', file=sys.stderr)")


def run_once(tree: Path, args: list[str]) -> tuple[float, bool]:
    """Seconds of ``drkit ARGS`` run from `tree` in a new process, and whether it imported torch."""
    env = {**os.environ, "PYTHONPATH": str(tree.resolve())}
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, cwd="/", capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if done.returncode != 0 or not done.stdout.startswith("usage: drkit"):
        raise SystemExit(f"drkit {' '.join(args)} from {tree} failed: {done.stderr[-500:]}")
    return seconds, done.stderr.strip().endswith("torch imported")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trees", type=Path, nargs="+", default=[Path(".")], help="source trees holding drkit/")
    ap.add_argument("--commands", nargs="+", default=["--help", "index --help", "ask --help"],
                    help="argument lines timed, each as one string")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    for tree in args.trees:
        if not (tree / "drkit" / "cli" / "__init__.py").exists():
            raise SystemExit(f"{tree} holds no drkit/cli/__init__.py")
    seconds = {(str(t), c): [] for t in args.trees for c in args.commands}
    torch_imported = {}
    for r in range(args.rounds):
        for tree in (args.trees if r % 2 == 0 else args.trees[::-1]):
            for c in args.commands:
                s, imported = run_once(tree, c.split())
                seconds[(str(tree), c)].append(s)
                torch_imported[(str(tree), c)] = imported
    found = {"rounds": args.rounds, "machine": machine_info(),
             "runs": [{"tree": t, "command": c, "seconds": [round(x, 2) for x in v],
                       "median_s": round(statistics.median(v), 2), "torch_imported": torch_imported[(t, c)]}
                      for (t, c), v in seconds.items()]}
    m = found["machine"]
    lines = [f"# drkit's start ({args.rounds} rounds, each run a new process)", "",
             f"Machine: {m['platform']}, {m['cpus']} CPUs, torch {m['torch']}.", "",
             "| tree | drkit ... | seconds, median (each run) | torch imported |", "|---|---|---|---|"]
    lines += [f"| {r['tree']} | `{r['command']}` | {r['median_s']:.2f} ({', '.join(f'{x:.2f}' for x in r['seconds'])}) | "
              f"{'yes' if r['torch_imported'] else 'no'} |" for r in found["runs"]]
    write_report(args.out, "bench_cli", found, lines)


if __name__ == "__main__":
    main()
