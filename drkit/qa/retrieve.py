"""Multi-hop passage retrieval over a title-entity corpus (the paper, 3.3) and its scoring.

`drkit retrieve` reads questions as JSONL lines ``{"id", "question"}`` (other fields are ignored, except
``supporting``: the gold corpus ids, used for scoring when present, and ``type``, used to break the
scores down), asks a `Retriever` for the best passages of each, and writes:

* ``predictions.jsonl``: one ``{"id", "passages": [{"id": <corpus id>, "title", "score", "reached",
  "entity", "hop"}, ...], "pi", "chain", "answer"}`` per question, best passage first; ``reached`` is false
  for a passage the model did not reach (the question linker's ranking, listed after the reached ones),
  ``entity`` is the title entity that placed it and ``hop`` the hop that gave it most of its score;
* ``run.trec``: the ranking as a TREC run file (``qid Q0 docid rank score name``; the score column is
  ``n - rank + 1``, so that trec_eval and ir_measures read the ranking as written), and, with gold,
  ``qrels.trec``: the supporting passages as TREC qrels (``qid 0 docid 1``);
* ``metrics.json`` (when gold or answers are given): R@k (the mean over questions of the share of their supporting
  passages in the top k, HippoRAG's "passage recall") and AR@k (the share of questions with every
  supporting passage in the top k, the DrKIT paper's HotpotQA "accuracy@k") for each k up to ``top``,
  overall and per question type, with questions/s of passage retrieval alone at batch 1 and at the batch size
  (with ``--answers`` also ``..._with_answers``: the entity answer is a second pass of the follows), and ``unreached``:
  per k, the mean number of unreached passages in the top k (they count in R@k as any other), with
  ``--answers`` the Hits@1 of the entity answers by type (``answers``) and overall (``answers_overall``), and
  ``ir_measures``: R@k, nDCG@10 and MRR (``RR``) of the same rankings computed by ir_measures
  (pytrec_eval), which a test checks against drkit's own R@k;
* ``bad_lines.txt``: every line that could not be read, with file, line and reason (counted in
  metrics.json; a bad line never stops the run and is never silently dropped). A file with no good line at all is
  an error. A gold id that is not a corpus id of the index (mistyped, or its passage left out) is said in the log
  and counted in metrics.json (``gold_not_in_corpus``): that gold passage counts as a miss.

A `Retriever` is anything with ``retrieve(questions, top) -> list[Retrieved]``: `drkit.qa.drkit_retriever.DrKITRetriever` (a
hop-mixing model: entities ranked by Z*, each replaced by its page), and the peers of
`drkit.qa.peers` (BM25, single-step dense retrieval), so that all are run and scored by the same code.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from drkit.data.corpus import plain_id
from drkit.dense.quantize import QUANTIZE
from drkit.errors import ConfigError
from drkit.qa.metrics import (
    KS,
    answer_hits,
    answer_is_right,
    ir_measures_metrics,
    question_ids,
    recall_metrics,
    write_trec_qrels,
    write_trec_run,
)
from drkit.util.hardware import device_field, precision_field
from drkit.util.progress import progress


@dataclass(frozen=True)
class RetrieveConfig:
    """Settings of `drkit retrieve`."""

    top: int = field(default=20, metadata={"help": "passages written per question, at most (R@k and AR@k are scored for "
                                                   "k = 2, 5, 10, 20 up to it)"})
    batch_size: int = field(default=64, metadata={"help": "questions per batch"})
    qps_sample: int = field(default=100, metadata={"help": "questions timed one at a time for questions/s at "
                                                            "batch 1 (0: skip); with --answers, passages alone are "
                                                            "also timed at the batch size on their batches"})
    answer_start: str = field(default="named", metadata={
        "help": "where the hops that give a hop-mixing model's entity answer start: named (the entities the "
                "question names verbatim, as a bracketed entity; a second pass of the follows) or linked (the "
                "retrieval's Z_0 of bigram-TF-IDF-linked names, one pass)", "choices": ("named", "linked")})
    answers: bool = field(default=False, metadata={
        "help": "also give each question's entity answer (the last hop's best entity it does not name): with "
                "--answer-start named a second pass of the follows, so off by default"})
    answer_kinds: bool = field(default=True, metadata={"help": "entity answers known to be of another kind than the question "
                               "asks for (when: date, who: person, where: place) go last (--entities ner gives kinds)"})
    fill: bool = field(default=True, metadata={
        "help": "after the passages the model reached, list the question linker's ranking, marked \"reached\": "
                "false and counted in metrics.json (off: only reached passages, maybe fewer than --top)"})
    precision: str = precision_field("the question encoder and the mention scores")
    device: str = device_field("the question encoder and the mention scores")
    quantize: str = field(default="none", metadata={
        "help": "int8: the question encoder's transformer layers as int8 dynamic quantisation (CPU, fp32; "
                "benchmarks/bench_quantize.py measures its speed and recall against fp32)", "choices": QUANTIZE})

    def __post_init__(self):
        if self.top < 1 or self.batch_size < 1 or self.qps_sample < 0:
            raise ConfigError(f"top and batch_size must be at least 1 and qps_sample at least 0, got {self.top}, "
                              f"{self.batch_size} and {self.qps_sample}")
        if self.answer_start not in ("named", "linked"):
            raise ConfigError(f"answer_start must be 'named' or 'linked', got {self.answer_start!r}")

    def retriever_options(self) -> dict:
        """The `DrKITRetriever` arguments these settings give."""
        return {"answer_start": self.answer_start, "answers": self.answers, "fill": self.fill, "answer_kinds": self.answer_kinds}


@dataclass
class Retrieved:
    """The passages found for one question, best first: article ids of the index and their scores."""

    articles: list[int]
    scores: list[float]
    pi: list[float] | None = None  # hop-mixing weights pi_0 .. pi_T
    chain: list | None = None  # per hop, the best entities: [{"entity", "score", "passage", "title", "mention"}, ...]
    # (passage, title, mention, mention_id: the entity's best-scoring mention in that hop, when it has one)
    answer: str | None = None  # the last hop's best entity the question does not name (multi-hop slot filling)
    answers: list[tuple[int, float]] | None = None  # the last hop's best entities the question does not name,
    # (entity id, probability), best first: `answer` and those after it
    reached: list[bool] | None = None  # per article: reached by the model (False: the question linker's ranking,
    # listed after the reached ones); None: all reached (a peer)
    entities: list[int] | None = None  # per article: the title entity that placed it
    hops: list[int | None] | None = None  # per reached article: the hop t whose pi_t Z_t gave its entity the most
    hop_sizes: list[int] | None = None  # per hop t = 0..T: the entities of Z_t with non-zero probability
    question_entities: list[tuple[int, float]] | None = None  # Z_0's best entities (linked, rescored), best first


class Retriever(Protocol):
    name: str

    def retrieve(self, questions: Sequence[str], top: int) -> list[Retrieved]: ...


@dataclass
class Question:
    id: str
    question: str
    supporting: list[str] | None
    type: str | None
    line: int
    answers: list[str] | None = None


def read_questions(path: str | Path) -> tuple[list[Question], list[str]]:
    """The usable questions of a JSONL file and one message per bad line (file:line: reason). A line is
    bad when it is not a JSON object, has no non-empty "question" string, has a "supporting" that is
    not a list of ids, or has an "answers" that is not a non-empty list of non-empty strings or whole numbers
    (as the reader's questions must be: `drkit.reader.examples.read_questions`); a blank line is not a question
    and not bad."""
    from drkit.data.lines import read_lines

    path = Path(path)
    items, bad = [], []
    for line_no, line in read_lines(path, "question file"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:
            bad.append(f"{path}:{line_no}: not valid JSON ({str(exc).split(':')[0]})")
            continue
        if not isinstance(obj, dict):
            bad.append(f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__}")
            continue
        q = obj.get("question")
        if not isinstance(q, str) or not q.strip():
            bad.append(f"{path}:{line_no}: field 'question' must be a non-empty string")
            continue
        sup = obj.get("supporting")
        if sup is not None and (not isinstance(sup, list) or not all(plain_id(s) for s in sup)):
            bad.append(f"{path}:{line_no}: field 'supporting' must be a list of corpus ids")
            continue
        qtype, answers = obj.get("type"), obj.get("answers")
        if answers is not None and (not isinstance(answers, list) or not answers or not all(
                plain_id(a) and str(a).strip() for a in answers)):
            bad.append(f"{path}:{line_no}: field 'answers' must be a non-empty list of non-empty strings (or whole numbers)")
            continue
        items.append(Question(str(obj.get("id", line_no)), q.strip(), [str(s) for s in sup] if sup is not None else None,
                              qtype if isinstance(qtype, str) else None, line_no,
                              [str(a) for a in answers] if answers is not None else None))
    return items, bad


def passage_dicts(r: Retrieved, keys: list[str], titles: list[str], names: list[str] | None = None,
                  top: int | None = None) -> list[dict]:
    """The passages of `r` as JSON objects: ``id`` (corpus id), ``title``, ``score``, ``reached`` and, where
    known, ``entity`` (the title entity that placed it) and ``hop``; the first `top` (None: all)."""
    out = []
    for i, (a, s) in enumerate(zip(r.articles[:top], r.scores[:top])):
        item = {"id": keys[a], "title": titles[a], "score": round(float(s), 5),
                "reached": bool(r.reached[i]) if r.reached is not None else True}
        if r.entities is not None and names is not None:
            item["entity"] = names[r.entities[i]]
        if r.hops is not None:
            item["hop"] = r.hops[i]
        out.append(item)
    return out


def write_bad_lines(out: Path, bad: list[str], log) -> None:
    """OUT/bad_lines.txt, one bad question line a line (file:line: reason), and the first five logged."""
    (out / "bad_lines.txt").write_text("".join(b + "\n" for b in bad), encoding="utf-8")
    for b in bad[:5]:
        log(f"skipped {b}")
    if len(bad) > 5:
        log(f"... {len(bad) - 5} more bad lines, all in {out / 'bad_lines.txt'}")


def _timed(retriever, batches: list[list[str]], top: int, kwargs: dict) -> float:
    """Seconds to retrieve every batch of `batches` (the results are not kept)."""
    t = time.perf_counter()
    for batch in batches:
        retriever.retrieve(batch, top, **kwargs)
    return time.perf_counter() - t


def run_retrieval(retriever: Retriever, keys: list[str], titles: list[str], questions: str | Path, out: str | Path,
                  config: RetrieveConfig = RetrieveConfig(), log=print) -> dict:
    """Retrieve for every question of `questions`, write OUT/predictions.jsonl, OUT/bad_lines.txt and (with
    gold) OUT/metrics.json; return the metrics. `keys` and `titles` are the corpus ids and titles of the
    index's articles."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items, bad = read_questions(questions)
    known = set(keys)
    unknown = [f"{questions}:{q.line}: field 'supporting': {', '.join(repr(s) for s in q.supporting if s not in known)} "
               "not an id of the index's corpus; it counts as a miss" for q in items
               if q.supporting and not known.issuperset(q.supporting)]
    for line in unknown[:5]:
        log(f"warning: {line}")
    if len(unknown) > 5:
        log(f"warning: ... {len(unknown) - 5} more questions with gold ids not in the corpus (metrics.json)")
    write_bad_lines(out, bad, log)
    if not items:
        raise ConfigError(f"no question to retrieve for in {questions}" + (f": its {len(bad)} line(s) are bad, each "
                          f"in {out / 'bad_lines.txt'}" if bad else " (it has no question line)"))
    results: list[Retrieved] = []
    names = getattr(retriever, "names", None)  # entity names, for a retriever that says which entity placed a passage
    ks = [k for k in KS if k <= config.top] or [config.top]
    batches = [[q.question for q in items[s:s + config.batch_size]] for s in range(0, len(items), config.batch_size)]
    t0 = time.perf_counter()
    with progress(total=len(items), desc=f"retrieve ({retriever.name})", unit="q") as bar:
        for batch in batches:
            results += retriever.retrieve(batch, config.top)
            bar.update(len(batch))
    batch_s = time.perf_counter() - t0
    # an entity answer is a second pass of the follows: the plain figures time passage retrieval alone, as a user
    # who asks for passages gets it; "..._with_answers" the pass that also found the answers
    with_answers = bool(getattr(retriever, "answers", False))
    alone = {"answers": False} if with_answers else {}
    ranked = []
    with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
        for q, r in zip(items, results):
            ranked.append([keys[a] for a in r.articles])
            f.write(json.dumps({"id": q.id, "passages": passage_dicts(r, keys, titles, names),
                                "pi": r.pi, "chain": r.chain, "answer": r.answer}, ensure_ascii=False) + "\n")
    metrics: dict = {"retriever": retriever.name, "questions_file": str(questions), "questions": len(items),
                     "bad_lines": len(bad), "gold_not_in_corpus": {"questions": len(unknown), "e.g.": unknown[:3]},
                     "top": config.top}
    if with_answers:
        metrics[f"batch_{config.batch_size}_questions_per_s_with_answers"] = round(len(items) / batch_s, 2)
        # passages alone timed again on the first batches that hold the batch-1 sample, not on every question
        again = batches[:-(-config.qps_sample // config.batch_size)]
        if again:
            timed = sum(map(len, again))
            metrics[f"batch_{config.batch_size}_questions_per_s"] = round(timed / _timed(retriever, again, config.top,
                                                                                           alone), 2)
            metrics[f"batch_{config.batch_size}_sample"] = timed
    else:
        metrics[f"batch_{config.batch_size}_questions_per_s"] = round(len(items) / batch_s, 2)
    sample = items[:config.qps_sample]
    if sample:
        retriever.retrieve([sample[0].question], config.top, **alone)  # warm-up
        singles = [[q.question] for q in sample]
        metrics["batch_1_questions_per_s"] = round(len(sample) / _timed(retriever, singles, config.top, alone), 2)
        if with_answers:
            metrics["batch_1_questions_per_s_with_answers"] = round(len(sample) / _timed(retriever, singles, config.top,
                                                                                          {}), 2)
        metrics["batch_1_sample"] = len(sample)
    qids = question_ids(items)
    write_trec_run(out / "run.trec", qids, ranked, retriever.name)
    if any(q.supporting is not None for q in items):
        metrics.update(recall_metrics(ranked, [q.supporting or [] for q in items], [q.type for q in items], ks))
        gold = {qid: q.supporting for qid, q in zip(qids, items) if q.supporting}
        write_trec_qrels(out / "qrels.trec", gold)
        metrics["ir_measures"] = ir_measures_metrics(gold, dict(zip(qids, ranked)), ks)
    metrics["unreached"] = {f"@{k}": round(float(np.mean([sum(not x for x in (r.reached or [])[:k]) for r in results])), 4)
                            if results else None for k in ks}
    if any(r.answer is not None for r in results) and any(q.answers for q in items):
        metrics["answers"] = answer_hits(results, items)
        right = [answer_is_right(r.answer, q.answers) for r, q in zip(results, items) if q.answers]
        metrics["answers_overall"] = {"questions": len(right), "hits@1": round(float(np.mean(right)), 4)}
    if "overall" in metrics or "answers" in metrics:
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    return metrics

