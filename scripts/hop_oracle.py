"""Each hop alone, from the gold entity: where the entity answer of 2Wiki compositional questions is lost.

A compositional question ("What nationality is the director of film X?") has two evidence triples,
(X, r1, bridge) and (bridge, r2, answer). Started from the gold X alone (one-hot Z), the passage chain's first
hop should rank the bridge first; started from the gold bridge alone, the answer's hop (the model's answer head,
or its last hop where it has none) should rank the answer first. This prints, for each, how often the gold
entity is first, in the top 3 and top 10, over the questions whose gold entities are entities of the index
(name, case and spacing aside), and writes them as JSON.

    python scripts/hop_oracle.py --run runs/2wiki-f0 --out benchmarks/results/hop-oracle/f0.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from drkit.data.kb import name_key
from drkit.qa.drkit_retriever import DrKITRetriever
from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import follow


def ranks(out: EntitySet, targets: list[list[int]]) -> list[int | None]:
    """The best rank (0 = first) of each row's targets in its distribution; None where none is in its support."""
    found = []
    for b, gold in enumerate(targets):
        ids, probs = out.row(b)
        order = list(np.asarray(ids)[np.argsort(-np.asarray(probs), kind="stable")])
        found.append(min((order.index(g) for g in gold if g in order), default=None))
    return found


def summary(found: list[int | None]) -> dict:
    n = len(found)
    at = lambda k: round(sum(r is not None and r < k for r in found) / n, 4) if n else None  # noqa: E731
    return {"questions": n, "first": at(1), "top3": at(3), "top10": at(10),
            "not_reached": sum(r is None for r in found)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a reproduce-2wiki fold folder (index/, train-drkit/, split/)")
    ap.add_argument("--out", required=True, help="JSON file written")
    args = ap.parse_args()
    run = Path(args.run)
    r = DrKITRetriever.load(run / "index", run / "train-drkit")
    model, vkb, base = r.model, r.vkb, r.model.base
    ids: dict[str, int] = {}
    for e, name in enumerate(vkb.entity_names):
        ids.setdefault(name_key(name), e)
    questions = [q for q in map(json.loads, open(run / "split" / "dev.jsonl", encoding="utf-8"))
                 if q.get("type") == "compositional" and len(q.get("evidence") or []) == 2]
    head = [ids.get(name_key(q["evidence"][0][0]), -1) for q in questions]
    bridge = [ids.get(name_key(q["evidence"][0][2]), -1) for q in questions]
    answer = [[ids[name_key(a)] for a in q["answers"] if name_key(a) in ids] for q in questions]
    answer_hop = model.config.hops if model.config.answer_head else model.config.hops - 1
    results = {"run": str(run), "answer_head": model.config.answer_head, "questions": len(questions)}
    fc = base.follow_config
    with torch.no_grad():
        enc = base.encode([q["question"] for q in questions], r.precision)
        for name, start, t, targets in (("head -> bridge (passage hop 1)", head, 0, [[b] for b in bridge]),
                                        ("bridge -> answer (the answer's hop)", bridge, answer_hop, answer)):
            keep = [i for i, (s, g) in enumerate(zip(start, targets)) if s >= 0 and g and min(g) >= 0]
            z = EntitySet.one_hot([start[i] for i in keep])
            q = base.hop_queries(enc, t, EntitySet.one_hot(start))[keep]  # every row's query, the kept ones
            power = base.tfidf_power[t].clamp_min(0).cpu() if base.config.learn_tfidf_power else None
            out = follow(z, q, vkb.graph, vkb.search, fc, None, tfidf_power=power)
            results[name] = summary(ranks(out, [targets[i] for i in keep]))
            print(name, results[name])
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
