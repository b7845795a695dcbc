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
``OUT/bench_reader.json`` and ``OUT/bench_reader.md``.

    .venv/bin/python benchmarks/bench_reader.py --run runs/2wiki-f0-eb4 --max-pieces 512 --decompose off on \
        --out benchmarks/results/reader-decompose/speed-f0
"""

from __future__ import annotations

import argparse
import copy
import itertools
import json
import platform
import time
from pathlib import Path

import torch

from drkit.dense.quantize import QUANTIZE, quantize_transformer
from drkit.qa.answer import passages_from_predictions
from drkit.reader.compare import settled
from drkit.reader.examples import ReaderExample, read_passages, read_questions
from drkit.reader.model import Reader
from drkit.reader.reading import ReadConfig
from drkit.reader.text import best_scores
from drkit.util.figures import three
from drkit.util.hardware import configure_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, type=Path, help="a drkit reproduce-2wiki run with its reader step done")
    ap.add_argument("--readers", type=Path, nargs="+", default=None,
                    help="readers (or their train-reader runs) read side by side (default: RUN/train-reader)")
    ap.add_argument("--corpus", type=Path, default=Path("../shared/data/2wiki/corpus.jsonl"))
    ap.add_argument("--max-pieces", type=int, nargs="+", default=[512, 384, 256])
    ap.add_argument("--passages", type=int, nargs="+", default=[5], help="drkit's top N passages read, each N side by side")
    ap.add_argument("--quantize", nargs="+", choices=QUANTIZE, default=["none"],
                    help="each setting read side by side: none (fp32) or int8 (the transformer's Linear layers as int8 "
                         "dynamic quantisation, as --quantize int8 does)")
    ap.add_argument("--decompose", nargs="+", choices=("off", "on"), default=["on"],
                    help="read two-hop questions as two one-hop questions (on) or whole (off), each side by side")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    configure_threads(0)
    readers = [Reader.load(path) for path in args.readers or [args.run / "train-reader"]]
    corpus = {p.id: p for p in read_passages(args.corpus)}
    records = read_questions(args.run / "split" / "dev.jsonl")
    by_id = passages_from_predictions(args.run / "retrieve-drkit" / "predictions.jsonl", corpus, max(args.passages))
    rows = []
    for fp32, n, quantize, pieces, dec in itertools.product(readers, args.passages, args.quantize, args.max_pieces,
                                                            args.decompose):
        config = ReadConfig(max_pieces=pieces, compare=False, decompose=dec == "on")
        examples = [ReaderExample(r["id"], r["question"], tuple(by_id[r["id"]][:n])) for r in records]
        reader = fp32
        if quantize == "int8":
            reader = copy.deepcopy(fp32)
            quantize_transformer(reader, "fp32")
        reader.read(examples[:4], 1, config=config)  # warm-up
        t = time.perf_counter()
        readings = reader.read(examples, 1, config=config)  # every question read
        batch1 = (time.perf_counter() - t) / len(examples)
        t = time.perf_counter()
        reader.read(examples, 8, config=config)
        batch8 = (time.perf_counter() - t) / len(examples)
        answers = [found.answer if (found := settled(e)) is not None else x.answer for e, x in zip(examples, readings)]
        scores = [best_scores(a, r["answers"]) for a, r in zip(answers, records)]
        lengths = [len(reader.featurize(e, max_pieces=pieces).ids) for e in examples]
        weights = str(next(fp32.parameters()).dtype).removeprefix("torch.")  # read as stored: no autocast here
        rows.append({"reader": str(fp32.path), "layers": fp32.transformer.config.num_hidden_layers,
                     "compute": weights if quantize == "none" else f"int8 Linear layers, {weights} elsewhere",
                     "parameters": sum(p.numel() for p in fp32.parameters()), "passages": n, "quantize": quantize,
                     "max_pieces": pieces, "decompose": dec, "decomposed": sum(x.steps is not None for x in readings),
                     "em": round(sum(s[0] for s in scores) / len(scores), 4),
                     "f1": round(sum(s[1] for s in scores) / len(scores), 4),
                     "ms_per_question_batch1": round(1000 * batch1, 1), "ms_per_question_batch8": round(1000 * batch8, 1),
                     "mean_pieces_read": round(sum(lengths) / len(lengths), 1)})
        print(rows[-1], flush=True)
    found = {"run": str(args.run), "questions": len(records),
             "machine": {"cpu": platform.processor() or platform.machine(), "threads": torch.get_num_threads(),
                         "torch_cpu_capability": torch.backends.cpu.get_cpu_capability()},
             "rows": rows}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench_reader.json").write_text(json.dumps(found, indent=2) + "\n")
    lines = [f"# The reader's EM/F1 against its time ({len(records)} dev questions of {args.run}, drkit's top N)", "",
             f"Machine: {found['machine']}. Every question read by the transformer; EM and F1 with the comparison rules "
             "applied to its answers (as `drkit answer` answers by default).", "",
             "| reader | layers | N | computed in | max pieces | decompose (questions) | mean pieces read | EM | F1 "
             "| ms/question batch 1 | ms/question batch 8 |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['reader']} | {r['layers']} | {r['passages']} | {r['compute']} | {r['max_pieces']} "
              f"| {r['decompose']} ({r['decomposed']}) | {r['mean_pieces_read']} | {three(r['em'])} | {three(r['f1'])} | {r['ms_per_question_batch1']} "
              f"| {r['ms_per_question_batch8']} |" for r in rows]
    (args.out / "bench_reader.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
