"""Single-hop slot filling with the dense mention index (the check of pretraining the index).

For a query ``(e1, R, ?)``: the candidates are the mentions reachable from e1 through the sparse index
(row e1 of A_{E->M}), without e1's own mentions; each is scored ``f(m) . g(q)``; entities are ranked
by their best mention. Hits@k: one of the top k entities is an answer.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import numpy as np

from drkit.data.corpus import iter_json_objects
from drkit.dense.distant import relation_key
from drkit.dense.encoder import DualEncoder
from drkit.dense.mentions import MentionIndex
from drkit.errors import InputFormatError
from drkit.index.sparse import SparseIndex
from drkit.util.progress import progress


def read_slot_queries(path: str | Path, index: SparseIndex) -> list[dict]:
    """Queries from a JSONL file of ``{"text", "subject", "answers", ...}`` (``heldout.jsonl`` of a
    pretraining run), with entity ids resolved in `index`: "text" a non-blank string, "subject" the name
    of an entity, "answers" a non-empty list of entity names, "relation" (a non-blank string) and
    "inverse" (a boolean) where given. Blank lines are skipped; anything else is an `InputFormatError`
    naming the file, line and field, checked in that order."""
    out = []
    for line_no, rec in iter_json_objects(path, "slot-filling query file"):
        def bad(field, message):
            return InputFormatError(path, line_no, message, field=field)
        for key in ("text", "subject"):
            if not isinstance(rec.get(key), str) or not rec[key].strip():
                raise bad(key, "missing or empty (expected a non-empty string)")
            if key == "subject" and index.entities.lookup(rec[key]) is None:
                raise bad(key, f"{rec['subject']!r} is not an entity of {index.path}")
        answers = rec.get("answers")
        if not isinstance(answers, list) or not answers or not all(isinstance(a, str) for a in answers):
            raise bad("answers", "missing or empty (expected a non-empty list of strings)")
        answer_ids = [index.entities.lookup(a) for a in answers]
        unknown = [a for a, i in zip(answers, answer_ids) if i is None]
        if unknown:
            raise bad("answers", f"{unknown[:3]} are not entities of {index.path}")
        if "relation" in rec and (not isinstance(rec["relation"], str) or not rec["relation"].strip()):
            raise bad("relation", "expected a non-empty string")
        if "inverse" in rec and not isinstance(rec["inverse"], bool):
            raise bad("inverse", "expected true or false")
        out.append({**rec, "line": line_no, "subject_id": index.entities.lookup(rec["subject"]),
                    "answer_ids": sorted(set(answer_ids))})
    return out


def candidate_mentions(index: SparseIndex, subject: int) -> tuple[np.ndarray, np.ndarray]:
    """The mentions in row `subject` of A, without the subject's own, and their entities."""
    cands = np.asarray(index.A_row(subject)[0], dtype=np.int64)
    ents = np.asarray(index.mention_entity[cands], dtype=np.int64)
    keep = ents != subject
    return cands[keep], ents[keep]


def rank_entities(index: SparseIndex, vectors: np.ndarray, subject: int, query: np.ndarray, top: int = 5):
    """Entities reachable from `subject` ranked by their best mention's score: (entities, scores, mentions)."""
    return rank_candidates(vectors, *candidate_mentions(index, subject), query, top)


def rank_candidates(vectors: np.ndarray, cands: np.ndarray, ents: np.ndarray, query: np.ndarray, top: int = 5):
    """The entities of mentions `cands` ranked by their best mention's score: (entities, scores, mentions)."""
    if len(cands) == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.int64)
    scores = np.asarray(vectors[cands], dtype=np.float32) @ query.astype(np.float32)
    order = np.argsort(-scores, kind="stable")
    _, first = np.unique(ents[order], return_index=True)
    first = np.sort(first)[:top]
    return ents[order][first], scores[order][first], cands[order][first]


def chance_hits(n_candidates: int, n_gold: int, ks=(1, 5)) -> tuple[float, ...]:
    """Expected Hits@k of a uniformly random ranking of `n_candidates` entities, `n_gold` of them answers."""
    out = []
    for k in ks:
        k = min(k, n_candidates)
        out.append(0.0 if k == 0 else 1.0 - math.comb(n_candidates - n_gold, k) / math.comb(n_candidates, k))
    return tuple(out)


# the per-query figures that `evaluate_slot_filling` averages, in this order
COLUMNS = ("hits@1", "hits@5", "reachable", "chance_hits@1", "chance_hits@5")


def evaluate_slot_filling(index: SparseIndex, mentions: MentionIndex, encoder: DualEncoder, queries: list[dict],
                          batch_size: int = 64) -> tuple[dict, list[dict]]:
    """Hits@1 and Hits@5 over `queries` (from `read_slot_queries`), overall and by relation, next to the
    fraction of queries with an answer among the candidates (``reachable``) and the expected Hits@k of a
    random ranking of the candidate entities (``chance_hits@k``)."""
    predictions = []
    groups: dict[str, list] = defaultdict(list)
    vectors = mentions.vectors
    for lo in progress(range(0, len(queries), batch_size), desc="slot filling", unit="batch"):
        chunk = queries[lo : lo + batch_size]
        query_vectors = encoder.embed_queries([q["text"] for q in chunk])
        for q, vec in zip(chunk, query_vectors):
            cands, cand_entities = candidate_mentions(index, q["subject_id"])
            ranked, scores, best_mentions = rank_candidates(vectors, cands, cand_entities, vec)
            gold = set(q["answer_ids"])
            hit1 = bool(len(ranked) and int(ranked[0]) in gold)
            hit5 = any(int(e) in gold for e in ranked[:5])
            reachable_entities = np.unique(cand_entities)
            n_gold = int(np.isin(reachable_entities, list(gold)).sum())
            reachable = n_gold > 0
            key = relation_key(q.get("relation", "?"), bool(q.get("inverse")))
            groups[key].append((hit1, hit5, reachable, *chance_hits(len(reachable_entities), n_gold)))
            top_mention = int(best_mentions[0]) if len(best_mentions) else None
            predictions.append({"line": q["line"], "text": q["text"], "answers": q["answers"],
                                "predicted": [index.entities.names[int(e)] for e in ranked],
                                "scores": [round(float(s), 4) for s in scores], "hit@1": hit1, "hit@5": hit5,
                                "reachable": reachable,
                                "top_mention": None if top_mention is None else {
                                    "mention": top_mention, "passage": int(index.mentions[top_mention, 1])}})

    def summarise(rows):
        a = np.array(rows, dtype=float).reshape(-1, len(COLUMNS))
        return {"queries": len(rows), **{n: round(float(a[:, i].mean()), 4) if len(rows) else None
                                         for i, n in enumerate(COLUMNS)}}

    everything = [r for rows in groups.values() for r in rows]
    metrics = {**summarise(everything), "by_relation": {k: summarise(v) for k, v in sorted(groups.items())}}
    return metrics, predictions
