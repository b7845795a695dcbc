"""Retrieve, then read (``drkit answer``), and the scoring of a reader's answers.

`answer_questions` asks a `drkit.qa.pipeline.DrKIT` for each question's top-N passages (and its entity
answer: the last hop's best entity the question does not name), has the reader read them, and writes
OUT/predictions.jsonl, one line per question::

    {"id", "question", "answer", "answer_type": "span" | "yes" | "no", "type_prob",
     "supporting": [{"passage_id", "sentence", "text", "prob"}], "passages": [{"id", "title"}],
     "entity_answer", "comparison", "steps", "error"}

("comparison": present when the dates or countries read settled a comparison question, `drkit.reader.compare`;
the transformer then does not run, "type_prob" is null and "supporting" holds the sentences the rules read, each with
"prob" null; "steps": present when a two-hop question was read as two one-hop questions, `drkit.reader.decompose`,
``{"inner", "bridge", "outer"}``; "error": why a question got no passages, e.g. no entity of the index is named in it; it is then not read,
its answer is "" with answer_type null, and it counts as a miss). Only lines with ``answers`` are scored
(``without_answers`` counts the others). With gold answers in the question file, OUT/metrics.json holds answer
EM and F1 (HotpotQA's normalisation, best over a question's answers), overall and by question type, each
with a 95% bootstrap interval; the same for the entity answer; the share of gold passages among those
read (passage recall at N); the share of predicted supporting sentences that lie in a gold passage; R@2 of the
passages read, in the order read and with those holding a supporting sentence first (``passage_R@2``,
`supporting_first`); and the speed: questions/s of the whole pipeline, and the reader's own milliseconds a
question at batch 1 on a sample (``reader_ms_per_question_batch1``, the questions the rules settle included) and a question it reads
(``reader_ms_per_read_batch1``). A question line that cannot be read (not JSON, no id or question, answers not a
list) is written to OUT/bad_lines.txt with its file and line and counted (``bad_lines``); the others are answered.

`read_and_score` is the same reading and scoring for passages given by anything (the gold passages, a
peer's ranking): the experiment's rows (`drkit.experiments.twowiki`) all go through it.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np

from drkit.errors import ConfigError, DrkitError
from drkit.qa.results import held_first, rounded_prob
from drkit.reader.examples import ReaderExample, ReaderPassage, read_questions
from drkit.reader.reading import ReadConfig, read_field
from drkit.reader.text import best_scores
from drkit.util.hardware import precision_field


@dataclass(frozen=True)
class AnswerConfig:
    """Settings of `drkit answer`."""

    passages: int = field(default=5, metadata={"help": "passages retrieved and read per question (N)"})
    batch_size: int = field(default=8, metadata={"help": "questions per batch (retrieval and reading)"})
    support_threshold: float = read_field("support_threshold")
    qps_sample: int = field(default=50, metadata={"help": "questions read one at a time for the reader's ms a "
                                                          "question at batch 1 (0: skip)"})
    max_pieces: int | None = read_field("max_pieces")
    precision: str = precision_field("the reader's transformer")
    compare: bool = read_field("compare")
    skip_bridges: bool = read_field("skip_bridges")
    decompose: bool = read_field("decompose")
    span_checks: bool = read_field("span_checks")
    reader_quantize: str = read_field("reader_quantize")

    def __post_init__(self):
        if self.passages < 1 or self.batch_size < 1 or self.qps_sample < 0:
            raise ConfigError("passages and batch_size must be at least 1, qps_sample at least 0")
        self.reading()  # its checks

    def reading(self) -> ReadConfig:
        return ReadConfig.of(self)


NOTHING = {"answer": "", "answer_type": None, "type_prob": None, "supporting": []}  # a question with no passage


def reading_row(reading, passages=None) -> dict:
    """The JSON of a `drkit.reader.model.Reading` of `passages` (passage numbers replaced by corpus ids); with
    ``"comparison"`` when the dates or countries read settled the answer (`drkit.reader.compare`)."""
    row = {"answer": reading.answer, "answer_type": reading.answer_type, "type_prob": rounded_prob(reading.type_prob),
           "supporting": [{"passage_id": s.passage_id, "sentence": s.sentence, "text": s.text,
                           "prob": rounded_prob(s.prob)} for s in reading.supporting]}
    if reading.comparison is not None:
        row["comparison"] = reading.comparison.to_dict(passages)
    if reading.steps is not None:
        row["steps"] = reading.steps.to_dict()
    return row


def read_and_score(reader, records: Sequence[dict], passages: Sequence[Sequence[ReaderPassage]], out: str | Path,
                   config: AnswerConfig = AnswerConfig(), extra: Sequence[dict] | None = None, log=print,
                   timing: dict | None = None) -> dict:
    """Read `passages[i]` (at most N) for question `records[i]`; write OUT/predictions.jsonl (with `extra[i]`
    merged into each line) and, when the records have answers, OUT/metrics.json. Returns the metrics."""
    from drkit.util.hardware import choose
    from drkit.util.progress import progress

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    read_config = config.reading()
    reader, compute = reader.for_reading(config.reader_quantize, config.precision)  # int8: fp32 on the CPU, as ask reads
    compute = compute or choose(config.precision, "cpu" if reader.device.type == "cpu" else "auto")
    examples = [ReaderExample(r["id"], r["question"], tuple(p[: config.passages])) for r, p in zip(records, passages)]
    readable = [e for e in examples if e.passages]  # a question with no passage is answered with nothing, not read
    found: list = []
    t0 = time.perf_counter()
    chunk = 8 * config.batch_size  # the rules settle some unread: the transformer's batches of each chunk stay full
    for i in progress(range(0, len(readable), chunk), desc="reading"):
        found += reader.read(readable[i : i + chunk], config.batch_size, compute=compute, config=read_config)
    read_s = time.perf_counter() - t0
    readings = iter(found)
    extra = extra or [{}] * len(records)
    rows = []
    with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
        for i, (r, e) in enumerate(zip(records, examples)):
            said = reading_row(next(readings), e.passages) if e.passages else NOTHING
            row = {"id": r["id"], "question": r["question"], **said,
                   "passages": [{"id": p.id, "title": p.title} for p in e.passages], **extra[i]}
            if r.get("answers"):
                row["em"], row["f1"] = best_scores(row["answer"], r["answers"])
            rows.append(row)
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    metrics: dict = {"questions": len(records), "passages_read": config.passages, "read_seconds": round(read_s, 2),
                     "without_passages": len(examples) - len(readable), "compare": config.compare,
                     "compared": sum("comparison" in row for row in rows), "decompose": config.decompose,
                     "decomposed": sum("steps" in row for row in rows)}
    scored = [i for i, r in enumerate(records) if r.get("answers")]
    if scored:
        metrics.update(score([records[i] for i in scored], [rows[i] for i in scored]))
        metrics["without_answers"] = len(records) - len(scored)  # not scored (a question line without "answers")
    if config.qps_sample and readable:
        sample = readable[: config.qps_sample]
        reader.read(sample[:2], 1, compute=compute, config=read_config)  # warm-up
        t = time.perf_counter()
        reader.read(sample, 1, compute=compute, config=read_config)
        metrics["reader_ms_per_question_batch1"] = round(1000 * (time.perf_counter() - t) / len(sample), 1)
        metrics["reader_batch1_sample"] = len(sample)
        # the questions of the sample the transformer reads (the rules settle the others unread), timed alone
        unsettled = [e for e, reading in zip(sample, found) if reading.comparison is None]
        metrics["reader_batch1_sample_settled"] = len(sample) - len(unsettled)
        if 0 < len(unsettled) < len(sample):
            t = time.perf_counter()
            reader.read(unsettled, 1, compute=compute, config=read_config)
            metrics["reader_ms_per_read_batch1"] = round(1000 * (time.perf_counter() - t) / len(unsettled), 1)
        elif unsettled:
            metrics["reader_ms_per_read_batch1"] = metrics["reader_ms_per_question_batch1"]
    metrics["reader"] = {"compute": compute.describe(), "quantize": reader.quantize,
                         "max_pieces": read_config.pieces(reader.config.max_pieces),
                         **{k: reader.manifest.get(k) for k in ("format", "created")}}
    metrics.update(timing or {})
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    if "em" in metrics:
        log(f"{out}: answer EM {metrics['em']:.4f} F1 {metrics['f1']:.4f} over {len(records)} questions")
    return metrics


def score(records: Sequence[dict], rows: Sequence[dict]) -> dict:
    """Answer EM/F1 (overall and by type, with bootstrap intervals), the entity answer's, passage recall of what was
    read, and the share of supporting sentences in gold passages."""
    from drkit.qa.stats import bootstrap_ci

    def block(idx: list[int], key: str = "") -> dict:
        em = np.array([rows[i][f"{key}em"] for i in idx])
        f1 = np.array([rows[i][f"{key}f1"] for i in idx])
        return {"questions": len(idx), "em": round(float(em.mean()), 4), "f1": round(float(f1.mean()), 4),
                "em_ci95": [round(x, 4) for x in bootstrap_ci(em)], "f1_ci95": [round(x, 4) for x in bootstrap_ci(f1)]}

    everyone = list(range(len(rows)))
    types = sorted({str(r.get("type", "")) for r in records} - {""})
    of_type = {t: [i for i in everyone if str(records[i].get("type", "")) == t] for t in types}
    out = {**block(everyone), "by_type": {t: block(idx) for t, idx in of_type.items()}}
    if any("entity_answer" in r for r in rows):
        for r, rec in zip(rows, records):
            r["entity_em"], r["entity_f1"] = best_scores(r.get("entity_answer") or "", rec["answers"])
        out["entity_answer"] = {**block(everyone, "entity_"),
                                "by_type": {t: block(idx, "entity_") for t, idx in of_type.items()}}
    with_gold = [i for i in everyone if records[i].get("supporting")]
    if with_gold:
        from drkit.qa.stats import per_question

        recall = [len({p["id"] for p in rows[i]["passages"]} & {str(s) for s in records[i]["supporting"]})
                  / len(records[i]["supporting"]) for i in with_gold]
        out["passage_recall_read"] = round(float(np.mean(recall)), 4)
        gold = [[str(s) for s in records[i]["supporting"]] for i in with_gold]
        orders = {"as_read": [[p["id"] for p in rows[i]["passages"]] for i in with_gold],
                  "supporting_first": [supporting_first(rows[i]) for i in with_gold]}
        out["passage_R@2"] = {k: round(float(per_question(r, gold, 2).mean()), 4) for k, r in orders.items()}
        sup = [(s["passage_id"] in {str(x) for x in records[i]["supporting"]}) for i in with_gold
               for s in rows[i]["supporting"]]
        out["supporting_in_gold_passages"] = round(float(np.mean(sup)), 4) if sup else None
        out["supporting_per_question"] = round(len(sup) / len(with_gold), 2)
    return out


def supporting_first(row: dict) -> list[str]:
    """The ids of the passages a predictions line of `read_and_score` read (``"passages"``, in the order read), those
    holding one of its supporting sentences first: each group keeps the order read. The reader's evidence orders the
    passages by the question where the retriever's scores do not (a sibling's page above the bridge's: on 2Wiki's
    two folds, drkit's R@2 0.812 -> 0.828, docs/reader.md)."""
    return held_first([p["id"] for p in row["passages"]], {s["passage_id"] for s in row.get("supporting") or ()})


