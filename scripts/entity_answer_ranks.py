"""Where the entity answer's gold entity ranks in the last hop (the answer pass of `drkit retrieve --answers`):
for the compositional and inference questions of a question file, how many answers are not an entity of the
index, and the gold entity's rank among the last hop's best 50 entities the question does not name.

    python scripts/entity_answer_ranks.py --index runs/2wiki-f0-found/index \\
        --model runs/found-pagemix/f0-page-mix/train --questions runs/2wiki-f0-found/split/dev.jsonl [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter

from drkit.qa.drkit_retriever import DrKITRetriever

TYPES = ("compositional", "inference")
TOP = 50


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--questions", required=True)
    ap.add_argument("--mentions", default=None, help="the mention index (default: the one the model was trained with)")
    ap.add_argument("--out", default=None, help="also write the counts to this JSON file")
    args = ap.parse_args()
    r = DrKITRetriever.load(args.index, args.model, mentions=args.mentions, answers=True)
    r.answer_top = TOP
    questions = [q for q in map(json.loads, open(args.questions, encoding="utf-8")) if q.get("type") in TYPES]
    ranks: Counter = Counter()
    for q in questions:
        gold = {r.vkb.index.entities.lookup(a) for a in q["answers"]} - {None}
        if not gold:
            ranks["answer not an entity"] += 1
            continue
        best = [e for e, _ in (r.retrieve([q["question"]], 20)[0].answers or [])]
        rank = next((i + 1 for i, e in enumerate(best) if e in gold), None)
        ranks["1" if rank == 1 else "2-5" if rank and rank <= 5 else f"6-{TOP}" if rank else f"not in the top {TOP}"] += 1
    out = {"model": args.model, "questions": len(questions), **ranks}
    print(json.dumps(out, indent=2))
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
