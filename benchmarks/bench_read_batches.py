#!/usr/bin/env python
"""The reader's batched reading with its batches taken by length against in the questions' order, side by side in
one process: a ``reproduce-2wiki`` run's reader reads its drkit top N of the run's dev questions as ``drkit answer``
does (`drkit.qa.answer.read_and_score`'s chunks, the comparison rules and two-step reading on), once with
`drkit.reader.routing.read_whole` (batches by length, the default since 2026-12-06) and once with the former loop
kept here (`read_in_order`: batches as the examples come, each padded to its longest), taking turns `--repeats`
times. Reports the seconds of each, the word pieces the transformer computed (real and padded) and how many
answers differ between the two.

    python benchmarks/bench_read_batches.py --run runs/2wiki --out benchmarks/results/read-batches.json

Writes JSON (default benchmarks/results/read-batches.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import time
from pathlib import Path

import torch

from drkit.qa.answer import AnswerConfig, passages_from_predictions
from drkit.reader import routing
from drkit.reader.decode import decode
from drkit.reader.examples import ReaderExample, read_passages, read_questions
from drkit.reader.model import Reader
from drkit.util.hardware import choose, configure_threads


def read_in_order(reader, examples, batch_size, compute, config):
    """`read_whole` as it was: batches of `batch_size` in the examples' order, each padded to its longest."""
    out = []
    for i in range(0, len(examples), batch_size):
        chunk = examples[i : i + batch_size]
        features = [reader.featurize(e, max_pieces=config.pieces(reader.config.max_pieces)) for e in chunk]
        with compute.autocast() if compute is not None else contextlib.nullcontext():
            logits = reader(**reader.batch(features))
        logits = {k: v.float().cpu() for k, v in logits.items()}
        out += [decode(e, f, {k: v[r] for k, v in logits.items()}, config.support_threshold,
                       reader.config.max_answer_pieces, config.skip_bridges, config.span_checks)
                for r, (e, f) in enumerate(zip(chunk, features))]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--run", type=Path, required=True, help="a reproduce-2wiki run (its train-reader, split, retrieve-drkit)")
    ap.add_argument("--corpus", type=Path, default=Path("../shared/data/2wiki/corpus.jsonl"))
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/read-batches.json"))
    args = ap.parse_args()
    configure_threads(0)
    config = AnswerConfig()
    reader = Reader.load(args.run / "train-reader" / "reader").eval()
    compute = choose(config.precision, "cpu")
    records = read_questions(args.run / "split" / "dev.jsonl")
    by_id = passages_from_predictions(args.run / "retrieve-drkit" / "predictions.jsonl",
                                      {p.id: p for p in read_passages(args.corpus)}, config.passages)
    examples = [ReaderExample(r["id"], r["question"], tuple(by_id[r["id"]][: config.passages])) for r in records]
    chunk = 8 * config.batch_size  # as read_and_score reads
    stat = {"real": 0, "computed": 0}
    batch = reader.batch

    def counted(features):
        b = batch(features)
        stat["real"] += int(b["attention_mask"].sum())
        stat["computed"] += b["attention_mask"].numel()
        return b

    reader.batch = counted
    new_whole = routing.read_whole
    seconds, pieces, answers = {"by_length": [], "in_order": []}, {}, {}
    with torch.inference_mode():
        for _ in range(args.repeats):
            for name, whole in (("in_order", read_in_order), ("by_length", new_whole)):
                routing.read_whole = whole
                stat.update(real=0, computed=0)
                t = time.perf_counter()
                found = []
                for i in range(0, len(examples), chunk):
                    found += reader.read(examples[i : i + chunk], config.batch_size, compute=compute,
                                         config=config.reading())
                seconds[name].append(round(time.perf_counter() - t, 2))
                pieces[name] = dict(stat)
                answers[name] = [(r.answer, r.answer_type) for r in found]
    routing.read_whole = new_whole
    report = {"machine": {"platform": platform.platform(), "cpu_capability": torch.backends.cpu.get_cpu_capability(),
                          "threads": torch.get_num_threads(), "compute": str(compute),
                          "env": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                                                                 "ONEDNN_MAX_CPU_ISA")}},
              "run": str(args.run), "questions": len(examples), "batch_size": config.batch_size, "seconds": seconds,
              "pieces": pieces, "padding_share": {k: round(1 - v["real"] / v["computed"], 3) for k, v in pieces.items()},
              "speedup": round(min(seconds["in_order"]) / min(seconds["by_length"]), 3),
              "answers_differing": sum(a != b for a, b in zip(answers["in_order"], answers["by_length"]))}
    print(json.dumps(report, indent=2))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
