"""Answering questions in batches and scoring the top answers: shared by training (dev Hits@1) and
`drkit.qa.evaluate`."""

from __future__ import annotations

import time

import numpy as np
import torch

from drkit.data.questions import QAItem
from drkit.util.progress import progress


@torch.no_grad()
def answer_batches(model, vkb, texts: list[str], topics: np.ndarray, batch_size: int = 64, top: int = 5,
                   hops: int | None = None, desc: str | None = None):
    """Top-`top` answers (ids, probs) of each question, and the seconds spent answering."""
    ids = np.full((len(texts), top), -1, dtype=np.int64)
    probs = np.zeros((len(texts), top), dtype=np.float32)
    seconds = 0.0
    starts = range(0, len(texts), batch_size)
    for lo in progress(starts, desc=desc, unit="batch") if desc else starts:
        t = time.perf_counter()
        out = model(texts[lo : lo + batch_size], topics[lo : lo + batch_size], vkb, hops=hops)
        i, p = out[-1].z.top(top)
        seconds += time.perf_counter() - t
        ids[lo : lo + len(i)], probs[lo : lo + len(i)] = i, p
    return ids, probs, seconds


def hits(predicted: np.ndarray, items: list[QAItem], k: int) -> np.ndarray:
    """Whether one of the top-k predicted ids of each item is an answer (False for unscorable items)."""
    return np.array([it.problem is None and bool(np.isin(predicted[r, :k], it.answer_ids).any())
                     for r, it in enumerate(items)], dtype=bool)
