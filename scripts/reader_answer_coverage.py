"""Whether the reader had the answer in front of it: for each question of a reproduce-2wiki fold's readings, whether
one of its gold answers (HotpotQA-normalised) is in the word pieces the reader read (`Reader.featurize`: its
passages cut to at most `max_pieces`), next to whether it answered right (EM).

    python scripts/reader_answer_coverage.py --run runs/2wiki-f0 --corpus ../shared/data/2wiki/corpus.jsonl \\
        --out benchmarks/results/reader-coverage/f0.json

Per reading (read-gold, read-drkit, ...) and question type: questions, answer in the passages given, answer in
what was read, EM, and EM where the answer was read.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter, defaultdict
from pathlib import Path

from drkit.reader.examples import ReaderExample, read_passages
from drkit.reader.model import Reader
from drkit.reader.reading import TITLE
from drkit.reader.text import normalize_answer


def read_text(example: ReaderExample, f) -> str:
    """The characters of the titles and sentences the reader read, as one string."""
    parts = []
    for number, (p, s) in enumerate(f.segments):
        pieces = (f.segment == number).nonzero()[0]
        c0, c1 = int(f.chars[pieces[0], 0]), int(f.chars[pieces[-1], 1])
        passage = example.passages[p]
        parts.append((passage.title if s == TITLE else passage.text)[c0:c1])
    return " ".join(parts)


def holds(text: str, answers: list[str]) -> bool:
    text = f" {normalize_answer(text)} "
    return any(a and f" {a} " in text for a in (normalize_answer(x) for x in answers))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a reproduce-2wiki fold folder (train-reader/, split/, read-*/)")
    ap.add_argument("--corpus", required=True, help="the corpus the passages come from (JSONL)")
    ap.add_argument("--reads", nargs="+", default=["read-gold", "read-drkit"], help="readings to look at")
    ap.add_argument("--out", required=True, help="JSON file written")
    args = ap.parse_args()
    run = Path(args.run)
    reader = Reader.load(run / "train-reader" / "reader")
    corpus = {p.id: p for p in read_passages(args.corpus)}
    gold = {q["id"]: q for q in map(json.loads, open(run / "split" / "dev.jsonl", encoding="utf-8"))}
    result = {"run": str(run), "max_pieces": reader.config.max_pieces, "reads": {}}
    for read in args.reads:
        counts: dict[str, Counter] = defaultdict(Counter)
        for p in map(json.loads, open(run / read / "predictions.jsonl", encoding="utf-8")):
            q = gold[p["id"]]
            example = ReaderExample(p["id"], q["question"], tuple(corpus[x["id"]] for x in p["passages"]))
            given = " ".join(f"{x.title} {x.text}" for x in example.passages)
            seen = holds(read_text(example, reader.featurize(example)), q["answers"])
            for key in (q["type"], "all"):
                c = counts[key]
                c["questions"] += 1
                c["answer_in_passages"] += holds(given, q["answers"])
                c["answer_read"] += seen
                c["em"] += p["em"]
                c["em_where_read"] += p["em"] * seen
        result["reads"][read] = {k: dict(v) for k, v in sorted(counts.items())}
        for k, v in sorted(counts.items()):
            print(read, k, dict(v))
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
