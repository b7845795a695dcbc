"""The reader's cost by base transformer (all-MiniLM-L6-v2 against a larger one such as all-mpnet-base-v2), side by
side in one run: a training step and a reading at batch 1.

For a `drkit reproduce-2wiki` run (its training split and KB for the training examples, its dev questions and
drkit's ranking of them for the readings), each base of ``--bases`` gets a fresh reader (`Reader.from_base`: the
base's weights, new heads; what it answers does not matter here, so nothing is trained). The bases then take turns:

* ``--steps`` training steps each, batches sorted by length as `drkit train-reader` draws them, timing the forward
  and backward pass of one batch (no optimizer update);
* ``--questions`` dev questions each, read one at a time (drkit's top N, comparison rules off, every question read
  whole), after a warm-up.

It records the seconds a step, the estimated minutes of a default training (`ReaderTrainConfig.epochs` passes,
optimizer updates left out), and the milliseconds a question read at batch 1. Writes OUT/bench_reader_base.json
and OUT/bench_reader_base.md.

    .venv/bin/python benchmarks/bench_reader_base.py --run runs/2wiki-f0 \\
        --bases all-MiniLM-L6-v2 /path/to/all-mpnet-base-v2 --out benchmarks/results/reader-base
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench_quantize import machine_info, write_report
from bench_reader_train import run_sources

from drkit.qa.answer import passages_from_predictions
from drkit.reader.examples import ReaderExample, epoch_examples, read_passages, read_questions
from drkit.reader.model import Reader, ReaderConfig
from drkit.reader.reading import ReadConfig
from drkit.util.hardware import configure_threads
from drkit.util.sampling import bucketed_step_rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, type=Path, help="a drkit reproduce-2wiki run with its retrieval done")
    ap.add_argument("--bases", nargs="+", required=True,
                    help="base transformers: all-MiniLM-L6-v2 (packaged) or folders with config.json, safetensors "
                         "weights and tokenizer")
    ap.add_argument("--corpus", type=Path, default=Path("../shared/data/2wiki/corpus.jsonl"))
    ap.add_argument("--steps", type=int, default=6, help="training steps timed for each base")
    ap.add_argument("--questions", type=int, default=40, help="dev questions read for each base")
    ap.add_argument("--passages", type=int, default=5, help="drkit's top N passages read")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    configure_threads(0)
    config, order, sources, alone = run_sources(args.run, args.corpus)
    corpus = {p.id: p for p in read_passages(args.corpus)}
    records = read_questions(args.run / "split" / "dev.jsonl")[: args.questions]
    by_id = passages_from_predictions(args.run / "retrieve-drkit" / "predictions.jsonl", corpus, args.passages)
    questions = [ReaderExample(r["id"], r["question"], tuple(by_id[r["id"]][: args.passages])) for r in records]
    reading = ReadConfig(compare=False, decompose=False)
    examples = epoch_examples(sources, order, config.seed, 0, alone)
    readers, features = {}, {}
    for base in args.bases:
        readers[base] = Reader.from_base(ReaderConfig(base=base), config.seed)
        features[base] = [readers[base].featurize(e, labels=True) for e in examples]
        readers[base].read(questions[:2], 1, config=reading)  # warm-up
    seconds: dict = {b: [] for b in args.bases}
    for step in range(args.steps):
        for base in args.bases if step % 2 == 0 else args.bases[::-1]:
            reader, fs = readers[base], features[base]
            reader.train()
            batch = [fs[i] for i in bucketed_step_rows([len(f.ids) for f in fs], config.batch_size, step, config.seed,
                                                       config.bucket)]
            t = time.perf_counter()
            loss, _ = reader.loss(reader(**reader.batch(batch)), batch)
            loss.backward()
            reader.zero_grad(set_to_none=True)
            seconds[base].append(time.perf_counter() - t)
            print(base, "step", step, round(seconds[base][-1], 2), flush=True)
    read_ms: dict = {b: [] for b in args.bases}
    for k, base in enumerate(args.bases * 2):  # two turns each, in turn
        reader = readers[base]
        reader.eval()
        half = questions[: len(questions) // 2] if k < len(args.bases) else questions[len(questions) // 2:]
        t = time.perf_counter()
        reader.read(half, 1, config=reading)
        read_ms[base].append((time.perf_counter() - t) / len(half) * 1000)
        print(base, "reading", round(read_ms[base][-1], 1), flush=True)
    per_pass = len(examples) // config.batch_size
    rows = [{"base": base, "layers": readers[base].transformer.config.num_hidden_layers,
             "parameters": sum(p.numel() for p in readers[base].parameters()),
             "attention": getattr(readers[base].transformer.config, "_attn_implementation", None),
             "train_step_s_median": round(statistics.median(seconds[base]), 3),
             "train_step_s_mean": round(statistics.mean(seconds[base]), 3),
             "training_minutes_estimate": round(statistics.mean(seconds[base]) * per_pass * config.epochs / 60, 1),
             "ms_per_question_read_batch1": round(statistics.mean(read_ms[base]), 1)} for base in args.bases]
    first = rows[0]
    for r in rows:
        r["step_x_first"] = round(r["train_step_s_mean"] / first["train_step_s_mean"], 2)
        r["reading_x_first"] = round(r["ms_per_question_read_batch1"] / first["ms_per_question_read_batch1"], 2)
    found = {"run": str(args.run), "examples_a_pass": len(examples), "steps_a_pass": per_pass, "epochs": config.epochs,
             "questions_read": len(questions), "machine": machine_info(), "rows": rows}
    lines = [f"# The reader's cost by base transformer ({args.run})", "",
             f"Machine: {found['machine']}. Fresh readers (base weights, new heads), taking turns: {args.steps} training "
             f"steps each (batch {config.batch_size}, sorted by length; forward and backward, no optimizer update) and "
             f"{len(questions)} dev questions each read at batch 1 (drkit's top {args.passages}, whole, rules off). "
             f"A training is {config.epochs} passes of {per_pass} steps.", "",
             "| base | layers | parameters | attention | s a step (median / mean) | x the first | training, estimated (min) "
             "| ms a question read, batch 1 | x the first |", "|---|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['base']} | {r['layers']} | {r['parameters'] / 1e6:.1f}M | {r['attention']} | {r['train_step_s_median']} / "
              f"{r['train_step_s_mean']} | {r['step_x_first']} | {r['training_minutes_estimate']} | "
              f"{r['ms_per_question_read_batch1']} | {r['reading_x_first']} |" for r in rows]
    write_report(args.out, "bench_reader_base", found, lines)


if __name__ == "__main__":
    main()
