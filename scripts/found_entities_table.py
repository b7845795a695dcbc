"""2Wiki, both folds pooled: DrKIT with titles as its entities against titles plus the names and dates found in
the text (`--entities titles found`), with and without hop mixing over pages (`--page-mix`), on the same 436
questions (each scored by the model of the fold that did not train on it): R@2, R@5, AR@2, AR@5 with 95%
bootstrap intervals and paired tests against the titles model, and the entity answer's Hits@1 on the
compositional and inference questions.

    python scripts/found_entities_table.py --out benchmarks/results/2wiki-found-pagemix \\
        --questions runs/2wiki-f0/split/dev.jsonl runs/2wiki-f1/split/dev.jsonl \\
        --row "titles (the default)" runs/2wiki-f0/retrieve-drkit runs/2wiki-f1/retrieve-drkit \\
        --row "titles + found, page_mix" runs/found-pagemix/f0-page-mix/retrieve runs/found-pagemix/f1-page-mix/retrieve \\
        --row "titles + found, no page_mix" runs/found-pagemix/f0-no-page-mix/retrieve runs/found-pagemix/f1-no-page-mix/retrieve

Each retrieval folder holds predictions.jsonl and metrics.json (`drkit retrieve --answers` for the Hits@1); the
first row is the one the others are tested against. The same for the transfer to musique100 (not trained on;
the fold 0 model), tested against found entities with page_mix:

    python scripts/found_entities_table.py --out benchmarks/results/2wiki-found-pagemix/transfer-f0 \\
        --title "musique100, not trained on: the fold 0 model" --questions ../shared/data/musique100/questions.jsonl \\
        --row "titles + found, page_mix" runs/found-pagemix/transfer-f0/retrieve-page-mix \\
        --row "titles (the default)" runs/2wiki-f0/transfer/retrieve-drkit \\
        --row "titles + found, no page_mix" runs/found-pagemix/transfer-f0/retrieve-no-page-mix \\
        --row bm25 runs/2wiki-f0/transfer/peer-bm25 --row dense runs/2wiki-f0/transfer/peer-dense

(the found index of musique100: `drkit index --entities titles --entities found`, its mentions embedded with
the found run's encoder, `drkit embed --encoder runs/2wiki-f0-found/pretrain-kb_qa`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from drkit.experiments.twowiki_report import interval_lines, intervals

ANSWER_TYPES = ("compositional", "inference")


def entity_hits(dirs: list[Path]) -> dict | None:
    """Hits@1 of the entity answer on the compositional and inference questions of the folds, pooled (None when
    a folder's metrics have no entity answers: retrieved without --answers, or a peer)."""
    right = total = 0
    for d in dirs:
        answers = json.loads((d / "metrics.json").read_text()).get("answers")
        if not answers:
            return None
        for t in ANSWER_TYPES:
            cell = answers.get(t, {"questions": 0, "hits@1": 0.0})
            right += round(cell["hits@1"] * cell["questions"])
            total += cell["questions"]
    return {"questions": total, "right": right, "hits@1": round(right / total, 4) if total else None}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--questions", nargs="+", type=Path, required=True, help="each fold's dev questions, in order")
    ap.add_argument("--row", nargs="+", action="append", required=True, metavar=("NAME", "DIR"),
                    help="a row: its name, then one retrieval folder per fold")
    ap.add_argument("--title", default="2Wiki, both folds pooled: entities from titles, or titles and the text")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    rows = {r[0]: [Path(d) for d in r[1:]] for r in args.row}
    if any(len(d) != len(args.questions) for d in rows.values()):
        raise SystemExit("every --row has one folder per --questions file")
    first = list(rows)[0]  # the reference every other row is tested against
    found = intervals(rows, args.questions, reference=first)
    hits = {name: entity_hits(dirs) for name, dirs in rows.items()}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps({"rows": {n: [str(d) for d in v] for n, v in rows.items()},
                                                        "intervals": found, "entity_answers": hits}, indent=2) + "\n")
    lines = interval_lines(found, f"# {args.title}", reference=first)
    if any(h and h["questions"] for h in hits.values()):
        lines += ["", "| row | entity answer Hits@1, compositional + inference |", "|---|---|"]
        lines += [f"| {n} | {h['hits@1']:.3f} ({h['right']} of {h['questions']}) |" for n, h in hits.items()
                  if h and h["questions"]]
    lines += ["", "Rows: " + "; ".join(f"{n}: {', '.join(str(d) for d in v)}" for n, v in rows.items()) + "."]
    (args.out / "results.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
