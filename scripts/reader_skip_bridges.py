"""`--skip-bridges` against the reader's own best span, side by side: each fold's reader (RUN/train-reader of a
``drkit reproduce-2wiki`` run) reads the gold passages and drkit's top 5 of the fold's dev questions (the comparison
rules on, as ``drkit answer`` reads by default) with ``skip_bridges`` off and on; EM/F1 overall and by type, pooled
over the runs given (each question read by the reader that did not train on it), with 95% bootstrap intervals and
the paired sign-flip test of on against off. Writes OUT/<fold>/<row>-<setting>/ (predictions.jsonl, metrics.json)
and OUT/skip_bridges.json, OUT/skip_bridges.md.

    python scripts/reader_skip_bridges.py --runs runs/2wiki-f0 runs/2wiki-f1 --out benchmarks/results/reader-skip-bridges
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from drkit.qa.answer import AnswerConfig, passages_from_predictions, read_and_score
from drkit.qa.stats import bootstrap_ci, paired_test
from drkit.reader.examples import read_passages, read_questions
from drkit.reader.model import Reader
from drkit.util.hardware import configure_threads

ROWS = ("gold", "drkit")
TYPES = ("comparison", "bridge_comparison", "compositional", "inference")


def read_fold(run: Path, corpus: dict, out: Path) -> dict:
    """Per question, for each row and setting: (type, EM, F1, answer)."""
    reader = Reader.load(run / "train-reader")
    records = read_questions(run / "split" / "dev.jsonl")
    drkit = passages_from_predictions(run / "retrieve-drkit" / "predictions.jsonl", corpus, 5)
    found = {}
    for row in ROWS:
        passages = [[corpus[str(s)] for s in r["supporting"]] if row == "gold" else drkit[r["id"]] for r in records]
        for skip in (False, True):
            name = f"{row}-{'skip' if skip else 'own'}"
            config = dataclasses.replace(AnswerConfig(qps_sample=0), skip_bridges=skip)
            read_and_score(reader, records, passages, out / name, config, log=print)
            lines = [json.loads(x) for x in open(out / name / "predictions.jsonl", encoding="utf-8")]
            found[name] = [(r.get("type"), x["em"], x["f1"], x["answer"]) for r, x in zip(records, lines)]
    return found


def block(values: list) -> dict:
    em = np.array([v[1] for v in values], dtype=float)
    f1 = np.array([v[2] for v in values], dtype=float)
    return {"questions": len(values), "em": round(float(em.mean()), 4), "em_ci95": [round(x, 4) for x in bootstrap_ci(em)],
            "f1": round(float(f1.mean()), 4),
            "em_by_type": {t: round(float(np.mean([v[1] for v in values if v[0] == t])), 4)
                           for t in TYPES if any(v[0] == t for v in values)}}


def compare(parts: list[dict]) -> dict:
    """Each row with skip_bridges off ("own") and on ("skip") over the folds' questions, and the paired test of EM."""
    table = {}
    for row in ROWS:
        own = [v for f in parts for v in f[f"{row}-own"]]
        skip = [v for f in parts for v in f[f"{row}-skip"]]
        test = paired_test(np.array([v[1] for v in skip], float), np.array([v[1] for v in own], float))
        table[row] = {"own": block(own), "skip": block(skip), "em_paired_test": test,
                      "answers_changed": sum(a[3] != b[3] for a, b in zip(own, skip))}
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, nargs="+", required=True)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/2wiki"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    configure_threads(0)
    corpus = {p.id: p for p in read_passages(args.data / "corpus.jsonl")}
    folds = {run.name: read_fold(run, corpus, args.out / run.name) for run in args.runs}
    report = {"runs": [str(r) for r in args.runs], "folds": {name: compare([f]) for name, f in folds.items()},
              "pooled": compare(list(folds.values()))}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "skip_bridges.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["| scope | row | setting | questions | EM [95% CI] | F1 | " + " | ".join(TYPES) + " | answers changed | p (paired) |",
             "|---" * (8 + len(TYPES)) + "|"]
    for scope, table in [*report["folds"].items(), ("pooled", report["pooled"])]:
        for row, t in table.items():
            for setting in ("own", "skip"):
                b = t[setting]
                lines.append(f"| {scope} | {row} | {setting} | {b['questions']} | {b['em']:.3f} [{b['em_ci95'][0]:.3f}, "
                             f"{b['em_ci95'][1]:.3f}] | {b['f1']:.3f} | "
                             + " | ".join(f"{b['em_by_type'].get(x, float('nan')):.3f}" for x in TYPES)
                             + (f" | {t['answers_changed']} | {t['em_paired_test']['p']:.4f} |" if setting == "skip" else " | | |"))
    (args.out / "skip_bridges.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
