"""int8 dynamic quantisation of the question encoder (``--quantize int8``) against fp32, side by side in one run:
questions/s at batch 1 and 64 and the accuracy, on the same questions, for each model given.

* a hop-mixing model (``--mixing INDEX RUN QUESTIONS``, repeatable; questions: JSONL with "supporting"):
  passage retrieval alone (no entity answer), R@2, R@5, AR@2, AR@5 of its top 5;
* a multi-hop model (``--multihop INDEX RUN QUESTIONS``, repeatable; MetaQA-format questions): Hits@1.

Every question of the file is scored; batch 1 is timed over the first `--timed` of them, after 10 for warm-up.
Writes OUT/bench_quantize.json and OUT/bench_quantize.md.

    .venv/bin/python benchmarks/bench_quantize.py \\
        --mixing runs/2wiki-f0/index runs/2wiki-f0/train-drkit runs/2wiki-f0/split/dev.jsonl \\
        --mixing runs/2wiki-f1/index runs/2wiki-f1/train-drkit runs/2wiki-f1/split/dev.jsonl \\
        --multihop runs/sample-index runs/sample-model-2hop data/sample/2-hop/qa_dev.txt
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import time
from pathlib import Path


def timed(fn, items: list, batch: int) -> float:
    """Items per second of ``fn(chunk)`` over `items` in chunks of `batch`."""
    t0 = time.perf_counter()
    for i in range(0, len(items), batch):
        fn(items[i:i + batch])
    return len(items) / (time.perf_counter() - t0)


def load_mixing(index: str, run: str, questions: str, quantize: str):
    """A hop-mixing model in fp32 (int8 linears with `quantize`), passage retrieval alone, and its JSONL questions:
    (kit, the question rows, their texts)."""
    from drkit.qa.pipeline import DrKIT, LoadConfig

    kit = DrKIT.load(index, run, config=LoadConfig(precision="fp32", quantize=quantize),
                     retriever_options={"answers": False})
    rows = [json.loads(line) for line in open(questions, encoding="utf-8") if line.strip()]
    return kit, rows, [r["question"] for r in rows]


def top5(retriever, texts: list[str]) -> list[list[str]]:
    """Each question's top 5 passages (corpus ids), retrieved in batches of 64."""
    keys, ranked = retriever.pages.keys, []
    for i in range(0, len(texts), 64):
        ranked += [[keys[a] for a in r.articles] for r in retriever.retrieve(texts[i:i + 64], 5)]
    return ranked


def mixing_row(index: str, run: str, questions: str, quantize: str, n_timed: int) -> dict:
    kit, rows, texts = load_mixing(index, run, questions, quantize)
    retriever = kit.retriever
    ranked = top5(retriever, texts)
    out = {"questions": len(rows)}
    for k in (2, 5):
        recall = [len(set(r["supporting"]) & set(p[:k])) / len(set(r["supporting"])) for r, p in zip(rows, ranked)]
        out[f"R@{k}"] = round(sum(recall) / len(recall), 4)
        out[f"AR@{k}"] = round(sum(x == 1.0 for x in recall) / len(recall), 4)
    for q in texts[:10]:
        retriever.retrieve([q], 5)
    out["qps_batch1"] = round(timed(lambda c: retriever.retrieve(c, 5), texts[:n_timed], 1), 1)
    out["qps_batch64"] = round(timed(lambda c: retriever.retrieve(c, 5), texts, 64), 1)
    out["quantized_layers"] = sum(type(m).__name__ == "Linear" and "quantized" in type(m).__module__
                                  for m in kit.model.modules())
    return out  # the model is freed with this frame


def model_flags(ap: argparse.ArgumentParser) -> None:
    """--mixing and --multihop: the models a benchmark runs over, each with its index and questions."""
    ap.add_argument("--mixing", nargs=3, action="append", default=[], metavar=("INDEX", "RUN", "QUESTIONS"),
                    help="a hop-mixing model and JSONL questions with 'supporting' (repeatable)")
    ap.add_argument("--multihop", nargs=3, action="append", default=[], metavar=("INDEX", "RUN", "QUESTIONS"),
                    help="a multi-hop model and MetaQA-format questions (repeatable)")


def write_report(out: str | Path, name: str, found: dict, lines: list[str]) -> None:
    """OUT/<name>.json (`found`) and OUT/<name>.md (`lines`), and the table printed."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(found, indent=2) + "\n")
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def machine_info() -> dict:
    """What the figures of a benchmark run were measured on."""
    import torch

    return {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version(),
            "torch": torch.__version__, "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "threads": torch.get_num_threads()}


def metaqa_questions(kit, questions: str) -> tuple[list, list[set[str]]]:
    """The questions of a MetaQA-format file that `kit` parses, and each one's answers (lower case)."""
    from drkit.errors import QuestionError

    parsed, gold = [], []
    for line in open(questions, encoding="utf-8"):
        if not line.strip():
            continue
        q, answers = line.rstrip("\n").split("\t")
        try:
            parsed.append(kit.parse(q))
        except QuestionError:
            continue
        gold.append({a.strip().lower() for a in answers.split("|")})
    return parsed, gold


def multihop_row(index: str, run: str, questions: str, quantize: str, n_timed: int) -> dict:
    from drkit.qa.pipeline import DrKIT, LoadConfig

    kit = DrKIT.load(index, run, config=LoadConfig(precision="fp32", quantize=quantize))
    parsed, gold = metaqa_questions(kit, questions)
    results = []
    for i in range(0, len(parsed), 64):
        results += kit.answer_batch(parsed[i:i + 64], top=1, chain_top=0)
    hits = [bool(r.answers) and r.answers[0].entity.lower() in g for r, g in zip(results, gold)]
    out = {"questions": len(parsed), "Hits@1": round(sum(hits) / len(hits), 4)}
    for p in parsed[:10]:
        kit.answer_batch([p], top=1, chain_top=0)
    out["qps_batch1"] = round(timed(lambda c: kit.answer_batch(c, top=1, chain_top=0), parsed[:n_timed], 1), 1)
    out["qps_batch64"] = round(timed(lambda c: kit.answer_batch(c, top=1, chain_top=0), parsed, 64), 1)
    out["quantized_layers"] = sum(type(m).__name__ == "Linear" and "quantized" in type(m).__module__
                                  for m in kit.model.modules())
    return out  # the model is freed with this frame


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    model_flags(ap)
    ap.add_argument("--timed", type=int, default=200, help="questions timed at batch 1 (default: %(default)s)")
    ap.add_argument("--out", default="benchmarks/results/quantize", help="output folder (default: %(default)s)")
    args = ap.parse_args()
    if not args.mixing and not args.multihop:
        ap.error("give at least one --mixing or --multihop model")

    import torch

    rows = []
    for kind, specs, fn in (("hop-mixing", args.mixing, mixing_row), ("multi-hop", args.multihop, multihop_row)):
        for index, run, questions in specs:
            for quantize in ("none", "int8"):  # side by side, the same process and questions
                print(f"{kind} {run} quantize={quantize} ...", flush=True)
                r = {"kind": kind, "run": run, "questions_file": questions, "quantize": quantize,
                     **fn(index, run, questions, quantize, args.timed)}
                print(json.dumps(r), flush=True)
                rows.append(r)
                gc.collect()
    lines = [f"int8 dynamic quantisation of the question encoder against fp32 ({os.cpu_count()} CPUs, torch "
             f"{torch.__version__}, {torch.backends.cpu.get_cpu_capability()}); same process, same questions", "",
             "| model | questions | quantize | accuracy | q/s batch 1 | q/s batch 64 |", "|---|---|---|---|---|---|"]
    for r in rows:
        acc = (f"R@2 {r['R@2']}, R@5 {r['R@5']}, AR@2 {r['AR@2']}, AR@5 {r['AR@5']}" if r["kind"] == "hop-mixing"
               else f"Hits@1 {r['Hits@1']}")
        lines.append(f"| {r['kind']} {r['run']} | {r['questions']} of {r['questions_file']} | {r['quantize']} | {acc} | "
                     f"{r['qps_batch1']} | {r['qps_batch64']} |")
    write_report(args.out, "bench_quantize", {"machine": machine_info(), "rows": rows}, lines)


if __name__ == "__main__":
    main()
