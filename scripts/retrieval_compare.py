"""Two retrievals side by side, pooled over the folds given: R@2, R@5, AR@2 and AR@5 of each with 95% bootstrap
intervals, per question type too, and the paired sign-flip test of B against A on the same questions; where both
were run with --answers, the entity answers' Hits@1 on the compositional and inference questions too (right when
equal to a gold answer, ignoring case and surrounding space, as `drkit retrieve` scores it).

Each of --a and --b is a list of `drkit retrieve` output folders (predictions.jsonl), one per fold, in the order
of --questions (the JSONL files they were scored on, with "supporting" and "type").

    python scripts/retrieval_compare.py --questions runs/2wiki-f0/split/dev.jsonl runs/2wiki-f1/split/dev.jsonl \\
        --a runs/2wiki-f0/retrieve-drkit runs/2wiki-f1/retrieve-drkit --b runs/x-f0/ret runs/x-f1/ret \\
        --names "A" "B" --out benchmarks/results/some-comparison
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from drkit.qa.stats import bootstrap_ci, paired_test, per_question

METRICS = (("R@2", 2, False), ("R@5", 5, False), ("AR@2", 2, True), ("AR@5", 5, True))


ENTITY_TYPES = ("compositional", "inference")  # the questions whose answer is an entity


def load(dirs: list[str], questions: list[str]) -> tuple[list[dict], list[list[str]], list]:
    """The pooled questions that have gold, each one's ranked passage ids, and its entity answer (None where the
    retrieval has none), in the questions files' order."""
    qs, ranked, answers = [], [], []
    for d, qfile in zip(dirs, questions):
        by_id = {p["id"]: p for p in map(json.loads, open(Path(d) / "predictions.jsonl", encoding="utf-8"))}
        for q in map(json.loads, open(qfile, encoding="utf-8")):
            if q.get("supporting"):
                if q["id"] not in by_id:
                    raise SystemExit(f"{d}: no prediction for question {q['id']} of {qfile}")
                qs.append(q)
                ranked.append([x["id"] for x in by_id[q["id"]]["passages"]])
                answers.append(by_id[q["id"]].get("answer"))
    return qs, ranked, answers


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", nargs="+", required=True, help="the questions files, one per fold")
    ap.add_argument("--a", nargs="+", required=True, help="retrieve output folders of A, one per fold")
    ap.add_argument("--b", nargs="+", required=True, help="retrieve output folders of B, one per fold")
    ap.add_argument("--names", nargs=2, default=["A", "B"], help="the two names shown")
    ap.add_argument("--out", required=True, help="output folder (compare.json, compare.md)")
    args = ap.parse_args()
    if not len(args.a) == len(args.b) == len(args.questions):
        ap.error("--a, --b and --questions need one entry per fold each")
    qs, ranked_a, answers_a = load(args.a, args.questions)
    _, ranked_b, answers_b = load(args.b, args.questions)
    gold = [q["supporting"] for q in qs]
    types = sorted({q.get("type") or "-" for q in qs})
    result = {"names": args.names, "a": args.a, "b": args.b, "questions_files": args.questions, "questions": len(qs),
              "overall": {}, "by_type": {t: {} for t in types}}
    for name, k, all_of in METRICS:
        a, b = per_question(ranked_a, gold, k, all_of), per_question(ranked_b, gold, k, all_of)
        result["overall"][name] = {"a": round(a.mean(), 4), "a_ci95": [round(x, 4) for x in bootstrap_ci(a)],
                                   "b": round(b.mean(), 4), "b_ci95": [round(x, 4) for x in bootstrap_ci(b)],
                                   "paired": {k2: (round(v, 4) if isinstance(v, float) else v)
                                              for k2, v in paired_test(b, a).items()}}
        for t in types:
            sel = np.array([(q.get("type") or "-") == t for q in qs])
            result["by_type"][t][name] = {"questions": int(sel.sum()), "a": round(a[sel].mean(), 4), "b": round(b[sel].mean(), 4)}
    entity = [i for i, q in enumerate(qs) if q.get("type") in ENTITY_TYPES and q.get("answers")]
    if entity and any(x is not None for x in answers_a) and any(x is not None for x in answers_b):
        from drkit.qa.metrics import answer_is_right

        a, b = (np.array([float(answer_is_right(answers[i], qs[i]["answers"])) for i in entity])
                for answers in (answers_a, answers_b))
        result["entity_answers"] = {"questions": len(entity), "types": list(ENTITY_TYPES),
                                    "a": round(a.mean(), 4), "a_ci95": [round(x, 4) for x in bootstrap_ci(a)],
                                    "b": round(b.mean(), 4), "b_ci95": [round(x, 4) for x in bootstrap_ci(b)],
                                    "paired": {k2: (round(v, 4) if isinstance(v, float) else v)
                                               for k2, v in paired_test(b, a).items()}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.json").write_text(json.dumps(result, indent=2) + "\n")
    na, nb = args.names
    lines = [f"{na} (A) against {nb} (B), {len(qs)} questions pooled over {len(args.questions)} file(s); 95% bootstrap "
             "intervals; paired sign-flip test of B against A", "",
             "| metric | A | B | B - A | p |", "|---|---|---|---|---|"]
    for name, row in result["overall"].items():
        lines.append(f"| {name} | {row['a']} {row['a_ci95']} | {row['b']} {row['b_ci95']} | "
                     f"{row['paired']['diff']:+.4f} | {row['paired']['p']} |")
    if "entity_answers" in result:
        row = result["entity_answers"]
        lines.append(f"| entity answers Hits@1 ({row['questions']} {' + '.join(ENTITY_TYPES)}) | {row['a']} "
                     f"{row['a_ci95']} | {row['b']} {row['b_ci95']} | {row['paired']['diff']:+.4f} | {row['paired']['p']} |")
    lines += ["", "| type | questions | " + " | ".join(f"{m} A / B" for m, _, _ in METRICS) + " |",
              "|---|---|" + "---|" * len(METRICS)]
    for t, row in result["by_type"].items():
        lines.append(f"| {t} | {row['R@2']['questions']} | " + " | ".join(f"{row[m]['a']} / {row[m]['b']}" for m, _, _ in METRICS) + " |")
    (out / "compare.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
