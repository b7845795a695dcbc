"""The peers drkit is compared with, as `drkit.qa.retrieve.Retriever`s scored by the same code.

* `BM25Retriever`: BM25 over title + text (the ``bm25s`` package, its defaults: k1 1.5, b 0.75, Lucene
  IDF; lower-cased, English stop words removed), the sparse baseline of the graph-RAG papers.
* `DenseRetriever`: single-step dense retrieval with a sentence encoder, mean pooled and L2-normalised
  (cosine), passages encoded as title + text (truncated to `max_pieces` word pieces); by default the
  same all-MiniLM-L6-v2 that drkit starts from, untrained on the questions.

Both rank articles (the index's passages of a title-entity corpus), like `drkit.qa.drkit_retriever.DrKITRetriever`.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from drkit.dense.layers import hidden_states
from drkit.qa.retrieve import Retrieved
from drkit.util.hardware import choose
from drkit.util.progress import progress


def article_texts(index) -> list[str]:
    """Title and text of each article of the index (its passages joined)."""
    parts: list[list[str]] = [[t] for t in index.article_titles]
    for p, a in enumerate(np.asarray(index.passage_article)):
        parts[int(a)].append(index.passage_text(p))
    return ["\n".join(p) for p in parts]


class BM25Retriever:
    name = "bm25"

    def __init__(self, texts: list[str]):
        from drkit.index.bm25 import BM25

        self.bm25 = BM25(texts)
        self.n = len(texts)

    @classmethod
    def from_index(cls, index) -> "BM25Retriever":
        return cls(article_texts(index))

    def retrieve(self, questions: Sequence[str], top: int) -> list[Retrieved]:
        docs, scores = self.bm25.top(questions, top)
        return [Retrieved([int(a) for a in d], [float(s) for s in sc]) for d, sc in zip(docs, scores)]


class DenseRetriever:
    name = "dense"

    def __init__(self, texts: list[str], base: str = "all-MiniLM-L6-v2", max_pieces: int = 256,
                 batch_tokens: int = 8192, precision: str = "auto", model=None, tokenizer=None, device: str = "auto"):
        """`model` and `tokenizer` (a transformer and its tokenizer) replace the `base` encoder when given (the model
        itself, not a copy: it is put in eval() and on the device);
        `precision` and `device` (`drkit.util.hardware`: auto takes a GPU where there is one) say where it computes.
        The passages are tokenised once and encoded in batches of one length each, of at most `batch_tokens` word
        pieces (`drkit.dense.embedding.length_batches`, as the mention index is): none is padded, so a passage's
        vector does not depend on the batch it falls in. The passage vectors are kept on the CPU, where the scores
        are computed."""
        from drkit.data.tokenizer import encoder_path, load_tokenizer
        from drkit.dense.embedding import length_batches
        from drkit.dense.encoder import load_transformer

        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(base)
        self.max_pieces, self.compute = max_pieces, choose(precision, device)
        self.model = (model if model is not None else load_transformer(encoder_path(base))).eval().to(self.compute.device)
        ids = self.tokenizer(list(texts), truncation=True, max_length=max_pieces)["input_ids"] if texts else []
        vectors = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with progress(total=len(texts), desc=f"{self.name}: encode passages", unit="passage") as bar:
            for batch in length_batches(np.array([len(i) - 2 for i in ids], dtype=np.int64), batch_tokens):
                pieces = torch.tensor([ids[i] for i in batch], dtype=torch.long)
                vectors[batch] = self._vectors(pieces, torch.ones_like(pieces))
                bar.update(len(batch))
        self.vectors = torch.from_numpy(vectors)

    @classmethod
    def from_index(cls, index, **kw) -> "DenseRetriever":
        return cls(article_texts(index), **kw)

    def embed(self, texts: list[str]) -> np.ndarray:
        """The texts' vectors (n, hidden) float32, L2-normalised; a batch padded to its longest text."""
        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_pieces, return_tensors="pt")
        return self._vectors(batch["input_ids"], batch["attention_mask"])

    def _vectors(self, ids: torch.Tensor, mask: torch.Tensor) -> np.ndarray:
        from drkit.dense.encoder import mean_pool

        ids, mask = ids.to(self.compute.device), mask.to(self.compute.device)
        with torch.inference_mode(), self.compute.autocast():
            hidden = hidden_states(self.model, ids, mask)
        pooled = mean_pool(hidden.float(), mask)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()

    def retrieve(self, questions: Sequence[str], top: int) -> list[Retrieved]:
        scores = torch.from_numpy(self.embed(list(questions))) @ self.vectors.T
        values, ids = scores.topk(min(top, scores.shape[1]), dim=1)
        return [Retrieved(i.tolist(), v.tolist()) for i, v in zip(ids, values)]
