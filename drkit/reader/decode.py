"""The reader's logits for one example read back as a `drkit.reader.reading.Reading` (`drkit.reader.model`'s
module docstring): the answer type, the best span (start + end over pairs in one title or sentence, at most
`max_answer_pieces` long) mapped back to its characters, and the sentences whose supporting probability is
above the threshold."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from drkit.reader.examples import ANSWER_TYPES, SPAN, ReaderExample
from drkit.reader.reading import TITLE, Reading, Span, Supporting

if TYPE_CHECKING:
    from drkit.reader.model import Features


def decode(example: ReaderExample, f: Features, logits: dict, support_threshold: float,
           max_answer_pieces: int) -> Reading:
    """The `Reading` of `example` from its features `f` and its row of the reader's `logits` (type (3,); start,
    end and support (L,))."""
    type_probs = torch.softmax(logits["type"], 0)
    kind = ANSWER_TYPES[int(type_probs.argmax())]
    n = len(f.ids)
    start, end = logits["start"][:n], logits["end"][:n]
    seg = torch.from_numpy(f.segment)
    best = (float("-inf"), -1, -1)
    for d in range(min(max_answer_pieces, n)):
        ok = (seg[: n - d] >= 0) & (seg[: n - d] == seg[d:])
        if not bool(ok.any()):
            continue
        scores = (start[: n - d] + end[d:]).masked_fill(~ok, float("-inf"))
        i = int(scores.argmax())
        if float(scores[i]) > best[0]:
            best = (float(scores[i]), i, i + d)
    span = None
    if best[1] >= 0:
        p, s = f.segments[int(f.segment[best[1]])]
        passage = example.passages[p]
        c0, c1 = int(f.chars[best[1], 0]), int(f.chars[best[2], 1])
        text = passage.title[c0:c1] if s == TITLE else passage.text[c0:c1]
        span = Span(text, p, s, c0, c1, best[0])
    if kind == SPAN:
        answer = span.text if span is not None else ""
    else:
        answer = kind
    probs = torch.sigmoid(logits["support"][f.markers]).tolist() if f.markers else []
    support = tuple(Supporting(p, s, example.passages[p].id, _sentence(example, f, p, s), prob)
                    for (p, s), prob in zip(f.marker_of, probs) if prob > support_threshold)
    return Reading(answer, kind, float(type_probs.max()), span, support,
                   {t: float(x) for t, x in zip(ANSWER_TYPES, type_probs)})


def _sentence(example: ReaderExample, f: Features, p: int, s: int) -> str:
    a, b = f.sentence_spans[p][s]
    return example.passages[p].text[a:b]
