"""Scoring a passage ranking (`drkit retrieve`'s ``metrics.json`` and TREC files): R@k and AR@k, overall and
by question type; Hits@1 of entity answers; the TREC run and qrels files, and R@k, nDCG@10 and MRR
computed by ir_measures (pytrec_eval) from the same rankings.

R@k is the mean over questions of the share of their gold passages in the top k (HippoRAG's "passage
recall"); AR@k the share of questions with every gold passage in the top k (the DrKIT paper's HotpotQA
"accuracy@k")."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Sequence

import numpy as np

from drkit.qa.stats import per_question

if TYPE_CHECKING:
    from drkit.qa.retrieve import Question, Retrieved

KS = (2, 5, 10, 20)


def recall_metrics(ranked: list[list[str]], gold: list[list[str]], types: list[str | None],
                   ks: Sequence[int] = KS) -> dict:
    """R@k and AR@k (module docstring) of ranked corpus ids against gold ones, overall and by type. A
    question with no gold id is not scored (counted as ``without_gold``)."""

    def block(idx: list[int]) -> dict:
        out: dict = {"questions": len(idx)}
        for k in ks:
            shares = per_question([ranked[i] for i in idx], [gold[i] for i in idx], k)
            out[f"R@{k}"] = round(float(np.mean(shares)), 4) if idx else None
            out[f"AR@{k}"] = round(float(np.mean(shares == 1.0)), 4) if idx else None
        return out

    scored = [i for i in range(len(gold)) if gold[i]]
    by_type: dict[str, list[int]] = {}
    for i in scored:
        by_type.setdefault(types[i] or "untyped", []).append(i)
    return {"overall": block(scored), "by_type": {t: block(v) for t, v in sorted(by_type.items())},
            "without_gold": len(gold) - len(scored)}


def answer_is_right(answer: str | None, gold: Sequence[str]) -> bool:
    """Whether an entity answer equals one of the gold answers, ignoring case and surrounding space."""
    return answer is not None and answer.strip().casefold() in {a.strip().casefold() for a in gold}


def answer_hits(results: list[Retrieved], items: list[Question]) -> dict:
    """Hits@1 of the retriever's answer (the last hop's best entity) on the questions that have answers,
    by type: right when it equals one of them, ignoring case and surrounding space."""
    by_type: dict[str, list[bool]] = {}
    for r, q in zip(results, items):
        if q.answers:
            by_type.setdefault(q.type or "untyped", []).append(answer_is_right(r.answer, q.answers))
    return {t: {"questions": len(v), "hits@1": round(float(np.mean(v)), 4)} for t, v in sorted(by_type.items())}


def question_ids(items: list[Question]) -> list[str]:
    """The TREC query ids of `items`: their ids, or their line numbers ("line-N") when ids repeat."""
    ids = [q.id for q in items]
    return ids if len(set(ids)) == len(ids) else [f"line-{q.line}" for q in items]


def write_trec_run(path: Path, qids: list[str], ranked: list[list[str]], name: str) -> None:
    """A TREC run file: ``qid Q0 docid rank score name`` per passage. The score column is ``n - rank + 1``
    (n passages listed), not the retriever's score: trec_eval and ir_measures sort by it, and the
    retriever's own scores may tie; those are in predictions.jsonl."""
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in zip(qids, ranked):
            for rank, doc in enumerate(docs, 1):
                f.write(f"{qid} Q0 {doc} {rank} {len(docs) - rank + 1} {name}\n")


def write_trec_qrels(path: Path, gold: dict[str, list[str]]) -> None:
    """The gold passages as TREC qrels: ``qid 0 docid 1``."""
    with open(path, "w", encoding="utf-8") as f:
        for qid, docs in gold.items():
            for doc in dict.fromkeys(docs):
                f.write(f"{qid} 0 {doc} 1\n")


def ir_measures_metrics(gold: dict[str, list[str]], ranked: dict[str, list[str]], ks: Sequence[int] = KS) -> dict:
    """R@k, nDCG@10 and MRR (RR) of `ranked` against `gold` (binary relevance), computed by ir_measures
    (pytrec_eval), averaged over every question with gold (one the retriever gave nothing counts 0, as in
    `recall_metrics`)."""
    import ir_measures
    from ir_measures import RR, R, nDCG

    qrels = [ir_measures.Qrel(qid, doc, 1) for qid, docs in gold.items() for doc in dict.fromkeys(docs)]
    run = [ir_measures.ScoredDoc(qid, doc, float(len(docs) - i)) for qid, docs in ranked.items() if qid in gold
           for i, doc in enumerate(docs)]
    measures = [R @ k for k in ks] + [nDCG @ 10, RR]
    per: dict[str, dict[str, float]] = {str(m): {} for m in measures}
    for row in ir_measures.iter_calc(measures, qrels, run):
        per[str(row.measure)][row.query_id] = float(row.value)
    out = {name: round(float(np.mean([v.get(q, 0.0) for q in gold])), 4) if gold else None for name, v in per.items()}
    return {"library": f"ir_measures {ir_measures.__version__}", "questions": len(gold), **out}
