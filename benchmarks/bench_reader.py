"""The reader's answer EM/F1 against its time, over readers, how many word pieces they read and int8, side by
side in one run.

    .venv/bin/python benchmarks/bench_reader.py --run runs/2wiki-f0 --out benchmarks/results/reader-speed
    .venv/bin/python benchmarks/bench_reader.py --run runs/2wiki-f0 --readers runs/2wiki-f0/train-reader \
        runs/2wiki-f0-l3/train-reader --passages 5 3 --max-pieces 512 384 320 --out benchmarks/results/reader-inputs

For a `drkit reproduce-2wiki` run (its dev questions and drkit's ranking of each in RUN/retrieve-drkit), each
reader of ``--readers`` (default: the run's own, RUN/train-reader) reads drkit's top N (each N of ``--passages``)
of every dev question at each ``--max-pieces`` (the passages are cut to fit, `drkit.reader.features.allot`), and the script
records the reader's milliseconds a question at batch 1 (every question read by the transformer, one at a time, after
a warm-up: the comparison rules off) and at batch 8, and answer EM and F1 with the comparison rules applied to those
readings (what ``drkit answer`` answers by default, where the rules settle a question before reading it). Two-hop
questions are read as two one-hop questions with ``--decompose on`` (the default, `drkit.reader.decompose`: two
shorter readings instead of one; ``off`` reads every question whole, as runs before it existed did). Writes
``OUT/bench_reader.json``, ``OUT/bench_reader.md`` and ``OUT/readings.jsonl`` (every question's answer, EM and F1
per row).

    .venv/bin/python benchmarks/bench_reader.py --run runs/2wiki-f0-eb4 --max-pieces 512 --decompose off on \
        --out benchmarks/results/reader-decompose/speed-f0

With several ``--run`` (the two folds of ``reproduce-2wiki``), each run's own reader reads its own dev questions and
the rows are also pooled over the runs: EM and F1 over all their questions with 95% bootstrap intervals, each row
against the first by the paired sign-flip test, and the milliseconds of all the readings over all the questions.

    .venv/bin/python benchmarks/bench_reader.py --run runs/2wiki-f0 runs/2wiki-f1 --max-pieces 512 384 \
        --out benchmarks/results/reader-pieces
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from drkit.dense.quantize import QUANTIZE, quantize_transformer
from drkit.qa.answer import passages_from_predictions
from drkit.qa.stats import bootstrap_ci, paired_test
from drkit.reader.compare import settled
from drkit.reader.examples import ReaderExample, read_passages, read_questions
from drkit.reader.model import Reader
from drkit.reader.reading import ReadConfig
from drkit.reader.text import best_scores
from drkit.util.figures import interval, three
from drkit.util.hardware import configure_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, type=Path, nargs="+",
                    help="drkit reproduce-2wiki runs with their reader step done (several: pooled, each its own reader)")
    ap.add_argument("--readers", type=Path, nargs="+", default=None,
                    help="readers (or their train-reader runs) read side by side (default: RUN/train-reader; one --run)")
    ap.add_argument("--corpus", type=Path, default=Path("../shared/data/2wiki/corpus.jsonl"))
    ap.add_argument("--max-pieces", type=int, nargs="+", default=[512, 384, 256])
    ap.add_argument("--passages", type=int, nargs="+", default=[5], help="drkit's top N passages read, each N side by side")
    ap.add_argument("--quantize", nargs="+", choices=QUANTIZE, default=["none"],
                    help="each setting read side by side: none (fp32) or int8 (the transformer's Linear layers as int8 "
                         "dynamic quantisation, as --quantize int8 does)")
    ap.add_argument("--decompose", nargs="+", choices=("off", "on"), default=["on"],
                    help="read two-hop questions as two one-hop questions (on) or whole (off), each side by side")
    ap.add_argument("--limit", type=int, default=0, help="read only each run's first N dev questions (a quick check; 0: all)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    if len(args.run) > 1 and args.readers:
        ap.error("--readers takes one --run; with several runs each is read by its own reader (RUN/train-reader)")
    if args.limit < 0:
        ap.error(f"--limit must be 0 (all questions) or more, not {args.limit}")
    if len({r.resolve() for r in args.run}) < len(args.run):
        ap.error("--run names one run twice: pooled, its questions would count as other questions")
    configure_threads(0)
    corpus = {p.id: p for p in read_passages(args.corpus)}
    rows, readings, questions = [], [], 0
    for run in args.run:
        readers = [Reader.load(path) for path in args.readers or [run / "train-reader"]]
        records = read_questions(run / "split" / "dev.jsonl")[: args.limit or None]
        questions += len(records)
        by_id = passages_from_predictions(run / "retrieve-drkit" / "predictions.jsonl", corpus, max(args.passages))
        for (which, fp32), n, quantize, pieces, dec in itertools.product(enumerate(readers), args.passages, args.quantize,
                                                                         args.max_pieces, args.decompose):
            setting = {"reader": which, "passages": n, "quantize": quantize, "max_pieces": pieces, "decompose": dec}
            row, scores = read_row(fp32, records, by_id, setting)
            rows.append({"run": str(run), **row})
            readings += [{"run": str(run), "id": r["id"], "type": r.get("type"), **setting, "answer": a, "em": em, "f1": f1}
                         for r, a, (em, f1) in zip(records, scores["answers"], scores["scores"])]
            print(rows[-1], flush=True)
    found = {"runs": [str(r) for r in args.run], "questions": questions,
             "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                         "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()},
             "rows": rows, **({"pooled": pooled_rows(rows, readings)} if len(args.run) > 1 else {})}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_reader.json").write_text(json.dumps(found, indent=2) + "\n")
    with open(args.out / "readings.jsonl", "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in readings)
    (args.out / "bench_reader.md").write_text("\n".join(markdown(found)) + "\n")


SETTING = ("reader", "passages", "quantize", "max_pieces", "decompose")


def read_row(fp32: Reader, records: list[dict], by_id: dict, setting: dict) -> tuple[dict, dict]:
    """One row: every dev question read with `setting`, timed at batch 1 (after a warm-up) and at batch 8, scored."""
    pieces, n = setting["max_pieces"], setting["passages"]
    config = ReadConfig(max_pieces=pieces, compare=False, decompose=setting["decompose"] == "on")
    examples = [ReaderExample(r["id"], r["question"], tuple(by_id[r["id"]][:n])) for r in records]
    reader = fp32
    if setting["quantize"] == "int8":
        reader = copy.deepcopy(fp32)
        quantize_transformer(reader, "fp32")
    reader.read(examples[:4], 1, config=config)  # warm-up
    t = time.perf_counter()
    readings = reader.read(examples, 1, config=config)  # every question read
    batch1 = time.perf_counter() - t
    t = time.perf_counter()
    reader.read(examples, 8, config=config)
    batch8 = time.perf_counter() - t
    answers = [found.answer if (found := settled(e)) is not None else x.answer for e, x in zip(examples, readings)]
    scores = [best_scores(a, r["answers"]) for a, r in zip(answers, records)]
    lengths = [len(reader.featurize(e, max_pieces=pieces).ids) for e in examples]
    weights = str(next(fp32.parameters()).dtype).removeprefix("torch.")  # read as stored: no autocast here
    row = {"reader_path": str(fp32.path), "layers": fp32.transformer.config.num_hidden_layers,
           "compute": weights if setting["quantize"] == "none" else f"int8 Linear layers, {weights} elsewhere",
           "parameters": sum(p.numel() for p in fp32.parameters()), **setting, "questions": len(records),
           "decomposed": sum(x.steps is not None for x in readings),
           "em": round(sum(s[0] for s in scores) / len(scores), 4), "f1": round(sum(s[1] for s in scores) / len(scores), 4),
           "ms_per_question_batch1": round(1000 * batch1 / len(examples), 1),
           "ms_per_question_batch8": round(1000 * batch8 / len(examples), 1),
           "seconds_batch1": batch1, "seconds_batch8": batch8,
           "mean_pieces_read": round(sum(lengths) / len(lengths), 1), "pieces_read": sum(lengths)}
    return row, {"answers": answers, "scores": scores}


def pooled_rows(rows: list[dict], readings: list[dict]) -> list[dict]:
    """Each setting over every run's questions: EM / F1 with intervals, the paired test against the first setting,
    the milliseconds of all its readings over all its questions."""
    keys = list(dict.fromkeys(tuple(r[k] for k in SETTING) for r in rows))

    def per_question(key, metric):
        got = {(x["run"], x["id"]): x[metric] for x in readings if tuple(x[k] for k in SETTING) == key}
        return np.array([got[q] for q in sorted(got)])

    first = {metric: per_question(keys[0], metric) for metric in ("em", "f1")}
    out = []
    for key in keys:
        mine = [r for r in rows if tuple(r[k] for k in SETTING) == key]
        questions = sum(r["questions"] for r in mine)
        cell = {**dict(zip(SETTING, key)), "questions": questions}
        for metric in ("em", "f1"):
            x = per_question(key, metric)
            if len(x) != questions:
                raise ValueError(f"{len(x)} questions read for {dict(zip(SETTING, key))}, {questions} counted")
            cell[metric] = round(float(x.mean()), 4)
            cell[f"{metric}_ci95"] = [round(v, 4) for v in bootstrap_ci(x)]
            if key != keys[0]:
                test = paired_test(x, first[metric])
                cell[f"{metric}_minus_first"], cell[f"{metric}_p"] = round(test["diff"], 4), round(test["p"], 4)
                cell[f"{metric}_p_exact"] = test["exact"]
        for b in (1, 8):
            cell[f"ms_per_question_batch{b}"] = round(1000 * sum(r[f"seconds_batch{b}"] for r in mine) / questions, 1)
        cell["mean_pieces_read"] = round(sum(r["pieces_read"] for r in mine) / questions, 1)
        out.append(cell)
    return out


def markdown(found: dict) -> list[str]:
    runs = ", ".join(found["runs"])
    lines = [f"# The reader's EM/F1 against its time ({found['questions']} dev questions of {runs}, drkit's top N)", "",
             f"Machine: {found['machine']}. Every question read by the transformer; EM and F1 with the comparison rules "
             "applied to its answers (as `drkit answer` answers by default).", "",
             "| run | reader | layers | N | computed in | max pieces | decompose (questions) | mean pieces read | EM | F1 "
             "| ms/question batch 1 | ms/question batch 8 |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['run']} | {r['reader_path']} | {r['layers']} | {r['passages']} | {r['compute']} | {r['max_pieces']} "
              f"| {r['decompose']} ({r['decomposed']}) | {r['mean_pieces_read']} | {three(r['em'])} | {three(r['f1'])} "
              f"| {r['ms_per_question_batch1']} | {r['ms_per_question_batch8']} |" for r in found["rows"]]
    if found.get("pooled"):
        lines += ["", f"## Pooled over the runs ({found['pooled'][0]['questions']} questions)", "",
                  "| reader | N | quantize | max pieces | decompose | mean pieces read | EM [95% CI] | F1 [95% CI] "
                  "| EM, F1 against the first row (p) | ms/question batch 1 | batch 8 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
        for c in found["pooled"]:
            against = (f"{c['em_minus_first']:+.4f} (p {c['em_p']:.4f}), {c['f1_minus_first']:+.4f} (p {c['f1_p']:.4f})"
                       if "em_p" in c else "-")
            lines.append(f"| {c['reader']} | {c['passages']} | {c['quantize']} | {c['max_pieces']} | {c['decompose']} "
                         f"| {c['mean_pieces_read']} | {three(c['em'])} {interval(c['em_ci95'])} "
                         f"| {three(c['f1'])} {interval(c['f1_ci95'])} | {against} | {c['ms_per_question_batch1']} "
                         f"| {c['ms_per_question_batch8']} |")
        lines += ["", "Reader 0 is each run's own (RUN/train-reader). p: the paired sign-flip test over the same questions "
                  "(every sign assignment where at most 16 questions differ, else 10,000 random ones); 95% bootstrap intervals."]
    return lines


if __name__ == "__main__":
    main()
