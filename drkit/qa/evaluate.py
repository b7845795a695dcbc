"""Answering question files in batches, and scoring them (the ``drkit evaluate`` command).

Every line of a question file is accounted for. A plain question (no [brackets]) gets its question
entity as `drkit ask` finds it (`VirtualKB.parse`). A line that cannot be scored (malformed, its
bracketed entity is not in the index, or a plain question naming none) is kept in the predictions with its reason, counts as a miss
in Hits@k over all lines, and is counted by reason in the metrics; nothing is dropped silently.

Z_0 is found as the model was trained to find it (``question_entity`` in its training settings:
the bracketed entity, or the paper's least frequent linked entity, the brackets ignored) unless
`evaluate` is told otherwise; with "linked", metrics.json counts the lines whose linked entity is
another than the bracketed one and predictions.jsonl records the bracketed name beside it.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from drkit.data.lines import open_binary, read_lines
from drkit.data.questions import QUESTION_ENTITY, load_questions, question_entity_counts
from drkit.errors import ConfigError, InputFormatError
from drkit.qa.pipeline import DrKIT, QueryConfig
from drkit.reason.predict import hits
from drkit.reason.train import question_entity_of
from drkit.reason.vkb import ParsedQuestion
from drkit.util.progress import progress


@dataclass(frozen=True)
class EvaluateConfig:
    """Batching and timing of ``drkit evaluate``."""

    batch_size: int = field(default=64, metadata={"help": "questions per batch"})
    qps_sample: int = field(default=200, metadata={"help": "questions timed again at batch 1 (0: skip)"})
    question_entity: str | None = field(default=None, metadata={
        "help": "bracketed: a question starts from its [bracketed] entity; linked: from the least frequent entity "
                "its text names, brackets ignored (the paper, Appendix A)", "choices": QUESTION_ENTITY,
        "default_help": "as the model was trained"})

    def __post_init__(self):
        if self.batch_size < 1 or self.qps_sample < 0:
            raise ConfigError(f"batch_size must be at least 1 and qps_sample at least 0, got {self.batch_size} "
                              f"and {self.qps_sample}")


def read_qtypes(path: str | Path, question_path: str | Path) -> dict[int, str]:
    """Question type of each line number of the aligned question file."""
    types = [line.strip() for _, line in read_lines(path, "question type file")]
    with open_binary(question_path, "question file") as f:
        n_lines = sum(1 for _ in f)
    while types and not types[-1]:
        types.pop()
    if len(types) != n_lines:
        raise InputFormatError(path, None, f"{len(types)} question types for the {n_lines} lines of {question_path}")
    return {i + 1: t for i, t in enumerate(types)}


def evaluate(kit: DrKIT, questions: str | Path, out: str | Path | None = None, qtypes: str | Path | None = None,
             batch_size: int = 64, qps_sample: int = 200, query: QueryConfig = QueryConfig(), log=print,
             question_entity: str | None = None) -> dict:
    """Hits@1/5 of `kit` on a MetaQA-format file; writes metrics.json and predictions.jsonl to `out`.

    `question_entity`: "bracketed" or "linked" (see `drkit.data.questions`); None: as the model was trained."""
    if kit.retriever is not None:
        raise ConfigError("drkit evaluate scores a multi-hop model (drkit train) on MetaQA-format questions; a "
                          "hop-mixing model is scored by 'drkit retrieve' (R@k, and Hits@1 of its answers with --answers)")
    model, vkb = kit.model, kit.vkb
    mode = question_entity or question_entity_of(model.manifest)
    if mode not in QUESTION_ENTITY:
        raise ConfigError(f"question_entity must be one of {QUESTION_ENTITY}, got {mode!r}")
    items = load_questions(questions, vkb.index.entities, vkb.parse, mode)
    if not items:
        raise ConfigError(f"{questions} holds no question")
    types = read_qtypes(qtypes, questions) if qtypes else None
    ok = [r for r, it in enumerate(items) if it.problem is None]
    parsed = [ParsedQuestion(items[r].text, items[r].topic, items[r].topic_name, items[r].how) for r in ok]
    pred_ids = np.full((len(items), 5), -1, dtype=np.int64)
    pred_probs = np.zeros((len(items), 5), dtype=np.float32)
    ids, probs, seconds = _answer_ids(kit, parsed, batch_size, query, desc="evaluate")
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
        "question_entity": {**question_entity_counts(items, mode),
                            "from": "asked" if question_entity else "the model's training"},
        "hops": query.hops or model.config.hops,
        "follow": dataclasses.asdict(query.follow_config(model.follow_config)),
        "throughput": {f"batch_{batch_size}_questions_per_s": round(len(ok) / seconds, 2) if seconds else None},
    }
    if qps_sample and ok:
        sample = min(qps_sample, len(ok))
        _, _, s1 = _answer_ids(kit, parsed[:sample], 1, query)
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
    if mode == "linked":
        c = metrics["question_entity"]
        log(f"question entities linked (the brackets ignored): {c['linked_differs']:,} of {c['bracketed_lines']:,} "
            f"bracketed lines link another entity, {c['not_linked']:,} link none")
    log(f"{questions}: Hits@1 {metrics['hits@1']:.4f}  Hits@5 {metrics['hits@5']:.4f}  over {n:,} lines "
        f"({len(ok):,} scored); {metrics['throughput']}")
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        names = vkb.entity_names
        with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
            for r, it in enumerate(items):
                rec = {"line": it.line, "question": it.text, "question_entity": it.topic_name, "found_by": it.how,
                       "answers": list(it.answers)}
                if it.bracketed is not None:
                    rec.update(bracketed_entity=it.bracketed, linked_differs=it.linked_differs)
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


def _answer_ids(kit: DrKIT, parsed: list[ParsedQuestion], batch_size: int, query: QueryConfig, top: int = 5,
                desc: str | None = None) -> tuple[np.ndarray, np.ndarray, float]:
    """(N, top) answer ids (-1 padded) and probabilities through `DrKIT.answer_batch`, and the seconds it took."""
    ids = np.full((len(parsed), top), -1, dtype=np.int64)
    probs = np.zeros((len(parsed), top), dtype=np.float32)
    seconds = 0.0
    starts = range(0, len(parsed), batch_size)
    for lo in progress(starts, desc=desc, unit="batch") if desc else starts:
        t = time.perf_counter()
        results = kit.answer_batch(parsed[lo : lo + batch_size], top=top, chain_top=0, query=query)
        seconds += time.perf_counter() - t
        for r, res in enumerate(results, lo):
            ids[r, : len(res.answers)] = [a.entity_id for a in res.answers]
            probs[r, : len(res.answers)] = [a.prob for a in res.answers]
    return ids, probs, seconds
