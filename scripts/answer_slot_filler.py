"""How far a structured slot-filling query carries the entity answer (a diagnostic for issue 25's entity Hits@1):
on a reproduce-2wiki run's compositional and inference dev (or train) questions, the best mention on the bridge's page
(not the bridge's own) under the pretrained query encoder's g("bridge, relation, ?"), the form pretraining
trains, against the same encoder given the question's own text. The relation is the gold one of the question's
last evidence triple (an upper bound) or one predicted from the question's words by a classifier trained on the
train split's questions and their evidence (logistic regression on word n-grams); the bridge is the gold one
(the subject of that triple) or the model's own (the first of the retrieval's top 3 entities of Z_1, the passage
chain's hop from the linked Z_0, that has a page; the answer head starts from the named entities instead, so this is
an approximation of its bridge). No kind filter. Writes a JSON file of the counts.

    python scripts/answer_slot_filler.py --run runs/2wiki-f0 --encoder pretrain-kb_qa/encoder \
        --mentions mentions-kb_qa --model train-drkit --out benchmarks/results/x/slot-f0.json
"""

from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

import numpy as np

from drkit.dense.encoder import DualEncoder
from drkit.index.csr import concat_ranges
from drkit.qa.drkit_retriever import DrKITRetriever
from drkit.qa.metrics import answer_is_right

TYPES = ("compositional", "inference")


def relation_classifier(train: list[dict]):
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    rows = [q for q in train if q["type"] in TYPES and q.get("evidence")]
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, lowercase=True)
    x = vec.fit_transform([q["question"] for q in rows])
    clf = LogisticRegression(max_iter=2000, C=10.0).fit(x, [q["evidence"][-1][1] for q in rows])
    return lambda texts: clf.predict(vec.transform(texts)).tolist()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", required=True, help="a reproduce-2wiki folder (index, split/)")
    ap.add_argument("--encoder", required=True, help="the pretrained encoder, relative to --run")
    ap.add_argument("--mentions", required=True, help="its mention index, relative to --run")
    ap.add_argument("--model", required=True, help="the hop-mixing model (own bridges), relative to --run")
    ap.add_argument("--split", default="dev", choices=("dev", "train"),
                    help="the questions scored: dev, or train (facts pretraining saw: how well it fits them)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    run = Path(args.run)
    enc = DualEncoder.load(run / args.encoder)
    r = DrKITRetriever.load(run / "index", run / args.model, mentions=run / args.mentions, precision="fp32")
    g, names, lookup = r.vkb.graph, r.names, r.vkb.index.entities.lookup
    vectors = np.asarray(g.vectors, dtype=np.float32)
    train = [json.loads(line) for line in (run / "split" / "train.jsonl").read_text().splitlines()]
    dev = [q for q in (json.loads(line) for line in (run / "split" / f"{args.split}.jsonl").read_text().splitlines())
           if q["type"] in TYPES]
    predicted = relation_classifier(train)([q["question"] for q in dev])
    retrieved = r.retrieve([q["question"] for q in dev], 5, answers=True)
    counts = collections.Counter()
    for q, rel, res in zip(dev, predicted, retrieved):
        subject, relation, _ = q["evidence"][-1]
        counts["questions"] += 1
        counts["relation_predicted_right"] += rel == relation
        own = next((c["entity"] for c in res.chain[1] if r.pages.has_page(np.array([c["entity_id"]]))[0]), None)
        for bridge_kind, bridge in (("gold_bridge", subject), ("own_bridge", own)):
            e = lookup(bridge) if bridge is not None else None
            if e is None:
                continue
            ps = g.entity_page[g.entity_page_indptr[e]:g.entity_page_indptr[e + 1]]
            ms = concat_ranges(g.passage_mention_indptr[ps], np.diff(g.passage_mention_indptr)[ps])  # the page's mentions
            ms = ms[g.mention_entity[ms] != e]
            if not len(ms):
                continue
            counts[f"{bridge_kind}/answer_on_page"] += any(answer_is_right(names[x], q["answers"]) for x in g.mention_entity[ms])
            texts = {"gold_relation": f"{bridge}, {relation}, ?", "predicted_relation": f"{bridge}, {rel}, ?",
                     "question_text": q["question"]}
            for kind, v in zip(texts, enc.embed_queries(list(texts.values()), precision="fp32")):
                best = g.mention_entity[ms[int(np.argmax(vectors[ms] @ v))]]
                counts[f"{bridge_kind}/{kind}"] += answer_is_right(names[best], q["answers"])
        counts["answer_head"] += bool(res.answer) and answer_is_right(res.answer, q["answers"])
    out = {"run": str(run), "split": args.split, "encoder": args.encoder, "model": args.model,
           "counts": dict(sorted(counts.items()))}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out))


if __name__ == "__main__":
    main()
