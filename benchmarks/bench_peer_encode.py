#!/usr/bin/env python
"""The dense peer's and the single-step control's passage encoding, side by side in one process: batches of
`--batch-size` texts sorted by characters and padded to their longest (how `DenseRetriever` encoded passages until
2026-12-06), against `DenseRetriever`'s batches of one length each (no padding, at most `--batch-tokens` word
pieces). The two take turns, each `--repeats` times over the same texts (an index's articles, as
``reproduce-2wiki`` gives them, or the first `--passages` of them); reports seconds, passages/s, the padded word
pieces each computes, and how far the two sets of vectors are apart (largest absolute difference; both
L2-normalised).

    python benchmarks/bench_peer_encode.py --index runs/2wiki/index --encoder runs/2wiki/pretrain-kb_qa \\
        --out benchmarks/results/peer-encode.json

Writes JSON (default benchmarks/results/peer-encode.json).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from pathlib import Path

import numpy as np
import torch

from drkit.dense.embedding import length_batches
from drkit.qa.peers import DenseRetriever, article_texts
from drkit.util.hardware import choose, configure_threads


def padded(retriever: DenseRetriever, texts: list[str], batch_size: int) -> np.ndarray:
    """The former encoding: texts sorted by characters, `batch_size` a batch, each padded to its longest."""
    order = np.argsort([len(t) for t in texts], kind="stable")
    vectors = np.zeros((len(texts), retriever.model.config.hidden_size), dtype=np.float32)
    for s in range(0, len(texts), batch_size):
        idx = order[s:s + batch_size]
        vectors[idx] = retriever.embed([texts[i] for i in idx])
    return vectors


def one_length(retriever: DenseRetriever, texts: list[str], batch_tokens: int) -> np.ndarray:
    """`DenseRetriever.__init__`'s encoding (the same calls): batches of one length each, none padded."""
    ids = retriever.tokenizer(list(texts), truncation=True, max_length=retriever.max_pieces)["input_ids"]
    vectors = np.zeros((len(texts), retriever.model.config.hidden_size), dtype=np.float32)
    for batch in length_batches(np.array([len(i) - 2 for i in ids], dtype=np.int64), batch_tokens):
        pieces = torch.tensor([ids[i] for i in batch], dtype=torch.long)
        vectors[batch] = retriever._vectors(pieces, torch.ones_like(pieces))
    return vectors


def pieces_computed(retriever: DenseRetriever, texts: list[str], batch_size: int) -> dict:
    lengths = np.array([len(i) for i in retriever.tokenizer(list(texts), truncation=True,
                                                            max_length=retriever.max_pieces)["input_ids"]])
    order = np.argsort([len(t) for t in texts], kind="stable")
    pad = sum(int(lengths[order[s:s + batch_size]].max()) * len(order[s:s + batch_size])
              for s in range(0, len(texts), batch_size))
    return {"real": int(lengths.sum()), "padded_batches": int(pad)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--index", type=Path, required=True, help="a sparse index of a title-entity corpus")
    ap.add_argument("--encoder", type=Path, default=None,
                    help="a drkit pretrain run: also time the single-step control's encoder (its query transformer)")
    ap.add_argument("--passages", type=int, default=0, help="only the first N articles (0: all)")
    ap.add_argument("--batch-size", type=int, default=32, help="texts a padded batch (the former encoding's)")
    ap.add_argument("--batch-tokens", type=int, default=8192, help="word pieces a one-length batch")
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--precision", default="auto")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/peer-encode.json"))
    args = ap.parse_args()
    configure_threads(0)
    from drkit.index.sparse import SparseIndex

    texts = article_texts(SparseIndex.load(args.index))
    texts = texts[:args.passages] if args.passages else texts
    encoders = {"dense MiniLM": DenseRetriever([], precision=args.precision)}
    if args.encoder is not None:
        from drkit.dense.encoder import DualEncoder
        from drkit.qa.controls import SingleStepRetriever

        dual = DualEncoder.load(args.encoder / "encoder" if (args.encoder / "encoder").exists() else args.encoder)
        encoders["single-step control"] = SingleStepRetriever([], precision=args.precision, model=dual.query_model,
                                                              tokenizer=dual.tokenizer)
    report = {"machine": {"platform": platform.platform(), "processor": platform.processor(),
                          "cpu_capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
                          "env": {k: os.environ.get(k) for k in ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS",
                                                                 "ONEDNN_MAX_CPU_ISA")},
                          "compute": choose(args.precision, "auto").reason},
              "texts": len(texts), "batch_size": args.batch_size, "batch_tokens": args.batch_tokens, "encoders": {}}
    for name, r in encoders.items():
        times = {"padded": [], "one_length": []}
        for _ in range(args.repeats):
            for kind, fn, arg in (("padded", padded, args.batch_size), ("one_length", one_length, args.batch_tokens)):
                t = time.perf_counter()
                v = fn(r, texts, arg)
                times[kind].append(round(time.perf_counter() - t, 2))
                if kind == "padded":
                    a = v
                else:
                    b = v
        row = {"seconds": times, "pieces": pieces_computed(r, texts, args.batch_size),
               "passages_per_s": {k: round(len(texts) / min(v), 1) for k, v in times.items()},
               "speedup": round(min(times["padded"]) / min(times["one_length"]), 3),
               "max_abs_difference": float(np.abs(a - b).max())}
        report["encoders"][name] = row
        print(name, json.dumps(row), flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
