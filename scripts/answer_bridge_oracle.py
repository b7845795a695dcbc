"""How much of the entity answer's miss is the bridge: the answer head's Hits@1 on a run's compositional and
inference dev questions from its own Z_1 (as `drkit retrieve --answers` starts it, from the entities the question
names), and from an oracle Z_1 that holds only the gold bridge (the object of the question's first evidence
triple, where it is an entity of the index). The answer is the best entity the question does not name; the kind
filter is left out of both.

    python scripts/answer_bridge_oracle.py --run runs/2wiki-f0 --out benchmarks/results/x/oracle-f0.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from drkit.qa.drkit_retriever import DrKITRetriever
from drkit.qa.metrics import answer_is_right
from drkit.reason.entity_set import EntitySet
from drkit.reason.train_mixing import named_entity_set

TYPES = ("compositional", "inference")


def best_unnamed(z: EntitySet, b: int, named: set, names: list[str]) -> str | None:
    ids, _ = z.top(len(named) + 1)
    return next((names[e] for e in ids[b] if e >= 0 and e not in named), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a reproduce-2wiki folder (index, split/dev.jsonl, train-drkit)")
    ap.add_argument("--model", default=None, help="the model (default: RUN/train-drkit)")
    ap.add_argument("--out", required=True, help="the JSON file written")
    args = ap.parse_args()
    run = Path(args.run)
    r = DrKITRetriever.load(run / "index", args.model or run / "train-drkit")
    model, vkb, names = r.model, r.vkb, r.names
    if not model.config.answer_head:
        raise SystemExit(f"{args.model or run / 'train-drkit'} has no answer head")
    questions = [q for q in map(json.loads, open(run / "split" / "dev.jsonl", encoding="utf-8")) if q.get("type") in TYPES]
    counts = {t: {"questions": 0, "bridge_is_an_entity": 0, "own_z1": 0, "oracle_z1": 0} for t in TYPES}
    for s in range(0, len(questions), 32):
        batch = questions[s:s + 32]
        texts = [q["question"] for q in batch]
        linked = r.linker.link(texts)
        named = linked.named()
        bridges = [vkb.index.entities.lookup(q["evidence"][0][2]) for q in batch]
        rows = [b for b, e in enumerate(bridges) if e is not None]
        oracle = EntitySet(torch.tensor(rows, dtype=torch.int64), torch.tensor([bridges[b] for b in rows], dtype=torch.int64),
                           torch.ones(len(rows)), len(batch))
        with torch.no_grad():
            encoded = model._encode(texts, vkb, r.precision)
            own = model.answer(texts, named_entity_set(linked), vkb, precision=r.precision, named=named, encoded=encoded)
            given = model._answer_hop(encoded[0], oracle, vkb, model.follow_config, named)
        for b, q in enumerate(batch):
            c, mine = counts[q["type"]], set(named[b][named[b] >= 0].tolist())
            c["questions"] += 1
            c["bridge_is_an_entity"] += bridges[b] is not None
            c["own_z1"] += answer_is_right(best_unnamed(own, b, mine, names), q["answers"])
            c["oracle_z1"] += bridges[b] is not None and answer_is_right(best_unnamed(given, b, mine, names), q["answers"])
    total = {k: sum(c[k] for c in counts.values()) for k in counts[TYPES[0]]}
    result = {"run": str(run), "by_type": counts, "overall": total}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
