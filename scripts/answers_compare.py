"""Two sets of `drkit answer` readings side by side, pooled over the folds given: answer EM and F1 of each with 95%
bootstrap intervals, EM by question type, and the paired sign-flip test of B against A on the same questions.

Each of --a and --b is a list of `drkit answer` output folders (predictions.jsonl with per-question "em" and "f1"),
one per fold, in the order of --questions (the JSONL files they were read on, with "type").

    python scripts/answers_compare.py --questions runs/2wiki-f0/split/dev.jsonl \\
        --a runs/2wiki-f0-nw/answer-linked --b runs/2wiki-f0-nw/answer-named \\
        --names "Z_0 as linked" "named weight" --out benchmarks/results/named-weight/reader
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from drkit.qa.stats import bootstrap_ci, paired_test


def load(dirs: list[str], questions: list[str]) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Each pooled question's type, EM and F1, in the questions files' order (a question without a reading is an
    error: the two sides must read the same questions)."""
    types, em, f1 = [], [], []
    for d, qfile in zip(dirs, questions):
        got = {p["id"]: p for p in map(json.loads, open(Path(d) / "predictions.jsonl", encoding="utf-8"))}
        for q in map(json.loads, open(qfile, encoding="utf-8")):
            if q["id"] not in got:
                raise SystemExit(f"{d}/predictions.jsonl has no reading of question {q['id']!r} of {qfile}")
            types.append(q.get("type", ""))
            em.append(float(got[q["id"]]["em"]))
            f1.append(float(got[q["id"]]["f1"]))
    return types, np.array(em), np.array(f1)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--questions", nargs="+", required=True, help="the questions files, one per fold")
    p.add_argument("--a", nargs="+", required=True, help="drkit answer output folders of A, one per fold")
    p.add_argument("--b", nargs="+", required=True, help="drkit answer output folders of B, one per fold")
    p.add_argument("--names", nargs=2, default=["A", "B"], help="the two names shown")
    p.add_argument("--out", type=Path, required=True, help="output folder (compare.json, compare.md)")
    args = p.parse_args()
    if not len(args.questions) == len(args.a) == len(args.b):
        raise SystemExit("give one --questions file and one --a and --b folder per fold")
    types, em_a, f1_a = load(args.a, args.questions)
    _, em_b, f1_b = load(args.b, args.questions)
    rows = {}
    for name, a, b in (("EM", em_a, em_b), ("F1", f1_a, f1_b)):
        rows[name] = {"a": float(a.mean()), "a_ci": bootstrap_ci(a), "b": float(b.mean()), "b_ci": bootstrap_ci(b),
                      **paired_test(b, a)}
    by_type = {t: {"questions": int(sum(x == t for x in types)),
                   "EM_a": float(em_a[[x == t for x in types]].mean()), "EM_b": float(em_b[[x == t for x in types]].mean())}
               for t in sorted(set(types))}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "compare.json").write_text(json.dumps({"names": args.names, "questions": len(types), "a": args.a,
                                                       "b": args.b, "metrics": rows, "by_type": by_type}, indent=1) + "\n")
    lines = [f"{args.names[0]} (A) against {args.names[1]} (B), {len(types)} questions pooled over "
             f"{len(args.questions)} file(s); 95% bootstrap intervals; paired sign-flip test of B against A", "",
             "| metric | A | B | B - A | p |", "|---|---|---|---|---|"]
    for name, r in rows.items():
        lines.append(f"| {name} | {r['a']:.4f} [{r['a_ci'][0]:.4f}, {r['a_ci'][1]:.4f}] | {r['b']:.4f} "
                     f"[{r['b_ci'][0]:.4f}, {r['b_ci'][1]:.4f}] | {r['diff']:+.4f} | {r['p']:.4g} |")
    lines += ["", "| type | questions | EM A / B |", "|---|---|---|"]
    lines += [f"| {t} | {v['questions']} | {v['EM_a']:.3f} / {v['EM_b']:.3f} |" for t, v in by_type.items()]
    (args.out / "compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
