"""The highest R@k and AR@k any ranking can reach on a question file: a question with g gold passages holds at
most min(k, g) of them in its top k, so R@k <= min(k, g) / g and AR@k is 0 where g > k.

    .venv/bin/python scripts/recall_ceiling.py --questions ../shared/data/2wiki/train.jsonl \\
        --out benchmarks/results/recall-ceiling/2wiki.json

Per question type ("type") and over all, for k = 2, 5, 10, 20; questions without "supporting" are left out,
as `drkit retrieve` scores them.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

KS = (2, 5, 10, 20)


def ceilings(golds: list[int]) -> dict:
    out = {"questions": len(golds)}
    for k in KS:
        out[f"R@{k}"] = round(sum(min(k, g) / g for g in golds) / len(golds), 4)
        out[f"AR@{k}"] = round(sum(g <= k for g in golds) / len(golds), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", required=True, nargs="+", help="JSONL files with 'supporting' (and 'type')")
    ap.add_argument("--out", required=True, help="JSON file written")
    args = ap.parse_args()
    by_type: dict[str, list[int]] = defaultdict(list)
    for path in args.questions:
        for line in open(path, encoding="utf-8"):
            if line.strip():
                q = json.loads(line)
                if q.get("supporting"):
                    by_type[q.get("type") or "-"].append(len(set(q["supporting"])))
    result = {"files": args.questions, "overall": ceilings([g for gs in by_type.values() for g in gs]),
              "by_type": {t: ceilings(gs) for t, gs in sorted(by_type.items())}}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    for name, row in [("overall", result["overall"]), *result["by_type"].items()]:
        print(f"{name}: {row['questions']} questions, " + ", ".join(f"{m} {row[m]}" for m in row if m != "questions"))


if __name__ == "__main__":
    main()
