"""Controls for DrKIT's retrieval, as `drkit.qa.retrieve.Retriever`s scored by the same code.

They answer "what do the trained, differentiable hops add?":

* `SingleStepRetriever`: the same pretrained encoder DrKIT starts from (e.g. ``kb_qa``, pretrained on the
  same training questions), used as a plain dense passage retriever without hops: its query transformer,
  mean pooled and L2-normalised, embeds the questions and the passages (title + text), ranked by cosine,
  as the dense MiniLM peer does with the encoder it was pretrained from. Same supervision, one step, no
  graph. (Its slot-filling query against every mention vector, without the hops' restriction to the
  passages of Z_{t-1}, ranks any passage with a mention of the relation's kind first: R@5 below 0.02 on
  2Wiki, so that is not the control.)
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

from drkit.qa.peers import DenseRetriever, article_texts
from drkit.qa.retrieve import Retrieved


class SingleStepRetriever(DenseRetriever):
    name = "single_step"

    @classmethod
    def load(cls, index: str | Path, encoder: str | Path, precision: str = "auto", device: str = "auto") -> "SingleStepRetriever":
        """`encoder`: a ``drkit pretrain`` run or its ``encoder/``: its query transformer embeds the questions
        and the passages (title + text), mean pooled and L2-normalised, as `DenseRetriever` does with MiniLM."""
        from drkit.dense.encoder import DualEncoder
        from drkit.index.sparse import SparseIndex

        encoder = Path(encoder)
        if (encoder / "encoder" / "manifest.json").exists():
            encoder = encoder / "encoder"
        dual = DualEncoder.load(encoder)
        return cls(article_texts(SparseIndex.load(index)), precision=precision, model=dual.query_model,
                   tokenizer=dual.tokenizer, device=device)


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
    def load(cls, index: str | Path, link=None, **kw) -> "PPRRetriever":
        """The walk over `index`, from the Z_0 a question linker with settings `link` (a `QuestionLinkConfig`;
        None: its defaults) gives."""
        from drkit.index.question_linking import QuestionLinkConfig, QuestionLinker
        from drkit.index.sparse import SparseIndex

        sparse = SparseIndex.load(index)
        return cls(sparse, QuestionLinker.from_index(sparse, link or QuestionLinkConfig()), **kw)

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
