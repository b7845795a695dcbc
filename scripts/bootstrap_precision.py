"""How right the bootstrapped facts are (`drkit bootstrap-kb`), measured against the dev questions' evidence.

`reproduce-2wiki` finds no fact in a dev question's gold passage. This script does, for the measurement only:
the patterns the run's training KB teaches are applied to every passage, and each dev evidence fact (s, R, o)
whose subject and object are entities of the index is looked up: did the patterns find some object of (s, R)
there, and is o among them? Nothing here is used for training.

    python scripts/bootstrap_precision.py --run runs/2wiki-b-f0 --out benchmarks/results/bootstrap/precision-f0.json
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

from drkit.data.kb import read_kb
from drkit.dense.bootstrap import find_facts, learn_patterns
from drkit.experiments.twowiki_data import read_question_records
from drkit.index.sparse import SparseIndex


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, type=Path, help="a reproduce-2wiki run (index, kb-train.txt, split)")
    ap.add_argument("--out", required=True, type=Path)
    args = ap.parse_args()
    index = SparseIndex.load(args.run / "index")
    patterns = learn_patterns(index, read_kb(args.run / "kb-train.txt"))
    found = defaultdict(set)
    for s, r, o in find_facts(index, patterns):
        found[(s, r)].add(o)
    gold = defaultdict(set)
    for q in read_question_records(args.run / "split" / "dev.jsonl"):
        for s, r, o in q.get("evidence") or ():
            si, oi = index.entities.lookup(s), index.entities.lookup(o)
            if si is not None and oi is not None:
                gold[(si, r)].add(oi)
    rows = defaultdict(lambda: {"dev_facts": 0, "found_some_object": 0, "gold_object_found": 0, "objects_found": 0,
                                "objects_right": 0})
    for (s, r), objects in gold.items():
        row = rows[r]
        row["dev_facts"] += 1
        if (s, r) in found:
            row["found_some_object"] += 1
            row["gold_object_found"] += bool(found[(s, r)] & objects)
            row["objects_found"] += len(found[(s, r)])
            row["objects_right"] += len(found[(s, r)] & objects)
    total = {k: sum(row[k] for row in rows.values()) for k in next(iter(rows.values()))} if rows else {}
    result = {"run": str(args.run), "patterns": len(patterns), "by_relation": dict(sorted(rows.items())), "total": total,
              "precision": round(total["objects_right"] / total["objects_found"], 4) if total.get("objects_found") else None,
              "recall": round(total["gold_object_found"] / total["dev_facts"], 4) if total.get("dev_facts") else None}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"{len(patterns)} patterns; dev evidence facts {total.get('dev_facts')}: an object found for "
          f"{total.get('found_some_object')}, the gold one for {total.get('gold_object_found')}; objects found "
          f"{total.get('objects_found')}, right {total.get('objects_right')} (precision {result['precision']}, "
          f"recall {result['recall']}); wrote {args.out}")


if __name__ == "__main__":
    main()