def answer_questions(kit, reader, questions: str | Path, out: str | Path, config: AnswerConfig = AnswerConfig(),
                     log=print) -> dict:
    """``drkit answer`` (module docstring): retrieve with `kit`, read with `reader`, write and score."""
    from drkit.qa.pipeline import answered_alone_on_error
    from drkit.qa.retrieve import write_bad_lines
    from drkit.util.progress import progress

    bad: list[str] = []  # a bad line is written to OUT/bad_lines.txt and counted, as drkit retrieve does
    records = read_questions(questions, bad=bad)
    Path(out).mkdir(parents=True, exist_ok=True)
    write_bad_lines(Path(out), bad, log)
    passages, extra = [], []
    t0 = time.perf_counter()
    for i in progress(range(0, len(records), config.batch_size), desc="retrieving"):
        chunk = [r["question"] for r in records[i : i + config.batch_size]]
        found = answered_alone_on_error(lambda qs: kit.answer_batch(qs, 1, 0, passages=config.passages), chunk)
        for res in found:
            if isinstance(res, DrkitError):
                passages.append([])
                extra.append({"entity_answer": None, "error": str(res)})
                continue
            passages.append([ReaderPassage(p.id, p.title, p.text) for p in res.passages])
            extra.append({"entity_answer": res.answers[0].entity if res.answers else None})
    retrieve_s = time.perf_counter() - t0
    metrics = read_and_score(reader, records, passages, out, config, extra, log,
                             timing={"retrieve_seconds": round(retrieve_s, 2), "errors": sum("error" in e for e in extra)})
    total = retrieve_s + metrics["read_seconds"]
    metrics["questions_per_s"] = round(len(records) / total, 2) if total else None
    metrics["bad_lines"] = len(bad)
    (Path(out) / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    return metrics


def passages_from_predictions(path: str | Path, corpus: dict, k: int) -> dict[str, list[ReaderPassage]]:
    """Question id -> its first `k` passages in a ``drkit retrieve`` predictions.jsonl (ids of `corpus`: id -> passage);
    a passage id not in `corpus` is an `InputFormatError` naming the line."""
    from drkit.data.corpus import iter_json_objects
    from drkit.errors import InputFormatError

    out = {}
    for line_no, row in iter_json_objects(path, "predictions file"):
        ids = [str(p["id"]) for p in row.get("passages", [])[:k]]
        unknown = [i for i in ids if i not in corpus]
        if unknown or "id" not in row:
            raise InputFormatError(path, line_no, f"passage {unknown[0]!r} is not in the corpus" if unknown
                                   else "no question id", field="passages" if unknown else "id")
        out[str(row["id"])] = [corpus[i] for i in ids]
    return out
