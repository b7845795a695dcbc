"""What the reader reads: each passage's share of the word pieces (`allot`) and one example laid out as pieces
(`Features`), made by `drkit.reader.model.Reader.featurize`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np


def allot(costs: Sequence[int], room: int) -> list[int]:
    """Pieces for each passage: all it needs when everything fits; otherwise equal shares of `room`, each
    passage needing less than its share giving the rest to the others (water filling). Sums to at most `room`."""
    out = [0] * len(costs)
    left, order = room, sorted(range(len(costs)), key=lambda i: costs[i])
    for n, i in enumerate(order):
        share = left // (len(costs) - n)
        out[i] = min(costs[i], share)
        left -= out[i]
    return out


@dataclass
class Features:
    """One example as the reader reads it. Per piece: `segment` (-1: not passage text; else the number of the
    title or sentence it is in), `chars` (its character span in that title, or in its passage's text)."""

    ids: list[int]
    segment: np.ndarray  # (L,) int
    chars: np.ndarray  # (L, 2) int
    segments: list[tuple[int, int]]  # segment number -> (passage number, sentence number or TITLE)
    sentence_spans: list[list[tuple[int, int]]]  # per passage, its sentences' character spans in its text
    markers: list[int]  # positions of the sentence markers
    marker_of: list[tuple[int, int]]  # (passage, sentence) of each marker
    start_targets: list[int] = field(default_factory=list)  # training: positions where an answer starts
    end_targets: list[int] = field(default_factory=list)
    support_labels: list[float] = field(default_factory=list)  # per marker
    type_label: int = 0
