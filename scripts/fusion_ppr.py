"""drkit's passage ranking fused with the personalised-PageRank control's, by weighted reciprocal rank (score of a
passage: (1 - w) / (c + its rank in drkit's list) + w / (c + its rank in PageRank's), c = 60), for a range of w.

Both lists are what a `drkit reproduce-2wiki` run wrote (RUN/retrieve-drkit and RUN/control-ppr on its dev
questions, RUN/transfer/... on musique100). A weight may only be chosen on 2Wiki (fold 0 to choose, fold 1 to check);
musique100 is printed to report, never to choose. Prints R@2 / R@5 for each w and writes them as JSON.

    python scripts/fusion_ppr.py --runs runs/2wiki-z5-f0 runs/2wiki-z5-f1 --out benchmarks/results/fusion-ppr/fusion.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

WEIGHTS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5)


def rankings(path: Path) -> dict[str, list[str]]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return {r["id"]: [p["id"] for p in r["passages"]] for r in rows}


def gold(path: Path) -> dict[str, set[str]]:
    rows = (json.loads(line) for line in path.read_text(encoding="utf-8").splitlines())
    return {r["id"]: set(map(str, r["supporting"])) for r in rows}


def fuse(a: list[str], b: list[str], w: float, c: int = 60) -> list[str]:
    score: dict[str, float] = {}
    for rank, p in enumerate(a):
        score[p] = score.get(p, 0.0) + (1 - w) / (c + rank)
    for rank, p in enumerate(b):
        score[p] = score.get(p, 0.0) + w / (c + rank)
    return sorted(score, key=lambda p: -score[p])


def recall(g: dict[str, set[str]], ranked: dict[str, list[str]], k: int) -> float:
    return sum(len(g[q] & set(ranked[q][:k])) / len(g[q]) for q in g) / len(g)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", type=Path, required=True, help="reproduce-2wiki run folders (fold 0, fold 1)")
    ap.add_argument("--musique", type=Path, default=Path("../shared/data/musique100/questions.jsonl"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    found = {}
    for run in args.runs:
        for name, questions, base in ((f"2wiki {run.name}", run / "split" / "dev.jsonl", run),
                                      (f"musique100 {run.name} (not to choose)", args.musique, run / "transfer")):
            g = gold(questions)
            drkit, ppr = rankings(base / "retrieve-drkit" / "predictions.jsonl"), rankings(base / "control-ppr" / "predictions.jsonl")
            found[name] = {}
            for w in WEIGHTS:
                fused = {q: fuse(drkit[q], ppr[q], w) for q in g}
                found[name][str(w)] = {"R@2": round(recall(g, fused, 2), 4), "R@5": round(recall(g, fused, 5), 4)}
            print(name, " | ".join(f"w {w}: {v['R@2']:.3f} / {v['R@5']:.3f}" for w, v in found[name].items()))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(found, indent=2) + "\n")


if __name__ == "__main__":
    main()
