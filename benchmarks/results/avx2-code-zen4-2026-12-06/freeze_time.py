"""Time the reader's training step (forward, backward, AdamW update) with its lower parts frozen, side by side on
the same bucketed batches of the first pass (a fresh reader per variant, taking turns). Timing only: no accuracy."""
import json
import statistics
import sys
import time
from pathlib import Path

import torch

from drkit.reader.examples import OrderConfig, epoch_examples
from drkit.reader.model import Reader, ReaderConfig
from drkit.reader.train import ReaderTrainConfig, training_sources
from drkit.util.hardware import configure_threads
from drkit.util.sampling import bucketed_step_rows

run, out, steps = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
configure_threads(0)
config, order = ReaderTrainConfig(), OrderConfig()
_, _, sources, _, alone = training_sources("../shared/data/2wiki/corpus.jsonl", run / "split" / "train.jsonl",
                                           run / "kb-train.txt", order, config)
variants = {"all trained (default)": 0, "word embeddings frozen": -1, "embeddings + layers 0-1 frozen": 2,
            "embeddings + layers 0-2 frozen": 3}
readers, opts = {}, {}
for name, n in variants.items():
    r = Reader.from_base(ReaderConfig(), config.seed); r.train()
    if n != 0:
        for p in r.transformer.embeddings.parameters():
            p.requires_grad_(False)
        for layer in r.transformer.encoder.layer[:max(n, 0)]:
            for p in layer.parameters():
                p.requires_grad_(False)
    readers[name] = r
    opts[name] = torch.optim.AdamW([p for p in r.parameters() if p.requires_grad], lr=1e-4, fused=True)
first = next(iter(readers.values()))
features = [first.featurize(e, labels=True) for e in epoch_examples(sources, order, config.seed, 0, alone)]
lengths = [len(f.ids) for f in features]
secs = {k: [] for k in variants}
for step in range(steps):
    batch = [features[i] for i in bucketed_step_rows(lengths, config.batch_size, step, config.seed, config.bucket)]
    names = list(variants) if step % 2 == 0 else list(variants)[::-1]
    for name in names:
        r, opt = readers[name], opts[name]
        t = time.perf_counter()
        loss, _ = r.loss(r(**r.batch(batch)), batch)
        loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
        secs[name].append(time.perf_counter() - t)
    print(step, {k: round(v[-1], 2) for k, v in secs.items()}, flush=True)
rows = {k: {"median_s": round(statistics.median(v), 3), "mean_s": round(statistics.mean(v), 3),
            "trainable": sum(p.numel() for p in readers[k].parameters() if p.requires_grad)} for k, v in secs.items()}
out.mkdir(parents=True, exist_ok=True)
(out / "freeze_time.json").write_text(json.dumps({"run": str(run), "steps": steps, "rows": rows,
                                                  "capability": torch.backends.cpu.get_cpu_capability()}, indent=2) + "\n")
print(json.dumps(rows, indent=1))
