"""The reader's transformer in torch against ONNX Runtime, one forward at batch 1 (README.md here).

Needs ``onnxruntime`` and ``onnx`` (not drkit's dependencies) and fold 0's reader in runs/2wiki-f0-zen3.

    .venv/bin/python benchmarks/results/onnx-reader-zen3-2026-12-03/ort_check.py 480
"""

import os
import sys
import time

import numpy as np
import onnxruntime as ort
import torch

from drkit.reader.model import Reader

READER = "runs/2wiki-f0-zen3/train-reader/reader"
EXPORTED = "/tmp/reader.onnx"


class LastHidden(torch.nn.Module):
    def __init__(self, transformer):
        super().__init__()
        self.transformer = transformer

    def forward(self, ids, mask):
        return self.transformer(input_ids=ids, attention_mask=mask).last_hidden_state


def median_s(f, n: int = 10) -> float:
    f()
    f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return sorted(times)[n // 2]


def main() -> None:
    torch.set_num_threads(2)
    pieces = int(sys.argv[1]) if len(sys.argv) > 1 else 480
    transformer = Reader.load(READER).transformer.eval()
    ids = torch.randint(1000, 20000, (1, pieces))
    mask = torch.ones(1, pieces, dtype=torch.long)
    with torch.inference_mode():
        t_torch = median_s(lambda: transformer(input_ids=ids, attention_mask=mask).last_hidden_state)
        ref = transformer(input_ids=ids, attention_mask=mask).last_hidden_state.numpy()
    print("torch", t_torch * 1000, "ms")
    if not os.path.exists(EXPORTED):
        torch.onnx.export(LastHidden(transformer), (ids, mask), EXPORTED, input_names=["ids", "mask"], output_names=["h"],
                          dynamic_axes={"ids": {0: "b", 1: "l"}, "mask": {0: "b", 1: "l"}, "h": {0: "b", 1: "l"}},
                          opset_version=17, dynamo=False)
    options = ort.SessionOptions()
    options.intra_op_num_threads, options.inter_op_num_threads = 2, 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(EXPORTED, options, providers=["CPUExecutionProvider"])
    feed = {"ids": ids.numpy(), "mask": mask.numpy()}
    t_ort = median_s(lambda: session.run(None, feed))
    print("ort", t_ort * 1000, "ms", "maxdiff", np.abs(session.run(None, feed)[0] - ref).max())


if __name__ == "__main__":
    main()
