"""Ways the reader's reading could order drkit's top N, side by side on a reproduce-2wiki run's dev questions: R@2
of drkit's order, of the passages with a supporting sentence first (`drkit.qa.answer.supporting_first`, what
reproduce-2wiki's ``drkit_reader`` row does), of those holding the answer span or a supporting sentence first (the
reader's ``evidence``, `drkit.qa.results.reader_answer`), and of the passages by their best sentence's supporting
probability (every sentence read, no threshold). Each group keeps drkit's order. The run's reader reads the run's
``retrieve-drkit`` top N with `drkit answer`'s defaults.

    python scripts/reading_order_variants.py --run runs/2wiki-f0 --data ../shared/data/2wiki --out x/f0.json
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from drkit.qa.answer import AnswerConfig, passages_from_predictions
from drkit.qa.results import held_first, reader_answer
from drkit.qa.stats import per_question
from drkit.reader.examples import ReaderExample, read_passages, read_questions
from drkit.reader.model import Reader


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--data", type=Path, required=True, help="the 2Wiki folder (its corpus.jsonl)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    config = AnswerConfig()
    corpus = {p.id: p for p in read_passages(args.data / "corpus.jsonl")}
    records = read_questions(args.run / "split" / "dev.jsonl")
    by_id = passages_from_predictions(args.run / "retrieve-drkit" / "predictions.jsonl", corpus, config.passages)
    reader, compute = Reader.load(args.run / "train-reader" / "reader").for_reading()
    examples = [ReaderExample(r["id"], r["question"], tuple(by_id[r["id"]])) for r in records]
    readings = reader.read(examples, config.batch_size, compute=compute, config=config.reading())
    # every sentence's probability: the same reading with a threshold below any
    every = reader.read(examples, config.batch_size, compute=compute,
                        config=dataclasses.replace(config.reading(), support_threshold=1e-6))
    orders: dict[str, list] = {"drkit": [], "supporting_first": [], "evidence_first": [], "by_best_sentence": []}
    for e, r, a in zip(examples, readings, every):
        order = [p.id for p in e.passages]
        best: dict[str, float] = {}
        for s in a.supporting:
            best[s.passage_id] = max(best.get(s.passage_id, 0.0), 1.0 if s.prob is None else s.prob)
        orders["drkit"].append(order)
        orders["supporting_first"].append(held_first(order, {s.passage_id for s in r.supporting}))
        orders["evidence_first"].append(held_first(order, {p.id for p in reader_answer(r, e.passages).evidence}))
        orders["by_best_sentence"].append(sorted(order, key=lambda p: -best.get(p, 0.0)))
    gold = [[str(s) for s in r["supporting"]] for r in records]
    types = [r.get("type") for r in records]
    out = {"run": str(args.run), "questions": len(records), "R@2": {}}
    for name, ranked in orders.items():
        r2 = per_question(ranked, gold, 2)
        out["R@2"][name] = {"all": round(float(r2.mean()), 4), **{
            t: round(float(r2[[i for i, x in enumerate(types) if x == t]].mean()), 4) for t in sorted(set(types))}}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2) + "\n")
    for name, cells in out["R@2"].items():
        print(f"{name}: " + ", ".join(f"{t} {v}" for t, v in cells.items()))


if __name__ == "__main__":
    main()
