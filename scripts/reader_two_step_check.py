"""Where two-step reading (`drkit.reader.decompose`) loses 2Wiki's compositional questions: for each fold, the
compositional dev questions read in two steps from their gold passages (OUT/<fold>/gold-on of
``scripts/reader_option_compare.py --option decompose``), how many got the right bridge (the object of the first
evidence triple, either name holding the other once normalised), how many of those were answered right, in how
many the answer is in the bridge's own passages, and how many the same reader answers right when the outer
question is asked in the KB's words instead ("What is the {relation} of {bridge}?", the second triple's relation,
read in the same passages). Writes OUT/two_step_check.json.

    python scripts/reader_two_step_check.py --runs runs/2wiki-f0-eb4 runs/2wiki-f1-eb4 \\
        --compared benchmarks/results/reader-decompose --out benchmarks/results/reader-decompose
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from drkit.data.kb import kb_question
from drkit.reader.decompose import about
from drkit.reader.examples import ReaderExample, read_passages, read_questions
from drkit.reader.model import Reader
from drkit.reader.reading import ReadConfig
from drkit.reader.text import best_scores, normalize_answer
from drkit.util.hardware import configure_threads


def check_fold(run: Path, compared: Path, corpus: dict) -> dict:
    records = {r["id"]: r for r in read_questions(run / "split" / "dev.jsonl")}
    reader = Reader.load(run / "train-reader")
    whole = ReadConfig(compare=False, decompose=False)
    counts = {"two_step": 0, "right_bridge": 0, "right_answer": 0, "answer_in_bridge_page": 0, "right_in_kb_words": 0}
    for line in open(compared / run.name / "gold-on" / "predictions.jsonl", encoding="utf-8"):
        row = json.loads(line)
        q = records[row["id"]]
        if "steps" not in row or q.get("type") != "compositional" or len(q.get("evidence") or []) < 2:
            continue
        counts["two_step"] += 1
        gold, bridge = normalize_answer(q["evidence"][0][2]), normalize_answer(row["steps"]["bridge"])
        if not (gold in bridge or bridge in gold):
            continue
        counts["right_bridge"] += 1
        counts["right_answer"] += int(row["em"])
        passages = tuple(corpus[p["id"]] for p in row["passages"])
        own = tuple(passages[i] for i in about(passages, row["steps"]["bridge"]))
        text = normalize_answer(" ".join(f"{p.title} {p.text}" for p in own))
        counts["answer_in_bridge_page"] += any(normalize_answer(a) in text for a in q["answers"])
        asked = kb_question(row["steps"]["bridge"], q["evidence"][1][1])
        found = reader.read([ReaderExample(q["id"], asked, own, not_answers=(row["steps"]["bridge"],))], 1,
                            config=whole)[0]
        counts["right_in_kb_words"] += int(best_scores(found.answer, q["answers"])[0])
    return counts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, nargs="+", required=True)
    ap.add_argument("--compared", type=Path, required=True, help="the OUT of reader_option_compare.py --option decompose")
    ap.add_argument("--data", type=Path, default=Path("../shared/data/2wiki"))
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    configure_threads(0)
    corpus = {p.id: p for p in read_passages(args.data / "corpus.jsonl")}
    found = {run.name: check_fold(run, args.compared, corpus) for run in args.runs}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "two_step_check.json").write_text(json.dumps(found, indent=2) + "\n")
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
