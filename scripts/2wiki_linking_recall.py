"""Question-linking recall on 2WikiMultiHopQA (issue 13, item 3): how many questions have their gold title
entities in Z_0, within 1 hop and within 2 hops, over the TF-IDF A, the link graph, or both.

    python scripts/2wiki_linking_recall.py [--data ../shared/data/2wiki] [--work runs/2wiki-linking]

Builds the index (every title is in entities.txt), splits the questions as `drkit.experiments.twowiki_data`
does (seed 0, half in dev, by type), links each question (top 20 by bigram TF-IDF + exact names) and
writes benchmarks/results/2wiki/linking_recall.json and .md.
"""

import argparse
import json
import time
from pathlib import Path

from drkit.experiments.twowiki_data import read_question_records, split_questions
from drkit.index.build import build_index
from drkit.index.question_linking import QuestionLinker, hop_matrix, linking_recall
from drkit.index.sparse import SparseIndex

p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
p.add_argument("--data", default="../shared/data/2wiki")
p.add_argument("--work", default="runs/2wiki-linking")
p.add_argument("--out", default="benchmarks/results/2wiki")
args = p.parse_args()
data, work, out = Path(args.data), Path(args.work), Path(args.out)
if not (work / "index" / "manifest.json").exists():
    build_index(data / "corpus.jsonl", work / "index", entities=data / "entities.txt", overwrite=True)
split_questions(data / "train.jsonl", work / "split")
index = SparseIndex.load(work / "index")
linker = QuestionLinker.from_index(index)
article = {k: i for i, k in enumerate(index.article_keys)}
results = {"command": "python scripts/2wiki_linking_recall.py", "linker": "top 20 by bigram TF-IDF cosine + exact names"}
for part in ("dev", "train"):
    rows = read_question_records(work / "split" / f"{part}.jsonl")
    gold = [[int(index.article_entity[article[s]]) for s in r["supporting"]] for r in rows]
    t = time.perf_counter()
    linked = linker.link([r["question"] for r in rows])
    results[f"{part}_link_ms_per_question_batch"] = round(1000 * (time.perf_counter() - t) / len(rows), 3)
    t = time.perf_counter()
    for r in rows[:100]:
        linker.link([r["question"]])
    results[f"{part}_link_ms_per_question_batch1"] = round(1000 * (time.perf_counter() - t) / min(100, len(rows)), 3)
    for adjacency in ("tfidf", "links", "both"):
        results[f"{part}/{adjacency}"] = linking_recall(linked, gold, hop_matrix(index, adjacency), [r["type"] for r in rows])
out.mkdir(parents=True, exist_ok=True)
(out / "linking_recall.json").write_text(json.dumps(results, indent=1) + "\n")
lines = ["Question linking on 2WikiMultiHopQA (this half's questions, seeded split by type): share of questions with "
         "every gold title entity in Z_0 / within 1 hop / within 2 hops, and the mean number of entities there",
         "", "| split, graph | all@0 | all@1 | all@2 | entities reached @0 / @1 / @2 |", "|---|---|---|---|---|"]
for part in ("dev", "train"):
    for adjacency in ("tfidf", "links", "both"):
        o = results[f"{part}/{adjacency}"]["overall"]
        lines.append(f"| {part} ({o['questions']} q), {adjacency} | {o['all@0']:.3f} | {o['all@1']:.3f} | {o['all@2']:.3f} "
                     f"| {o['reached@0']} / {o['reached@1']} / {o['reached@2']} |")
(out / "linking_recall.md").write_text("\n".join(lines) + "\n")
print("\n".join(lines))
