"""The reader's training step with batches as drawn against batches sorted by length (``--bucket``), side by side
in one run.

For a `drkit reproduce-2wiki` run (its training questions RUN/split/train.jsonl and KB RUN/kb-train.txt), the
first pass's examples are drawn as `drkit train-reader` draws them, and for ``--steps`` steps the two ways of
batching take turns (which goes first alternates), each timing a forward and backward pass of its own step's
batch through one fresh reader (no optimizer update: its cost does not depend on the batch). Records seconds a
step (median and mean), word pieces read and padded a step, and a pass's estimated time for each. Writes
OUT/bench_reader_train.json and OUT/bench_reader_train.md.

    .venv/bin/python benchmarks/bench_reader_train.py --run runs/2wiki-f0-bkt --out benchmarks/results/reader-bucket
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

from bench_quantize import machine_info, write_report

from drkit.reader.examples import OrderConfig, epoch_examples
from drkit.reader.model import Reader, ReaderConfig
from drkit.reader.train import ReaderTrainConfig, training_sources
from drkit.util.hardware import configure_threads
from drkit.util.sampling import bucketed_step_rows, step_rows


def run_sources(run: Path, corpus: Path) -> tuple:
    """The default training settings, example order, sources and read-alone share of `drkit train-reader` on a
    `drkit reproduce-2wiki` run's training split and KB."""
    config, order = ReaderTrainConfig(), OrderConfig()
    _, _, sources, _, alone = training_sources(corpus, run / "split" / "train.jsonl", run / "kb-train.txt", order, config)
    return config, order, sources, alone


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True, type=Path, help="a drkit reproduce-2wiki run (its split and kb-train.txt)")
    ap.add_argument("--corpus", type=Path, default=Path("../shared/data/2wiki/corpus.jsonl"))
    ap.add_argument("--steps", type=int, default=24, help="steps timed for each way of batching")
    ap.add_argument("--bucket", type=int, default=ReaderTrainConfig.bucket, help="batches a pool sorted by length")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    configure_threads(0)
    config, order, sources, alone = run_sources(args.run, args.corpus)
    reader = Reader.from_base(ReaderConfig(), config.seed)
    reader.train()
    features = [reader.featurize(e, labels=True) for e in epoch_examples(sources, order, config.seed, 0, alone)]
    lengths = [len(f.ids) for f in features]
    ways = {"as drawn (--bucket 0)": lambda s: step_rows(len(features), config.batch_size, s, config.seed),
            f"sorted by length (--bucket {args.bucket})": lambda s: bucketed_step_rows(
                lengths, config.batch_size, s, config.seed, args.bucket)}
    seconds = {name: [] for name in ways}
    pieces = {name: [0, 0] for name in ways}  # read, padded
    for step in range(args.steps):
        names = list(ways) if step % 2 == 0 else list(ways)[::-1]
        for name in names:
            batch = [features[i] for i in ways[name](step)]
            t = time.perf_counter()
            loss, _ = reader.loss(reader(**reader.batch(batch)), batch)
            loss.backward()
            reader.zero_grad(set_to_none=True)
            seconds[name].append(time.perf_counter() - t)
            pieces[name][0] += sum(len(f.ids) for f in batch)
            pieces[name][1] += len(batch) * max(len(f.ids) for f in batch)
        print(step, {k: round(v[-1], 2) for k, v in seconds.items()}, flush=True)
    per_pass = len(features) // config.batch_size
    rows = [{"batching": name, "steps": args.steps, "median_s": round(statistics.median(s), 3),
             "mean_s": round(statistics.mean(s), 3), "pieces_read_per_step": round(pieces[name][0] / args.steps, 1),
             "pieces_padded_per_step": round(pieces[name][1] / args.steps, 1),
             "padding_share": round(1 - pieces[name][0] / pieces[name][1], 3),
             "pass_minutes_estimate": round(statistics.mean(s) * per_pass / 60, 1)} for name, s in seconds.items()]
    found = {"run": str(args.run), "examples_a_pass": len(features), "steps_a_pass": per_pass,
             "machine": machine_info(), "rows": rows}
    lines = [f"# The reader's training step: batches as drawn against sorted by length ({args.run}, first pass)", "",
             f"Machine: {found['machine']}. {args.steps} steps each, taking turns; forward and backward only; "
             f"{len(features)} examples, {per_pass} steps a pass.", "",
             "| batching | s a step, median | mean | pieces read a step | pieces padded a step | padding share "
             "| a pass, estimated (min) |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['batching']} | {r['median_s']} | {r['mean_s']} | {r['pieces_read_per_step']} "
              f"| {r['pieces_padded_per_step']} | {r['padding_share']} | {r['pass_minutes_estimate']} |" for r in rows]
    write_report(args.out, "bench_reader_train", found, lines)


if __name__ == "__main__":
    main()
