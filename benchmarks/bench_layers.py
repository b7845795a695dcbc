"""transformers' BERT layers against drkit's lean path (`drkit.dense.layers`), side by side in one run.

For each model given, loaded once, the two paths take turns (`--rounds` rounds, each timing both, the
median kept) on the same questions, in fp32 and with the question encoder in int8 (``--quantize int8``):

* a hop-mixing model (``--mixing INDEX RUN QUESTIONS``, repeatable): passage retrieval alone (no entity
  answer), questions/s at batch 1 and 64, and R@5 of its top 5 by each path (they must be equal);
* a multi-hop model (``--multihop INDEX RUN QUESTIONS``, repeatable; MetaQA-format questions): questions/s
  at batch 1 and 64, Hits@1 by each path;
* one layer of the packaged MiniLM on a 24-piece question, ms a call.

Writes OUT/bench_layers.json and OUT/bench_layers.md.

    .venv/bin/python benchmarks/bench_layers.py \\
        --mixing runs/2wiki-f0/index runs/2wiki-f0/train-drkit runs/2wiki-f0/split/dev.jsonl \\
        --multihop runs/sample-index runs/sample-model-2hop data/sample/2-hop/qa_dev.txt
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time

from bench_quantize import load_mixing, machine_info, metaqa_questions, model_flags, timed, top5, write_report

PATHS = ("transformers", "lean")


@contextlib.contextmanager
def path(name: str):
    """Inside, `drkit.dense.layers` computes every layer as transformers does ("transformers") or leanly."""
    import drkit.dense.layers as layers

    lean = layers._lean
    if name == "transformers":
        layers._lean = lambda layer: False
    try:
        yield
    finally:
        layers._lean = lean


def side_by_side(run_batch, items: list, n_timed: int, rounds: int, ways: tuple = PATHS, inside=path) -> dict:
    """Per way (`ways`, each entered as ``inside(way)``; by default the two paths), the median questions/s at
    batch 1 (over the first `n_timed` items) and at batch 64."""
    out = {p: {"qps_batch1": [], "qps_batch64": []} for p in ways}
    for _ in range(rounds):
        for p in ways:
            with inside(p):
                for it in items[:10]:
                    run_batch([it])
                out[p]["qps_batch1"].append(timed(run_batch, items[:n_timed], 1))
                out[p]["qps_batch64"].append(timed(run_batch, items, 64))
    return {p: {k: round(statistics.median(v), 1) for k, v in d.items()} | {"rounds": rounds} for p, d in out.items()}


def mixing_rows(index: str, run: str, questions: str, quantize: str, n_timed: int, rounds: int) -> list[dict]:
    kit, rows, texts = load_mixing(index, run, questions, quantize)
    retriever = kit.retriever
    accuracy = {}
    for p in PATHS:
        with path(p):
            ranked = top5(retriever, texts)
        recall = [len(set(r["supporting"]) & set(ranked_[:5])) / len(set(r["supporting"])) for r, ranked_ in zip(rows, ranked)]
        accuracy[p] = {"R@5": round(sum(recall) / len(recall), 4), "ranked": ranked}
    same = accuracy["transformers"]["ranked"] == accuracy["lean"]["ranked"]
    speed = side_by_side(lambda c: retriever.retrieve(c, 5), texts, n_timed, rounds)
    return [{"kind": "hop-mixing", "run": run, "questions_file": questions, "questions": len(rows), "quantize": quantize,
             "path": p, "accuracy": f"R@5 {accuracy[p]['R@5']}", "same_rankings": same, **speed[p]} for p in PATHS]


def multihop_rows(index: str, run: str, questions: str, quantize: str, n_timed: int, rounds: int) -> list[dict]:
    from drkit.qa.pipeline import DrKIT, LoadConfig

    kit = DrKIT.load(index, run, config=LoadConfig(precision="fp32", quantize=quantize))
    parsed, gold = metaqa_questions(kit, questions)
    accuracy, answers = {}, {}
    for p in PATHS:
        with path(p):
            results = []
            for i in range(0, len(parsed), 64):
                results += kit.answer_batch(parsed[i:i + 64], top=1, chain_top=0)
        answers[p] = [[(a.entity, a.score) for a in r.answers] for r in results]
        hits = [bool(r.answers) and r.answers[0].entity.lower() in g for r, g in zip(results, gold)]
        accuracy[p] = f"Hits@1 {round(sum(hits) / len(hits), 4)}"
    speed = side_by_side(lambda c: kit.answer_batch(c, top=1, chain_top=0), parsed, n_timed, rounds)
    return [{"kind": "multi-hop", "run": run, "questions_file": questions, "questions": len(parsed), "quantize": quantize,
             "path": p, "accuracy": accuracy[p], "same_rankings": answers["transformers"] == answers["lean"], **speed[p]}
            for p in PATHS]


def layer_ms(rounds: int) -> dict:
    """ms a call of the packaged MiniLM's first layer on a (1, 24) question, per path."""
    import torch

    from drkit.data.tokenizer import DEFAULT_ENCODER, encoder_path
    from drkit.dense.encoder import load_transformer
    from drkit.dense.layers import additive_mask, bert_layer

    model = load_transformer(encoder_path(DEFAULT_ENCODER)).eval()
    layer = model.encoder.layer[0]
    h = torch.randn(1, 24, model.config.hidden_size, generator=torch.Generator().manual_seed(0))
    mask = additive_mask(torch.ones(1, 24))
    out = {p: [] for p in PATHS}
    with torch.no_grad():
        for _ in range(rounds):
            for p in PATHS:
                with path(p):
                    for _ in range(50):
                        bert_layer(layer, h, mask)
                    t0 = time.perf_counter()
                    for _ in range(500):
                        bert_layer(layer, h, mask)
                    out[p].append((time.perf_counter() - t0) / 500 * 1000)
    return {p: round(statistics.median(v), 3) for p, v in out.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    model_flags(ap)
    ap.add_argument("--timed", type=int, default=100, help="questions timed at batch 1 (default: %(default)s)")
    ap.add_argument("--rounds", type=int, default=3, help="turns of each path; the median is kept (default: %(default)s)")
    ap.add_argument("--quantize", nargs="+", default=["none", "int8"], choices=["none", "int8"],
                    help="question encoder settings to run (default: both)")
    ap.add_argument("--out", default="benchmarks/results/layers", help="output folder (default: %(default)s)")
    args = ap.parse_args()

    import torch

    layer = layer_ms(args.rounds)
    print(f"one MiniLM layer, (1, 24) question: {layer} ms", flush=True)
    rows = []
    for specs, fn in ((args.mixing, mixing_rows), (args.multihop, multihop_rows)):
        for index, run, questions in specs:
            for quantize in args.quantize:
                print(f"{run} quantize={quantize} ...", flush=True)
                for r in fn(index, run, questions, quantize, args.timed, args.rounds):
                    print(json.dumps(r), flush=True)
                    rows.append(r)
    machine = machine_info()
    lines = [f"transformers' BERT layers against drkit's lean path ({os.cpu_count()} CPUs, torch {torch.__version__}, "
             f"{machine['cpu_capability']}, fp32); one process, the paths taking turns, median of {args.rounds} rounds", "",
             f"One MiniLM layer on a 24-piece question: {layer['transformers']} ms (transformers), {layer['lean']} ms (lean).",
             "", "| model | questions | question encoder | path | accuracy | same output | q/s batch 1 | q/s batch 64 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['kind']} {r['run']} | {r['questions']} of {r['questions_file']} | {r['quantize']} | {r['path']} | "
                     f"{r['accuracy']} | {'yes' if r['same_rankings'] else 'NO'} | {r['qps_batch1']} | {r['qps_batch64']} |")
    write_report(args.out, "bench_layers", {"machine": machine, "layer_ms": layer, "rows": rows}, lines)


if __name__ == "__main__":
    main()
