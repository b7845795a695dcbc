"""Pretraining the mention encoder from question-answer pairs (the paper, 3.3: "directly using the HotpotQA
training questions, with TFIDF based retrieved passages as negative examples").

Input: JSONL questions ``{"question", "supporting": [corpus ids]}`` over a title-entity corpus (each
passage about its title entity). A question q is a slot-filling query whose text is the question itself
and whose answers are its gold entities G_q, the title entities of its supporting articles. For q and a
passage d (``label``, the contract of `drkit.dense.distant.DistantSupervision` that
`drkit.dense.pretrain` trains on):

* positive: d is a passage of a supporting article; its gold spans are its mentions of G_q (the title
  line names the page's entity; the text may name the others);
* negative: d mentions no entity of G_q;
* ignored: d mentions one but is not a supporting passage (it may or may not help answer q).

Hard negatives (``negative``): ``tfidf``, a passage among the top `retrieved` by BM25 (a TF-IDF
weighting; the ``bm25s`` package, over the passages' text) for the question text that mentions no gold
entity; ``random``, any passage mentioning none. Questions whose supporting ids are not in the index, or
whose supporting articles' titles are not entities, are counted (``summary``), not fatal; a line that is
not a JSON object with a non-empty "question" string and a "supporting" list is an `InputFormatError`
naming file and line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from drkit.dense.distant import IGNORED, NEGATIVE, POSITIVE, SlotQueries
from drkit.errors import ConfigError, InputFormatError
from drkit.index.sparse import SparseIndex

QA_NEGATIVE_KINDS = ("tfidf", "random")


def read_qa_pairs(path: str | Path) -> list[tuple[int, str, list[str]]]:
    """``(line, question, supporting corpus ids)`` of every question of a JSONL file."""
    from drkit.data.corpus import iter_json_objects

    out = []
    for line, obj in iter_json_objects(path, "question file"):
        q, sup = obj.get("question"), obj.get("supporting")
        if not isinstance(q, str) or not q.strip():
            raise InputFormatError(path, line, "'question' must be a non-empty string", field="question")
        if not isinstance(sup, list) or not all(isinstance(s, (str, int)) for s in sup):
            raise InputFormatError(path, line, "'supporting' must be a list of corpus ids", field="supporting")
        out.append((line, q.strip(), [str(s) for s in sup]))
    return out


class QASupervision:
    """Slot-filling queries from questions and their gold passages, with BM25-retrieved hard negatives."""

    negative_kinds = QA_NEGATIVE_KINDS

    def __init__(self, index: SparseIndex, questions: str | Path, retrieved: int = 20):
        self.index = index
        self.mention_indptr = index.passage_mention_indptr
        by_passage = index.mention_incidence.T.tocsr()  # (P, E)
        self.passage_entity_indptr = by_passage.indptr.astype(np.int64)
        self.passage_entity = by_passage.indices.astype(np.int64)
        article = {k: i for i, k in enumerate(index.article_keys)}
        passage_article = np.asarray(index.passage_article, dtype=np.int64)
        article_passages: dict[int, list[int]] = {}
        for p, a in enumerate(passage_article):
            article_passages.setdefault(int(a), []).append(p)
        self.counts = {"questions": 0, "supporting_not_in_index": 0, "supporting_without_entity": 0,
                       "without_gold": 0, "positive_pairs": 0}
        texts, gold, positives = [], [], []
        for _, question, supporting in read_qa_pairs(questions):
            self.counts["questions"] += 1
            ents, pos = set(), []
            for key in supporting:
                a = article.get(key)
                if a is None:
                    self.counts["supporting_not_in_index"] += 1
                    continue
                e = int(index.article_entity[a])
                if e < 0:
                    self.counts["supporting_without_entity"] += 1
                    continue
                ents.add(e)
                pos += article_passages.get(a, [])
            if not ents:
                self.counts["without_gold"] += 1
                continue
            texts.append(question)
            gold.append(np.array(sorted(ents), dtype=np.int64))
            positives.append(np.array(sorted(set(pos)), dtype=np.int64))
        if not texts:
            raise ConfigError(f"no question of {questions} has a supporting passage whose title is an entity of the index")
        indptr = np.zeros(len(gold) + 1, dtype=np.int64)
        indptr[1:] = np.cumsum([len(g) for g in gold])
        self.queries = SlotQueries(np.full(len(gold), -1, np.int64), np.zeros(len(gold), np.int64),
                                   np.zeros(len(gold), bool), indptr, np.concatenate(gold), ["question"], texts)
        self.positive_sets = positives
        self.counts["positive_pairs"] = int(sum(len(p) for p in positives))
        # anchors: passage -> the questions it is a positive of
        qs = np.concatenate([np.full(len(p), i, np.int64) for i, p in enumerate(positives)])
        ps = np.concatenate(positives)
        order = np.lexsort((qs, ps))
        self.anchor_queries = qs[order]
        self.anchor_indptr = np.searchsorted(ps[order], np.arange(index.n_passages + 1)).astype(np.int64)
        self.anchors = np.flatnonzero(np.diff(self.anchor_indptr) > 0)
        self.retrieved = self._bm25(texts, retrieved)

    def _bm25(self, texts: list[str], k: int) -> list[np.ndarray]:
        """The top `k` passages of each question by BM25 that mention none of its gold entities."""
        from drkit.index.bm25 import BM25

        docs, _ = BM25([self.index.passage_text(p) for p in range(self.index.n_passages)]).top(texts, k)
        return [np.array([int(p) for p in row if self.label(q, int(p)) == NEGATIVE], dtype=np.int64)
                for q, row in enumerate(docs)]

    def passage_entities(self, p: int) -> np.ndarray:
        return self.passage_entity[self.passage_entity_indptr[p]:self.passage_entity_indptr[p + 1]]

    def training_queries(self, p: int) -> np.ndarray:
        return self.anchor_queries[self.anchor_indptr[p]:self.anchor_indptr[p + 1]]

    def label(self, q: int, p: int) -> int:
        if not np.isin(self.passage_entities(p), self.queries.answers(q)).any():
            return NEGATIVE
        pos = self.positive_sets[q]
        i = np.searchsorted(pos, p)
        return POSITIVE if i < len(pos) and pos[i] == p else IGNORED

    def gold_mentions(self, q: int, p: int) -> np.ndarray:
        lo, hi = self.mention_indptr[p], self.mention_indptr[p + 1]
        ents = np.asarray(self.index.mentions[lo:hi, 0])
        return lo + np.flatnonzero(np.isin(ents, self.queries.answers(q)))

    def negative(self, q: int, kind: str, rng: np.random.Generator, tries: int = 20) -> int | None:
        if kind == "tfidf":
            pool = self.retrieved[q]
            return int(pool[rng.integers(len(pool))]) if len(pool) else None
        if kind != "random":
            raise ValueError(f"unknown negative kind {kind!r}; expected one of {QA_NEGATIVE_KINDS}")
        for _ in range(tries):
            p = int(rng.integers(self.index.n_passages))
            if self.label(q, p) == NEGATIVE:
                return p
        return None

    def summary(self) -> dict:
        return {**self.counts, "queries": len(self.queries), "anchor_passages": len(self.anchors),
                "with_tfidf_negatives": int(sum(len(r) > 0 for r in self.retrieved))}
