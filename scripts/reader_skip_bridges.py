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

from drkit.qa.answer import AnswerConfig, passages_from_predictions, read_and_score, score
from drkit.qa.stats import paired_test
from drkit.reader.examples import read_passages, read_questions
from drkit.reader.model import Reader
from drkit.util.hardware import configure_threads

ROWS = ("gold", "drkit")
TYPES = ("comparison", "bridge_comparison", "compositional", "inference")


def read_fold(run: Path, corpus: dict, out: Path) -> dict:
    """Read the fold's dev questions with each row's passages and each setting; return `load_fold` of what was written."""
    reader = Reader.load(run / "train-reader")
    records = read_questions(run / "split" / "dev.jsonl")
    drkit = passages_from_predictions(run / "retrieve-drkit" / "predictions.jsonl", corpus, 5)
    for row in ROWS:
        passages = [[corpus[str(s)] for s in r["supporting"]] if row == "gold" else drkit[r["id"]] for r in records]
        for skip in (False, True):
            config = dataclasses.replace(AnswerConfig(qps_sample=0), skip_bridges=skip)
            read_and_score(reader, records, passages, out / f"{row}-{'skip' if skip else 'own'}", config, log=print)
    return load_fold(run, out)


def load_fold(run: Path, out: Path) -> dict:
    """Per row and setting ("drkit-own", ...): the fold's dev questions and the predictions written to OUT for them."""
    records = read_questions(run / "split" / "dev.jsonl")
    return {f"{row}-{setting}": (records, [json.loads(x) for x in open(out / f"{row}-{setting}" / "predictions.jsonl",
                                                                        encoding="utf-8")])
            for row in ROWS for setting in ("own", "skip")}


def block(found: tuple[list[dict], list[dict]]) -> dict:
    """EM with its interval, F1 and EM by type, as `drkit answer` scores them (`drkit.qa.answer.score`)."""
    s = score(*found)
    return {"questions": s["questions"], "em": s["em"], "em_ci95": s["em_ci95"], "f1": s["f1"],
            "em_by_type": {t: s["by_type"][t]["em"] for t in TYPES if t in s["by_type"]}}


def compare(parts: list[dict]) -> dict:
    """Each row with skip_bridges off ("own") and on ("skip") over the folds' questions, and the paired test of EM."""
    table = {}
    for row in ROWS:
        own, skip = ([[x for f in parts for x in f[f"{row}-{setting}"][k]] for k in (0, 1)] for setting in ("own", "skip"))
        test = paired_test(np.array([x["em"] for x in skip[1]], float), np.array([x["em"] for x in own[1]], float))
        table[row] = {"own": block(own), "skip": block(skip), "em_paired_test": test,
                      "answers_changed": sum(a["answer"] != b["answer"] for a, b in zip(own[1], skip[1]))}
    return table


def write_report(folds: dict, runs: list[Path], out: Path) -> None:
    """OUT/skip_bridges.json and .md: each fold's comparison and the pooled one."""
    report = {"runs": [str(r) for r in runs], "folds": {name: compare([f]) for name, f in folds.items()},
              "pooled": compare(list(folds.values()))}
    out.mkdir(parents=True, exist_ok=True)
    (out / "skip_bridges.json").write_text(json.dumps(report, indent=2) + "\n")
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
    (out / "skip_bridges.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, nargs="+", required=True)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/2wiki"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    configure_threads(0)
    corpus = {p.id: p for p in read_passages(args.data / "corpus.jsonl")}
    folds = {run.name: read_fold(run, corpus, args.out / run.name) for run in args.runs}
    write_report(folds, args.runs, args.out)

if __name__ == "__main__":
    main()
