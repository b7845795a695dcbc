"""BM25 over a list of texts: the ``bm25s`` package with its defaults (k1 1.5, b 0.75, Lucene IDF; lower-cased,
English stop words removed). The one place drkit calls it: the BM25 peer (`drkit.qa.peers`), the negatives of QA
pretraining (`drkit.dense.qa_supervision`) and the reader's distractors (`drkit.reader.examples`)."""

from __future__ import annotations

from typing import Sequence

import numpy as np


class BM25:
    def __init__(self, texts: Sequence[str]):
        import bm25s

        self._bm25s = bm25s
        self.n = len(texts)
        self.model = bm25s.BM25()
        self.model.index(bm25s.tokenize(list(texts), stopwords="en", show_progress=False), show_progress=False)

    def top(self, queries: Sequence[str], k: int) -> tuple[np.ndarray, np.ndarray]:
        """The best min(k, n) texts of each query, best first: (ids, scores), each (len(queries), min(k, n))."""
        tokens = self._bm25s.tokenize(list(queries), stopwords="en", show_progress=False)
        return self.model.retrieve(tokens, k=min(k, self.n), show_progress=False, n_threads=1)
