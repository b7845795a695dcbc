"""The entity answer with and without the kind the question asks for (`drkit.qa.answer_kinds`), side by side
on the same runs: Hits@1 on each fold's held-out compositional and inference questions, pooled, with a paired
test. Each run is a `drkit reproduce-2wiki --entities titles ner` folder (its index, hop-mixing model and
split); an index built before entities had kinds gets them from the recogniser again (the same pipeline over
the same corpus, so the same labels).

    python scripts/answer_kinds_table.py --runs runs/2wiki-f0-ner runs/2wiki-f1-ner \\
        --out benchmarks/results/answer-kinds

Right means the answer's name equals a gold answer, ignoring case and surrounding space (`drkit retrieve`'s
Hits@1, `drkit.qa.metrics.answer_is_right`); a date named otherwise than the gold ("December 24, 1886" for "24 December 1886") counts as wrong.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from drkit.qa.drkit_retriever import DrKITRetriever
from drkit.qa.metrics import answer_is_right
from drkit.qa.stats import paired_test

TYPES = ("compositional", "inference")
HOPS, KINDS = "hops' order", "with kinds"


def kinds_for(retriever: DrKITRetriever, log=print) -> None:
    """Give the retriever's index the recogniser's kinds if it has none."""
    table = retriever.vkb.index.entities
    if table.kinds is not None:
        return
    from drkit.data.corpus import read_corpus
    from drkit.index.ner import ner_entities
    from drkit.util.warnlog import WarningLog

    corpus = retriever.vkb.index.manifest["inputs"]["corpus"]["path"]
    log(f"{retriever.vkb.index.path}: no kinds stored; recognising {corpus} again")
    found = ner_entities([a.text for a in read_corpus(corpus, "jsonl", WarningLog())])
    retriever.vkb.index.entities = table.with_kinds(found.kinds)


def hits(retriever: DrKITRetriever, questions: list[dict], with_kinds: bool) -> np.ndarray:
    retriever.answer_kinds = with_kinds
    out = []
    for q in questions:
        out.append(float(answer_is_right(retriever.retrieve([q["question"]], 20, answers=True)[0].answer, q["answers"])))
    return np.array(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", nargs="+", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows, pooled = {}, {False: [], True: []}
    for run in args.runs:
        r = DrKITRetriever.load(run / "index", run / "train-drkit", answers=True)
        kinds_for(r)
        questions = [q for q in map(json.loads, open(run / "split" / "dev.jsonl", encoding="utf-8"))
                     if q.get("type") in TYPES]
        fold = {k: hits(r, questions, k) for k in (False, True)}
        rows[str(run)] = {"questions": len(questions), **{(KINDS if k else HOPS): round(float(v.mean()), 4)
                                                          for k, v in fold.items()}}
        for k in pooled:
            pooled[k].append(fold[k])
    a, b = np.concatenate(pooled[False]), np.concatenate(pooled[True])
    test = paired_test(b, a)
    result = {"runs": rows, "pooled": {"questions": len(a), HOPS: round(float(a.mean()), 4),
                                       KINDS: round(float(b.mean()), 4), "paired_test": test,
                                       "changed": int((a != b).sum()), "now right": int(((b == 1) & (a == 0)).sum()),
                                       "now wrong": int(((b == 0) & (a == 1)).sum())}}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "answer_kinds.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = ["# Entity answers: the hops' order against the kind the question asks for first", "",
             "Hits@1 on the held-out compositional and inference questions (`scripts/answer_kinds_table.py`).", "",
             "| run | questions | hops' order | with kinds |", "|---|---|---|---|"]
    lines += [f"| {name} | {v['questions']} | {v[HOPS]:.3f} | {v[KINDS]:.3f} |" for name, v in rows.items()]
    p = result["pooled"]
    lines += [f"| pooled | {p['questions']} | {p[HOPS]:.3f} | {p[KINDS]:.3f} |", "",
              f"{p['changed']} answers changed: {p['now right']} now right, {p['now wrong']} now wrong; paired test "
              f"p = {test['p']:.3g}."]
    (args.out / "answer_kinds.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
