"""MetaQA question files: ``text with [topic entity]<TAB>answer1|answer2|...``."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from drkit.data.lines import decode_line, open_binary, read_lines
from drkit.errors import InputFormatError

_TOPIC = re.compile(r"\[([^\[\]]+)\]")
_HOPS_IN_PATH = re.compile(r"(\d)-hop")


@dataclass(frozen=True)
class Question:
    text: str  # with the brackets removed
    topic: str  # the bracketed entity name
    answers: tuple[str, ...]
    line: int


def parse_question_line(line: str, path: str | Path = "<input>", line_no: int = 1) -> Question:
    parts = line.rstrip("\r\n").split("\t")
    if len(parts) != 2:
        raise InputFormatError(path, line_no, f"expected 'question<TAB>answers', found {len(parts) - 1} tabs")
    raw, answers_field = parts
    topics = _TOPIC.findall(raw)
    if len(topics) != 1:
        what = "no [topic entity]" if not topics else f"{len(topics)} bracketed entities"
        raise InputFormatError(path, line_no, f"expected exactly one [topic entity], found {what}", field="question")
    answers = tuple(a.strip() for a in answers_field.split("|") if a.strip())
    if not answers:
        raise InputFormatError(path, line_no, "no answer", field="answers")
    topic = topics[0].strip()
    if not topic:
        raise InputFormatError(path, line_no, "empty [topic entity]", field="question")
    return Question(text=_TOPIC.sub(lambda m: m.group(1), raw).strip(), topic=topic, answers=answers, line=line_no)


def read_questions(path: str | Path) -> Iterator[Question]:
    """Yield the questions of a MetaQA-format file; a malformed line raises `InputFormatError`."""
    for line_no, line in read_lines(path, "question file"):
        if line.strip():
            yield parse_question_line(line, path, line_no)


def hops_from_path(path: str | Path) -> int | None:
    """The hop count named in a MetaQA path such as ``2-hop/vanilla/qa_dev.txt``, or None."""
    found = _HOPS_IN_PATH.findall(str(path))
    return int(found[-1]) if found else None


@dataclass
class QAItem:
    line: int
    text: str = ""  # brackets removed
    topic_name: str = ""
    topic: int = -1
    answers: tuple[str, ...] = ()
    answer_ids: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    problem: str | None = None  # why the line cannot be scored
    problem_kind: str | None = None


def load_questions(path: str | Path, entities) -> list[QAItem]:
    """Every non-blank line of a MetaQA-format file, resolved against the index's `entities`.

    Malformed lines and unknown question entities become items with a `problem`, not exceptions."""
    items = []
    with open_binary(path, "question file") as f:
        for line_no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                q = parse_question_line(decode_line(raw, path, line_no), path, line_no)
            except InputFormatError as exc:
                text = raw.decode("utf-8", errors="replace").strip()
                items.append(QAItem(line_no, text=text, problem=str(exc), problem_kind="malformed_line"))
                continue
            topic = entities.lookup(q.topic)
            answer_ids = np.array(sorted({i for i in map(entities.lookup, q.answers) if i is not None}), dtype=np.int64)
            item = QAItem(line_no, q.text, q.topic, -1 if topic is None else topic, q.answers, answer_ids)
            if topic is None:
                item.problem = f"{path}:{line_no}: the question entity [{q.topic}] is not an entity of the index"
                item.problem_kind = "unknown_question_entity"
            items.append(item)
    return items
