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

    def __init__(self, texts: list[str], base: str = "all-MiniLM-L6-v2", max_pieces: int = 256, batch_size: int = 32,
                 precision: str = "auto", model=None, tokenizer=None, device: str = "auto"):
        """`model` and `tokenizer` (a transformer and its tokenizer) replace the `base` encoder when given (the model
        itself, not a copy: it is put in eval() and on the device);
        `precision` and `device` (`drkit.util.hardware`: auto takes a GPU where there is one) say where it computes.
        The passage vectors are kept on the CPU, where the scores are computed."""
        from drkit.data.tokenizer import encoder_path, load_tokenizer
        from drkit.dense.encoder import load_transformer

        self.tokenizer = tokenizer if tokenizer is not None else load_tokenizer(base)
        self.max_pieces, self.compute = max_pieces, choose(precision, device)
        self.model = (model if model is not None else load_transformer(encoder_path(base))).eval().to(self.compute.device)
        order = np.argsort([len(t) for t in texts], kind="stable")  # similar lengths batch together
        vectors = np.zeros((len(texts), self.model.config.hidden_size), dtype=np.float32)
        with progress(total=len(texts), desc=f"{self.name}: encode passages", unit="passage") as bar:
            for s in range(0, len(texts), batch_size):
                idx = order[s:s + batch_size]
                vectors[idx] = self.embed([texts[i] for i in idx])
                bar.update(len(idx))
        self.vectors = torch.from_numpy(vectors)

    @classmethod
    def from_index(cls, index, **kw) -> "DenseRetriever":
        return cls(article_texts(index), **kw)

    def embed(self, texts: list[str]) -> np.ndarray:
        from drkit.dense.encoder import mean_pool

        batch = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_pieces, return_tensors="pt")
        ids, mask = batch["input_ids"].to(self.compute.device), batch["attention_mask"].to(self.compute.device)
        with torch.no_grad(), self.compute.autocast():
            hidden = hidden_states(self.model, ids, mask)
        pooled = mean_pool(hidden.float(), mask)
        return torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy()

    def retrieve(self, questions: Sequence[str], top: int) -> list[Retrieved]:
        scores = torch.from_numpy(self.embed(list(questions))) @ self.vectors.T
        values, ids = scores.topk(min(top, scores.shape[1]), dim=1)
        return [Retrieved(i.tolist(), v.tolist()) for i, v in zip(ids, values)]
