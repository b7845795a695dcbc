"""Answering question files in batches, and scoring them (the ``drkit evaluate`` command).

Every line of a question file is accounted for. A line that cannot be scored (malformed, or its
bracketed entity is not in the index) is kept in the predictions with its reason, counts as a miss
in Hits@k over all lines, and is counted by reason in the metrics; nothing is dropped silently.
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from .errors import ConfigError, InputFormatError
from .progress import progress
from .questions import parse_question_line


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
    try:
        f = open(path, encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read the question file {path}: {exc.strerror}") from exc
    with f:
        for line_no, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                q = parse_question_line(raw, path, line_no)
            except InputFormatError as exc:
                items.append(QAItem(line_no, text=raw.strip(), problem=str(exc), problem_kind="malformed_line"))
                continue
            topic = entities.lookup(q.topic)
            answer_ids = np.array(sorted({i for i in map(entities.lookup, q.answers) if i is not None}), dtype=np.int64)
            item = QAItem(line_no, q.text, q.topic, -1 if topic is None else topic, q.answers, answer_ids)
            if topic is None:
                item.problem = f"{path}:{line_no}: the question entity [{q.topic}] is not an entity of the index"
                item.problem_kind = "unknown_question_entity"
            items.append(item)
    return items


def read_qtypes(path: str | Path, question_path: str | Path) -> dict[int, str]:
    """Question type of each line number of the aligned question file."""
    with open(path, encoding="utf-8") as f:
        types = [line.strip() for line in f]
    with open(question_path, encoding="utf-8") as f:
        n_lines = sum(1 for _ in f)
    while types and not types[-1]:
        types.pop()
    if len(types) != n_lines:
        raise InputFormatError(path, None, f"{len(types)} question types for the {n_lines} lines of {question_path}")
    return {i + 1: t for i, t in enumerate(types)}


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


def evaluate(model, vkb, questions: str | Path, out: str | Path | None = None, qtypes: str | Path | None = None,
             batch_size: int = 64, qps_sample: int = 200, hops: int | None = None, log=print) -> dict:
    """Hits@1/5 of `model` on a MetaQA-format file; writes metrics.json and predictions.jsonl to `out`."""
    items = load_questions(questions, vkb.index.entities)
    if not items:
        raise ConfigError(f"{questions} holds no question")
    types = read_qtypes(qtypes, questions) if qtypes else None
    ok = [r for r, it in enumerate(items) if it.problem is None]
    texts = [items[r].text for r in ok]
    topics = np.array([items[r].topic for r in ok], dtype=np.int64)
    pred_ids = np.full((len(items), 5), -1, dtype=np.int64)
    pred_probs = np.zeros((len(items), 5), dtype=np.float32)
    ids, probs, seconds = answer_batches(model, vkb, texts, topics, batch_size, hops=hops, desc="evaluate")
    pred_ids[ok], pred_probs[ok] = ids, probs
    h1, h5 = hits(pred_ids, items, 1), hits(pred_ids, items, 5)
    problems = Counter(it.problem_kind for it in items if it.problem)
    n = len(items)
    metrics = {
        "questions_file": str(questions),
        "lines": n,
        "scored": len(ok),
        "not_scored": dict(problems),
        "hits@1": float(h1.mean()),
        "hits@5": float(h5.mean()),
        "hits@1_scored": float(h1[ok].mean()) if ok else 0.0,
        "answers_not_entities": int(sum(len(it.answers) - len(it.answer_ids) for it in items if it.problem is None)),
        "no_answer_is_an_entity": int(sum(1 for it in items if it.problem is None and len(it.answer_ids) == 0)),
        "hops": hops or model.config.hops,
        "follow": {k: v for k, v in vars(model.follow_config).items()},
        "throughput": {f"batch_{batch_size}_questions_per_s": round(len(ok) / seconds, 2) if seconds else None},
    }
    if qps_sample and ok:
        sample = min(qps_sample, len(ok))
        _, _, s1 = answer_batches(model, vkb, texts[:sample], topics[:sample], 1, hops=hops)
        metrics["throughput"]["batch_1_questions_per_s"] = round(sample / s1, 2)
        metrics["throughput"]["batch_1_sample"] = sample
    if types is not None:
        by_type: dict[str, list] = {}
        for r, it in enumerate(items):
            by_type.setdefault(types.get(it.line, "?"), []).append(r)
        metrics["by_qtype"] = {t: {"questions": len(rs), "hits@1": float(h1[rs].mean()), "hits@5": float(h5[rs].mean())}
                               for t, rs in sorted(by_type.items())}
    for kind, count in problems.items():
        example = next(it.problem for it in items if it.problem_kind == kind)
        log(f"not scored: {count} line(s), {kind}, e.g. {example}")
    log(f"{questions}: Hits@1 {metrics['hits@1']:.4f}  Hits@5 {metrics['hits@5']:.4f}  over {n:,} lines "
        f"({len(ok):,} scored); {metrics['throughput']}")
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        names = vkb.entity_names
        with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
            for r, it in enumerate(items):
                rec = {"line": it.line, "question": it.text, "question_entity": it.topic_name, "answers": list(it.answers)}
                if it.problem:
                    rec["not_scored"] = it.problem
                else:
                    rec["predictions"] = [{"entity": names[e], "prob": round(float(p), 5)}
                                          for e, p in zip(pred_ids[r], pred_probs[r]) if e >= 0]
                    rec["hit@1"], rec["hit@5"] = bool(h1[r]), bool(h5[r])
                if types is not None:
                    rec["qtype"] = types.get(it.line)
                f.write(json.dumps(rec, ensure_ascii=False) + "\n")
        (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics
