"""Controls for DrKIT's retrieval, as `drkit.qa.retrieve.Retriever`s scored by the same code.

They answer "what do the trained, differentiable hops add?":

* `SingleStepRetriever`: the same pretrained encoder DrKIT starts from (e.g. ``kb_qa``, trained on the same
  questions), used as a plain dense retriever without hops: the question's query ``g(q)`` against every
  mention vector ``f(m)`` of the mention index, each passage scored by its best mention (max inner product).
  Same supervision, same vectors, one step, no graph.
* `PPRRetriever`: a graph walk without training, HippoRAG's retrieval without its LLM: personalised
  PageRank over the index's entity link graph (`drkit.index.link_graph`, made symmetric), restarting at
  the question linker's Z_0 (its weights), damping 0.5 (HippoRAG's), 50 iterations; entities ranked by
  their PageRank, each replaced by its page as DrKIT's are (`drkit.reason.passages.PageRanker`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse as sp
import torch

from drkit.qa.retrieve import Retrieved


class SingleStepRetriever:
    name = "single_step"

    def __init__(self, index, mentions, encoder, precision: str = "auto", block: int = 1 << 16):
        self.index, self.encoder, self.precision, self.block = index, encoder.eval(), precision, block
        mentions.check_compatible(index)
        self.vectors = mentions.vectors  # (M, dim) fp16, memory-mapped
        mention_passage = np.asarray(index.mentions[:, 1], dtype=np.int64)
        self.mention_article = torch.from_numpy(np.asarray(index.passage_article, dtype=np.int64)[mention_passage])
        self.n_articles = len(index.article_keys)

    @classmethod
    def load(cls, index: str | Path, mentions: str | Path, encoder: str | Path, precision: str = "auto") -> "SingleStepRetriever":
        """`encoder`: a ``drkit pretrain`` run or its ``encoder/``; `mentions`: the index's mentions embedded by it."""
        from drkit.dense.encoder import DualEncoder
        from drkit.dense.mentions import MentionIndex
        from drkit.index.sparse import SparseIndex

        encoder = Path(encoder)
        if (encoder / "encoder" / "manifest.json").exists():
            encoder = encoder / "encoder"
        return cls(SparseIndex.load(index), MentionIndex.load(mentions), DualEncoder.load(encoder), precision)

    def retrieve(self, questions: Sequence[str], top: int) -> list[Retrieved]:
        q = torch.from_numpy(self.encoder.embed_queries(list(questions), self.precision))  # (B, dim)
        best = torch.full((len(questions), self.n_articles), -torch.inf)
        for lo in range(0, len(self.vectors), self.block):  # (B, block) scores, each article keeps its best
            f = torch.from_numpy(np.asarray(self.vectors[lo:lo + self.block], dtype=np.float32))
            s = q @ f.T
            idx = self.mention_article[lo:lo + self.block].expand(len(questions), -1)
            best.scatter_reduce_(1, idx, s, reduce="amax")
        values, ids = best.topk(min(top, self.n_articles), dim=1)
        out = []
        for v, i in zip(values, ids):
            keep = torch.isfinite(v)
            out.append(Retrieved(i[keep].tolist(), v[keep].tolist()))
        return out


class PPRRetriever:
    name = "ppr"

    def __init__(self, index, linker, damping: float = 0.5, iterations: int = 50, entities: int = 200):
        from drkit.reason.passages import PageRanker

        self.linker, self.damping, self.iterations, self.entities = linker, damping, iterations, entities
        self.pages = PageRanker.from_index(index)
        n = index.n_entities
        indptr, nbrs = np.asarray(index.entity_link_indptr), np.asarray(index.entity_link)
        w = sp.csr_matrix((np.ones(len(nbrs)), nbrs, indptr), shape=(n, n))
        w = ((w + w.T) > 0).astype(np.float64)  # an undirected graph, as HippoRAG's
        w.setdiag(0)
        w.eliminate_zeros()
        degree = np.asarray(w.sum(axis=1)).ravel()
        self.dangling = degree == 0
        self.transition_t = (sp.diags(np.where(degree > 0, 1.0 / np.maximum(degree, 1), 0.0)) @ w).T.tocsr()

    @classmethod
    def load(cls, index: str | Path, **kw) -> "PPRRetriever":
        from drkit.index.question_linking import QuestionLinker
        from drkit.index.sparse import SparseIndex

        sparse = SparseIndex.load(index)
        return cls(sparse, QuestionLinker.from_index(sparse), **kw)

    def pagerank(self, seeds: np.ndarray) -> np.ndarray:
        """Personalised PageRank of every entity: ``p = (1 - d) s + d (P^T p + (dangling mass) s)`` iterated from
        ``p = s``, `seeds` (E,) normalised to sum 1."""
        s = np.asarray(seeds, dtype=np.float64)
        s = s / s.sum()
        p = s.copy()
        for _ in range(self.iterations):
            p = (1 - self.damping) * s + self.damping * (self.transition_t @ p + p[self.dangling].sum() * s)
        return p

    def retrieve(self, questions: Sequence[str], top: int) -> list[Retrieved]:
        linked = self.linker.link(list(questions))
        n = len(self.transition_t.indptr) - 1
        out = []
        for b in range(len(questions)):
            ids, weights = linked.row(b)
            if len(ids) == 0 or not np.asarray(weights).sum() > 0:
                out.append(Retrieved([], []))
                continue
            seeds = np.zeros(n)
            np.add.at(seeds, ids, weights)
            p = self.pagerank(seeds)
            best = np.argsort(-p, kind="stable")[:self.entities]
            best = best[p[best] > 0]
            ranked = self.pages.rank(best, p[best], top)
            out.append(Retrieved([r.article for r in ranked], [r.score for r in ranked]))
        return out
