"""Two recipes of ``drkit reproduce-2wiki``'s reader side by side, pooled over the folds given: for each reader row both
made (read-gold, read-drkit, ...), answer EM and F1 with 95% bootstrap intervals, EM by type, the paired sign-flip
test of B against A on the same questions, and each recipe's reader training time and milliseconds a question at
batch 1 (from the runs' own timings and metrics files). Writes OUT/compare.json and OUT/compare.md.

    python scripts/reader_runs_compare.py --a runs/2wiki-f0 runs/2wiki-f1 --b runs/2wiki-f0-p320 runs/2wiki-f1-p320 \\
        --names "512 pieces" "320 pieces" --out benchmarks/results/reader-pieces
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from drkit.qa.answer import score
from drkit.qa.stats import paired_test

ROWS = ("gold", "drkit", "drkit_reader_only", "bm25")
TYPES = ("comparison", "bridge_comparison", "compositional", "inference")


def rows_of(runs: list[Path], row: str) -> tuple[list[dict], list[dict]] | None:
    """The row's questions (type and answers) and predictions over the runs; None when a run lacks the row."""
    if not all((r / f"read-{row}" / "predictions.jsonl").exists() for r in runs):
        return None
    records, rows = [], []
    for r in runs:
        questions = {q["id"]: q for q in map(json.loads, open(r / "split" / "dev.jsonl", encoding="utf-8"))}
        for line in open(r / f"read-{row}" / "predictions.jsonl", encoding="utf-8"):
            x = json.loads(line)
            records.append({"type": questions[x["id"]].get("type"), "answers": questions[x["id"]]["answers"]})
            rows.append(x)
    return records, rows


def summary(found: tuple[list[dict], list[dict]], runs: list[Path], row: str) -> dict:
    """EM and F1 with intervals and EM by type, as `drkit answer` scores them (`drkit.qa.answer.score`), and the
    runs' reading speed."""
    s = score(*found)
    metrics = [json.loads((r / f"read-{row}" / "metrics.json").read_text()) for r in runs]
    return {"questions": s["questions"], "em": s["em"], "em_ci95": s["em_ci95"], "f1": s["f1"], "f1_ci95": s["f1_ci95"],
            "em_by_type": {t: s["by_type"][t]["em"] for t in TYPES if t in s["by_type"]},
            "ms_per_question_batch1": [m.get("reader_ms_per_question_batch1") for m in metrics],
            "ms_per_read_batch1": [m.get("reader_ms_per_read_batch1") for m in metrics]}


def training_s(run: Path) -> float | None:
    """The seconds the run's reader took to train: train-reader's, plus train-reader-distilled's where the run
    taught a second reader (reproduce-2wiki --reader-distill, whose rows that one reads)."""
    t = json.loads((run / "timings.json").read_text())
    if t.get("train-reader") is None:
        return None
    return round(t["train-reader"] + t.get("train-reader-distilled", 0.0), 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--a", type=Path, nargs="+", required=True, help="recipe A: its runs (fold 0, fold 1)")
    ap.add_argument("--b", type=Path, nargs="+", required=True, help="recipe B: its runs, of the same folds in the same order")
    ap.add_argument("--names", nargs=2, default=["A", "B"])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    report: dict = {"a": [str(r) for r in args.a], "b": [str(r) for r in args.b], "names": args.names, "rows": {},
                    "train_reader_s": {n: [training_s(r) for r in runs] for n, runs in zip(args.names, (args.a, args.b))}}
    for row in ROWS:
        a, b = rows_of(args.a, row), rows_of(args.b, row)
        if a is None or b is None:
            continue
        if [x["id"] for x in a[1]] != [x["id"] for x in b[1]]:
            raise SystemExit(f"read-{row}: the two recipes read other questions")
        report["rows"][row] = {args.names[0]: summary(a, args.a, row), args.names[1]: summary(b, args.b, row),
                               "em_paired_test": paired_test(np.array([x["em"] for x in b[1]], float),
                                                             np.array([x["em"] for x in a[1]], float))}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["| row | recipe | questions | EM [95% CI] | F1 [95% CI] | " + " | ".join(TYPES)
             + " | ms a question, batch 1 (folds) | ms a question read | p (paired, EM) |", "|---" * (8 + len(TYPES)) + "|"]
    for row, t in report["rows"].items():
        for k, name in enumerate(args.names):
            s = t[name]
            lines.append(f"| {row} | {name} | {s['questions']} | {s['em']:.3f} [{s['em_ci95'][0]:.3f}, {s['em_ci95'][1]:.3f}] | "
                         f"{s['f1']:.3f} [{s['f1_ci95'][0]:.3f}, {s['f1_ci95'][1]:.3f}] | "
                         + " | ".join(f"{s['em_by_type'].get(x, float('nan')):.3f}" for x in TYPES)
                         + f" | {' / '.join(map(str, s['ms_per_question_batch1']))} | {' / '.join(map(str, s['ms_per_read_batch1']))} | "
                         + (f"{t['em_paired_test']['p']:.4f} |" if k else " |"))
    lines.append("")
    lines.append("Reader training (s, by fold; a taught reader's includes its teacher's): " + "; ".join(
        f"{n}: {' / '.join(map(str, v))}" for n, v in report["train_reader_s"].items()))
    (args.out / "compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
