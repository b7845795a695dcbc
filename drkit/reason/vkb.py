"""The virtual KB at question time: the sparse index, the dense mention index and a MIPS searcher,
plus finding the question entity of a question.

Question entity (Z_0): in a MetaQA-format question it is the bracketed name, which must be an entity
of the index. In a plain question, entity names are found by exact (case-folded) match, as the index
links the corpus, and the least frequent one in the corpus is used (paper, Appendix A).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drkit.data.questions import split_topic
from drkit.dense.mentions import MentionIndex
from drkit.dense.mips import ExactMIPS
from drkit.errors import ConfigError, QuestionError
from drkit.index.linking import link_question
from drkit.index.sparse import SparseIndex
from drkit.reason.graph import FollowGraph
from drkit.util.artifact import recorded_places
from drkit.util.hardware import choose


@dataclass(frozen=True)
class ParsedQuestion:
    text: str  # what the encoder reads (brackets removed)
    topic: int  # entity id of Z_0
    topic_name: str
    how: str  # "bracketed" or "linked (least frequent of ...)"


def has_page(index: SparseIndex) -> np.ndarray:
    """(E,) bool: whether each entity of `index` has a page (passages under its title)."""
    indptr, _ = index.entity_pages
    return np.diff(np.asarray(indptr)) > 0


class VirtualKB:
    """Everything a follow needs at question time, loaded once."""

    def __init__(self, index: SparseIndex, mentions: MentionIndex, searcher: str = "exact", precision: str = "auto",
                 device: str = "auto", **search_kwargs):
        mentions.check_compatible(index)
        mentions = mentions.for_index(index)  # a grown index: the base's live vectors and its segments'
        self.index = index
        self.mentions = mentions
        # `precision` (drkit.util.hardware) sets the dtype mention vectors are scored in: bf16 where native, else
        # fp32; `device` where they are scored (auto: a CUDA GPU when there is one) and where a model that answers
        # on this virtual KB computes (`drkit.qa.pipeline.DrKIT` moves it there)
        self.precision = precision  # the setting, passed on to the question encoder as given
        self.compute = choose(precision, device)
        # the memory map: restricted retrieval on the CPU reads the rows it scores; global exact MIPS (and any
        # scoring on a GPU) makes one copy in the score dtype
        self.graph = FollowGraph.from_index(index, mentions.vectors, score_dtype=self.compute.score_dtype,
                                            device=self.compute.device)
        self._searcher_kind, self._search_kwargs = searcher, search_kwargs
        self._searcher = None  # built on first use: restricted retrieval never searches
        self.entity_frequency = np.bincount(index.mention_entity, minlength=index.n_entities)
        self._linker = None

    @functools.cached_property
    def page_entities(self) -> np.ndarray | None:
        """(E,) bool: the entities with a page (passages under their title); None when every entity has one."""
        has = has_page(self.index)
        return None if has.all() else has

    @classmethod
    def load(cls, index_dir: str | Path, mentions_dir: str | Path, searcher: str = "exact", precision: str = "auto",
             device: str = "auto", **kw) -> "VirtualKB":
        return cls(SparseIndex.load(index_dir), MentionIndex.load(mentions_dir), searcher, precision, device, **kw)

    @property
    def searcher(self):
        """The MIPS over all mentions (exact: blocks in the score dtype cached in memory; or FAISS IVF)."""
        if self._searcher is None:
            kw = dict(self._search_kwargs)
            if self._searcher_kind == "exact":
                kw.setdefault("compute_dtype", self.graph.score_dtype)
                searcher = ExactMIPS(self.mentions.vectors, block_size=kw.pop("block_size", 1 << 20), **kw)
                # the follow's copy of f(M) in the compute dtype, shared (views), not a second one
                self._searcher = searcher.cache(self.graph.vectors_as(searcher.compute_dtype))
            else:
                self._searcher = self.mentions.searcher(self._searcher_kind, **kw)
        return self._searcher

    @property
    def searcher_kind(self) -> str:
        """"exact", "faiss" or "ivfpq": the MIPS of global retrieval."""
        return self._searcher_kind

    def search(self, queries: np.ndarray, k: int):
        return self.searcher.search(queries, k)

    @property
    def entity_names(self) -> list[str]:
        return self.index.entities.names

    def parse(self, question: str) -> ParsedQuestion:
        """The encoder text and question entity of `question`; `QuestionError` if there is none."""
        question = question.strip()
        if not question:
            raise QuestionError("the question is empty")
        text, name = split_topic(question)
        if name is not None:
            entity = self.index.entities.lookup(name)
            if entity is None:
                raise QuestionError(f"the bracketed entity [{name}] is not an entity of the index {self.index.path}")
            return ParsedQuestion(text, entity, self.index.entities.names[entity], "bracketed")
        entity, found = link_question(question, self.linker, self.entity_frequency)
        if entity is None:
            raise QuestionError(f"no entity of the index is named in the question {question!r}; "
                                "mark the question entity in brackets, e.g. 'who directed [Kismet]'")
        others = [self.index.entities.names[e] for e in found if e != entity]
        how = "linked" + (f" (least frequent; also found {others})" if others else "")
        return ParsedQuestion(question, int(entity), self.index.entities.names[entity], how)

    @property
    def linker(self):
        if self._linker is None:
            from drkit.index.linking import EntityLinker, LinkConfig

            min_len = self.index.manifest.get("config", {}).get("link", {}).get("min_name_length",
                                                                             LinkConfig().min_name_length)
            self._linker = EntityLinker.of_table(self.index.entities, min_len)
        return self._linker


def trained_mentions(model_dir: str | Path, model_manifest: dict) -> Path:
    """The mention index the model at `model_dir` was trained with: the recorded path, else the recorded path
    from the model's folder (a moved tree of runs); refused, naming both, when neither holds it."""
    record = model_manifest.get("mentions", {})
    if not record.get("path"):
        raise ConfigError(f"{model_dir} does not name its mention index; pass the mentions directory (--mentions)")
    tried = recorded_places(record, model_dir, "from_model")
    for path in tried:
        if (path / "manifest.json").exists():
            return path
    where = " nor at ".join(f"'{p}'" for p in tried)
    raise ConfigError(f"the mention index {model_dir} was trained with is not at {where}; pass the mentions "
                      "directory (--mentions)")


def check_model_index(model_manifest: dict, vkb: VirtualKB) -> None:
    """Refuse to run a model with a mention index other than the one it was trained with."""
    trained = model_manifest.get("mentions", {})
    if trained.get("encoder_sha256") and trained["encoder_sha256"] != vkb.mentions.manifest["encoder"]["sha256"]:
        raise ConfigError(f"the model was trained with a mention index embedded by another encoder "
                          f"({trained.get('path')}); pass --mentions with that index")
