"""The reader's answer and DrKIT's entity answer combined (issue 26, item 4): each rule of `RULES` picks, per
question, the reader's answer or the entity answer (the last hop's best entity the question does not name, both
in the ``drkit answer`` predictions); the rule is chosen on the training questions of both folds (each fold's
model and reader reading the questions they were trained on: the only choice the issue allows), and every rule is
then scored on the dev questions, pooled, with 95% bootstrap intervals and the paired sign-flip test against the
reader alone. Writes OUT/combination.json and OUT/combination.md.

    drkit answer --index runs/2wiki-f0-ta/index --model runs/2wiki-f0-ta/train-drkit \\
        --reader runs/2wiki-f0-nw/train-reader --questions runs/2wiki-f0/split/train.jsonl --qps-sample 0 \\
        --out runs/2wiki-f0-ta/answer-train     # the same with --questions .../dev.jsonl --out .../answer; fold 1 too
    python scripts/answer_combination.py \\
        --train runs/2wiki-f0-ta/answer-train runs/2wiki-f1-ta/answer-train \\
        --train-questions runs/2wiki-f0/split/train.jsonl runs/2wiki-f1/split/train.jsonl \\
        --dev runs/2wiki-f0-ta/answer runs/2wiki-f1-ta/answer \\
        --dev-questions runs/2wiki-f0/split/dev.jsonl runs/2wiki-f1/split/dev.jsonl \\
        --out benchmarks/results/answer-combination
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from drkit.qa.stats import bootstrap_ci, paired_test
from drkit.reader.clues import held_title
from drkit.reader.text import best_scores


def _entity(row: dict) -> str:
    return row.get("entity_answer") or ""


def _overlaps(row: dict) -> bool:
    """The reader's span holds the entity answer as whole words, or is held by it (neither blank nor equal)."""
    said, entity = row["answer"], _entity(row)
    return (row.get("answer_type") == "span" and bool(said.strip()) and bool(entity.strip())
            and said.casefold() != entity.casefold() and held_title(said, [entity], short=0) is not None)


RULES = {  # name -> (what it does, the answer it gives for a prediction row)
    "reader": ("the reader's answer alone (the default)", lambda r: r["answer"]),
    "entity": ("DrKIT's entity answer alone", _entity),
    "entity_if_overlapping": ("the entity answer where the reader's span holds it or is held by it (the entity's "
                              "edges for the reader's answer), else the reader's", lambda r: _entity(r) if _overlaps(r)
                              else r["answer"]),
    "entity_if_no_span": ("the entity answer where the reader says a blank span, else the reader's",
                          lambda r: _entity(r) if r.get("answer_type") == "span" and not r["answer"].strip()
                          else r["answer"]),
    "entity_if_two_steps": ("the entity answer where the reader read the question in two steps (a two-hop "
                            "question), else the reader's", lambda r: _entity(r) or r["answer"] if r.get("steps")
                            else r["answer"]),
}


def load(predictions: list[Path], questions: list[Path]) -> list[tuple[dict, dict]]:
    """(prediction row, question record) pairs, the folds one after another, in each file's order."""
    pairs = []
    for pred, qs in zip(predictions, questions):
        rows = [json.loads(x) for x in (pred / "predictions.jsonl").read_text(encoding="utf-8").splitlines() if x.strip()]
        records = [json.loads(x) for x in Path(qs).read_text(encoding="utf-8").splitlines() if x.strip()]
        if [r["id"] for r in rows] != [q["id"] for q in records]:
            raise SystemExit(f"{pred} does not hold the questions of {qs} in their order")
        pairs += list(zip(rows, records))
    return pairs


def scores(pairs, rule) -> tuple[np.ndarray, np.ndarray]:
    """Per question, EM and F1 of the rule's answer (the best over the answer's aliases)."""
    em, f1 = zip(*(best_scores(rule(row), q["answers"]) for row, q in pairs))
    return np.array(em, float), np.array(f1, float)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    for name in ("train", "train-questions", "dev", "dev-questions"):
        ap.add_argument(f"--{name}", type=Path, nargs="+", required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    train, dev = load(args.train, args.train_questions), load(args.dev, args.dev_questions)
    on_train = {name: float(scores(train, rule)[0].mean()) for name, (_, rule) in RULES.items()}
    chosen = max(RULES, key=lambda n: (on_train[n], n == "reader"))  # a tie keeps the reader alone
    base_em = scores(dev, RULES["reader"][1])[0]
    gain = int(((scores(dev, RULES["entity"][1])[0] == 1) & (base_em == 0)).sum())  # what any rule could gain at most
    report = {"train_questions": len(train), "dev_questions": len(dev), "chosen_on_train": chosen,
              "dev_entity_right_reader_wrong": gain, "rules": {}}
    types = ("comparison", "bridge_comparison", "compositional", "inference")
    for name, (what, rule) in RULES.items():
        em, f1 = scores(dev, rule)
        test = paired_test(em, base_em)
        report["rules"][name] = {
            "what": what, "train_em": round(on_train[name], 4), "em": round(float(em.mean()), 4),
            "em_ci95": [round(x, 4) for x in bootstrap_ci(em)], "f1": round(float(f1.mean()), 4),
            "em_by_type": {t: round(float(em[mask].mean()), 4) for t in types
                           if (mask := np.array([q.get("type") == t for _, q in dev])).any()},
            "answers_changed": sum(rule(r) != r["answer"] for r, _ in dev), "em_minus_reader": round(test["diff"], 4),
            "p": round(test["p"], 4)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "combination.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = [f"Rules chosen on {len(train)} training questions (both folds), scored on {len(dev)} dev questions pooled; "
             f"chosen: **{chosen}**. The entity answer is right where the reader is wrong on {gain} dev questions (what any "
             "rule could gain at most).", "",
             "| rule | EM on train | dev EM [95% CI] | dev F1 | " + " | ".join(types) + " | answers changed | p (paired, vs reader) |",
             "|---" * (6 + len(types)) + "|"]
    for name, m in report["rules"].items():
        lines.append(f"| {'**' + name + '**' if name == chosen else name} | {m['train_em']:.3f} | {m['em']:.3f} "
                     f"[{m['em_ci95'][0]:.3f}, {m['em_ci95'][1]:.3f}] | {m['f1']:.3f} | "
                     + " | ".join(f"{m['em_by_type'][t]:.3f}" if t in m["em_by_type"] else "-" for t in types)
                     + f" | {m['answers_changed']} | {m['p']:.4f} |")
    lines += ["", *(f"* {name}: {what}" for name, (what, _) in RULES.items())]
    (args.out / "combination.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
