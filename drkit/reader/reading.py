"""What the reader returns for one example: its answer, the span it was read from and the supporting sentences."""

from __future__ import annotations

from dataclasses import dataclass

TITLE = -1  # the sentence number of a passage's title


@dataclass(frozen=True)
class Span:
    text: str
    passage: int  # its passage's number in the example
    sentence: int  # its sentence's number in the passage (`TITLE`: in the title)
    start: int  # character offsets in the title or in the passage text
    end: int
    score: float  # start + end logit


@dataclass(frozen=True)
class Supporting:
    passage: int  # the passage's number in the example
    sentence: int  # the sentence's number in the passage
    passage_id: str
    text: str
    prob: float | None  # None: a sentence the comparison rules read (`drkit.reader.compare.settled_reading`)


@dataclass(frozen=True)
class Reading:
    """What the reader read from one example."""

    answer: str  # the span's text, "yes" / "no", or what a comparison of dates or countries chose
    answer_type: str  # span | yes | no
    type_prob: float | None  # the reader's probability of its own type; None when a comparison answered unread
    span: Span | None  # the best span (also when the type is yes or no; None when a comparison answered)
    supporting: tuple[Supporting, ...]  # when a comparison answered: the sentences it read
    type_probs: dict  # {} when a comparison answered
    comparison: object = None  # a `drkit.reader.compare.Comparison` when the dates or countries read settled it
