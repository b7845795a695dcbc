"""MetaQA question files: ``question<TAB>answer1|answer2|...``, one question per line.

The question entity may be marked in brackets, ``who directed [Kismet]`` (MetaQA marks every one);
`split_topic` is the one place that reads the mark. A question without brackets is a plain question:
its entity is found by the caller's linker (`drkit.reason.vkb.VirtualKB.parse`: exact name match, the
least frequent entity). More than one bracketed name, or an empty one, is an error.

Which entity is Z_0 (``question_entity``): ``bracketed`` (default) takes the marked name; ``linked``
is the paper's way (Appendix A: "the least frequent entity detected in the question using an exact
match"): the brackets are ignored and every question is linked as a plain one. Either way the
encoder reads the question without its brackets; `question_entity_counts` counts the lines whose
linked entity is another than the bracketed one.

Files are UTF-8 (`drkit.data.lines`); lines of only whitespace are skipped, they are no question.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

import numpy as np

from drkit.data.lines import decode_line, open_binary, read_lines
from drkit.errors import ConfigError, InputFormatError, QuestionError

_TOPIC = re.compile(r"\[([^\[\]]*)\]")
_HOPS_IN_PATH = re.compile(r"(\d)-hop")
QUESTION_ENTITY = ("bracketed", "linked")


def split_topic(question: str) -> tuple[str, str | None]:
    """``(the question without its brackets, the bracketed name or None)``; both stripped.

    A bracketed name is ``[`` + text without brackets + ``]``; a bracket that pairs with none is text.
    `QuestionError` when more than one name is bracketed or the bracketed one is blank."""
    names = _TOPIC.findall(question)
    if len(names) > 1:
        raise QuestionError(f"{len(names)} bracketed entities; mark at most one: {question.strip()!r}")
    if names and not names[0].strip():
        raise QuestionError(f"empty [topic entity]: {question.strip()!r}")
    if not names:
        return question.strip(), None
    return _TOPIC.sub(lambda m: m.group(1), question).strip(), names[0].strip()


@dataclass(frozen=True)
class Question:
    text: str  # with the brackets removed
    topic: str | None  # the bracketed entity name; None for a plain question
    answers: tuple[str, ...]
    line: int


def parse_question_line(line: str, path: str | Path = "<input>", line_no: int = 1) -> Question:
    """One line of a question file; `InputFormatError` naming file, line and field when it is malformed."""
    parts = line.rstrip("\r\n").split("\t")
    if len(parts) != 2:
        raise InputFormatError(path, line_no, f"expected 'question<TAB>answers', found {len(parts) - 1} tabs")
    raw, answers_field = parts
    try:
        text, topic = split_topic(raw)
    except QuestionError as exc:
        raise InputFormatError(path, line_no, str(exc), field="question") from None
    if not text:
        raise InputFormatError(path, line_no, "empty question", field="question")
    answers = tuple(a.strip() for a in answers_field.split("|") if a.strip())
    if not answers:
        raise InputFormatError(path, line_no, "no answer", field="answers")
    return Question(text=text, topic=topic, answers=answers, line=line_no)


def read_questions(path: str | Path) -> Iterator[Question]:
    """Yield the questions of a MetaQA-format file, blank lines skipped; a malformed line raises
    `InputFormatError` naming the file, line and field."""
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
    how: str = ""  # how the question entity was found: "bracketed", or the linker's account
    bracketed: str | None = None  # with question_entity "linked": the name the line brackets (None: none)
    bracketed_id: int = -1  # ... and its entity id (-1: not an entity of the index)

    @property
    def linked_differs(self) -> bool:
        """Whether the entity linked in place of the bracketed one is another (a bracketed line, linked)."""
        return self.bracketed is not None and self.problem is None and self.topic != self.bracketed_id


def load_questions(path: str | Path, entities, parse: Callable | None = None,
                   question_entity: str = "bracketed") -> list[QAItem]:
    """Every non-blank line of a question file, resolved against the index's `entities`.

    A plain question (no brackets) is given to `parse` (`VirtualKB.parse`), which returns an object with
    ``text``, ``topic`` (entity id), ``topic_name`` and ``how``, or raises `QuestionError`. With
    `question_entity` "linked" so is a bracketed one: `parse` gets its text without the brackets (a
    bracket left in it, which marked nothing, reads as a space) and the bracketed name is kept in
    ``bracketed`` / ``bracketed_id``. Malformed lines, unknown bracketed entities and questions whose
    entity cannot be found (or that have no `parse`) become items with a `problem` and a `problem_kind`,
    never exceptions and never dropped."""
    if question_entity not in QUESTION_ENTITY:
        raise ConfigError(f"question_entity must be one of {QUESTION_ENTITY}, got {question_entity!r}")
    linked = question_entity == "linked"
    items = []
    with open_binary(path, "question file") as f:
        for line_no, raw in enumerate(f, 1):
            try:
                line = decode_line(raw, path, line_no)
                if not line.strip():
                    continue  # blank lines are not questions
                q = parse_question_line(line, path, line_no)
            except InputFormatError as exc:
                text = raw.decode("utf-8", errors="replace").strip()
                items.append(QAItem(line_no, text=text, problem=str(exc), problem_kind="malformed_line"))
                continue
            answer_ids = np.array(sorted({i for i in map(entities.lookup, q.answers) if i is not None}), dtype=np.int64)
            item = QAItem(line_no, q.text, answers=q.answers, answer_ids=answer_ids)
            if q.topic is not None and not linked:
                topic = entities.lookup(q.topic)
                item.topic_name, item.how = q.topic, "bracketed"
                if topic is None:
                    item.problem = f"{path}:{line_no}: the question entity [{q.topic}] is not an entity of the index"
                    item.problem_kind = "unknown_question_entity"
                else:
                    item.topic = topic
            elif parse is None:
                what = "no linker" if q.topic is not None else "no [question entity] and no linker"
                item.problem = f"{path}:{line_no}: {what} to find one in {q.text!r}"
                item.problem_kind = "unlinked_question_entity"
            else:
                if q.topic is not None:
                    topic = entities.lookup(q.topic)
                    item.bracketed, item.bracketed_id = q.topic, -1 if topic is None else int(topic)
                try:
                    parsed = parse(q.text.replace("[", " ").replace("]", " ") if q.topic is not None else q.text)
                except QuestionError as exc:
                    item.problem, item.problem_kind = f"{path}:{line_no}: {exc}", "unlinked_question_entity"
                else:
                    item.topic, item.topic_name, item.how = int(parsed.topic), parsed.topic_name, parsed.how
                    if q.topic is None:
                        item.text = parsed.text
            items.append(item)
    return items


def question_entity_counts(items: list[QAItem], question_entity: str) -> dict:
    """How Z_0 was found: the mode, and with "linked" how many lines bracket an entity, how many of those
    link another one than the bracketed, and how many link none."""
    out: dict = {"mode": question_entity}
    if question_entity == "linked":
        marked = [it for it in items if it.bracketed is not None]
        out.update(bracketed_lines=len(marked), linked_differs=sum(it.linked_differs for it in marked),
                   not_linked=sum(it.problem is not None for it in marked))
    return out
