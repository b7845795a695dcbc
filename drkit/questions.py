"""MetaQA question files: ``text with [topic entity]<TAB>answer1|answer2|...``."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import InputFormatError

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
    with open(path, encoding="utf-8") as f:
        for line_no, raw in enumerate(f, 1):
            if raw.strip():
                yield parse_question_line(raw, path, line_no)


def hops_from_path(path: str | Path) -> int | None:
    """The hop count named in a MetaQA path such as ``2-hop/vanilla/qa_dev.txt``, or None."""
    found = _HOPS_IN_PATH.findall(str(path))
    return int(found[-1]) if found else None
