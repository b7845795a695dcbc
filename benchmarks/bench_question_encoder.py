"""The price of batch-independent question vectors.

At question time `MultiHopModel.forward` pads each question to its own length rounded up to
`PAD_MULTIPLE` pieces and encodes the questions of one width together (`length_groups`), instead of
padding the whole batch to its longest question: in bf16, the padded width changes the roundings of
attention, so a question's vectors (and so its answers) changed with its batch. This script measures,
side by side in one run, on the MiniLM question encoder (4 shared + 2 x T hop layers) and real
questions:

* how many question vectors differ between "alone" and "in a batch" for each scheme, and
* the time to encode a batch of 64 and 64 batches of one, for each scheme.

    .venv/bin/python benchmarks/bench_question_encoder.py   # writes benchmarks/results/bench_question_encoder.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch

from drkit.dense.encoder import DualEncoder
from drkit.reason.model import ModelConfig, MultiHopModel, length_groups


def queries(model: MultiHopModel, texts: list[str], grouped: bool) -> torch.Tensor:
    """(B, hops * p) hop queries of `texts` (no entity conditioning), padded to the batch or grouped."""
    ids, mask = model.tokenize(texts)
    groups, widths = length_groups(mask) if grouped else ([torch.arange(len(texts))], [mask.shape[1]])
    parts = []
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        for g, w in zip(groups, widths):
            h = model.encoder.encode(ids[g, :w], mask[g, :w])
            parts.append(torch.cat([model.encoder.hop_query(h, mask[g, :w], t, None)
                                    for t in range(model.config.hops)], 1).float())
    return torch.cat(parts)[torch.argsort(torch.cat(groups))]


def timed(fn, repeats: int) -> dict:
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return {"median_ms": round(statistics.median(times) * 1000, 2), "min_ms": round(min(times) * 1000, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--questions", default="data/sample/2-hop/qa_dev.txt", help="MetaQA-format file (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=64, help="batch size (default: %(default)s)")
    ap.add_argument("--hops", type=int, default=2, help="hop layers to run (default: %(default)s)")
    ap.add_argument("--repeats", type=int, default=10, help="timed repeats (default: %(default)s)")
    ap.add_argument("--out", default="benchmarks/results/bench_question_encoder.json")
    args = ap.parse_args()

    torch.manual_seed(0)
    model = MultiHopModel.from_encoder(DualEncoder.from_base(), ModelConfig(hops=args.hops)).eval()
    with open(args.questions, encoding="utf-8") as f:
        texts = [line.split("\t")[0].replace("[", "").replace("]", "") for line in f if line.strip()][: args.batch]
    _, mask = model.tokenize(texts)
    result = {"machine": {"cpus": os.cpu_count(), "torch_threads": torch.get_num_threads(),
                          "processor": platform.processor(), "python": platform.python_version()},
              "questions": args.questions, "batch": len(texts), "hops": args.hops,
              "question_pieces": {"min": int(mask.sum(1).min()), "max": int(mask.sum(1).max())},
              "schemes": {}}
    for name, grouped in (("padded_to_batch", False), ("grouped_by_width", True)):
        together = queries(model, texts, grouped)
        alone = torch.cat([queries(model, [t], grouped) for t in texts])
        differ = int(((together - alone).abs().max(1).values > 0).sum())
        result["schemes"][name] = {
            "vectors_differing_alone_vs_batch": differ,
            "max_abs_difference": float((together - alone).abs().max()),
            f"batch_{len(texts)}": timed(lambda: queries(model, texts, grouped), args.repeats),
            f"{len(texts)}_batches_of_1": timed(lambda: [queries(model, [t], grouped) for t in texts],
                                                max(1, args.repeats // 5)),
        }
        print(name, json.dumps(result["schemes"][name]), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
