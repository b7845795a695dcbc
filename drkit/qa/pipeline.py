"""The front door: ``DrKIT.load(index, model).answer(question)``.

One object answers questions at query time, read-only: the sparse index, the dense mention index, the
trained model and the question linker, loaded once. `answer` and `answer_batch` return typed results:
the answers with their probabilities and the reasoning chain, i.e. for each hop t the most probable
entities of Z_t, each with its supporting mention (the retrieved mention of that entity with the highest
logit), the passage it sits in (id, title, text, character offsets of the mention) and the entity of
Z_{t-1} whose row of A reached that passage. ``drkit ask``, ``drkit evaluate`` and the demo go through it.

Per-call knobs (hops, how many answers, the follow's K, min_weight and retrieval) are arguments; nothing
is stored between calls, so the same question gets the same answer whatever came before it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from drkit.dense.mips import MIPS_KINDS
from drkit.errors import ConfigError
from drkit.reason.follow import RETRIEVALS, FollowConfig
from drkit.reason.model import MultiHopModel, model_dir_of
from drkit.reason.vkb import ParsedQuestion, VirtualKB, check_model_index
from drkit.util.hardware import precision_field

_FOLLOW_HELP = {f.name: f.metadata["help"] for f in dataclasses.fields(FollowConfig)}


@dataclass(frozen=True)
class LoadConfig:
    """How `DrKIT.load` builds the virtual KB."""

    mips: str = field(default="exact", metadata={
        "help": "MIPS over all mentions for global retrieval: exact (blocks in the score dtype in memory), faiss (IVF over the "
                "vectors) or ivfpq (IVF-PQ codes in memory, the short list scored again exactly from the memory-mapped "
                "vectors); faiss and ivfpq imply --retrieval global", "choices": MIPS_KINDS})
    ann: str | None = field(default=None, metadata={
        "help": "with --mips ivfpq: the IVF-PQ index 'drkit ann' saved for the mention index (without it the "
                "codes are trained when the model loads)", "type": str})
    nprobe: int = field(default=32, metadata={
        "help": "with --mips faiss or ivfpq: IVF lists a search visits (more: higher recall, slower)", "type": int})
    rerank: int = field(default=4, metadata={
        "help": "with --mips ivfpq: the best rerank x K candidates of the codes are scored again exactly (more: "
                "higher recall, slower)", "type": int})
    precision: str = precision_field("the question encoder and the mention scores")


@dataclass(frozen=True)
class QueryConfig:
    """Per-call settings of `DrKIT.answer`; None keeps what the model was trained with."""

    hops: int | None = field(default=None, metadata={"help": "hops to run (at most the model's)", "type": int})
    top_k: int | None = field(default=None, metadata={"help": _FOLLOW_HELP["top_k"], "type": int})
    retrieval: str | None = field(default=None, metadata={"help": _FOLLOW_HELP["retrieval"], "choices": RETRIEVALS})
    min_weight: float | None = field(default=None, metadata={"help": _FOLLOW_HELP["min_weight"], "type": float})

    def __post_init__(self):
        if self.hops is not None and self.hops < 1:
            raise ConfigError(f"hops must be at least 1, got {self.hops}")

    def follow_config(self, base: FollowConfig) -> FollowConfig:
        """`base` with this call's overrides (FollowConfig checks their values)."""
        overrides = {k: v for k, v in (("top_k", self.top_k), ("retrieval", self.retrieval),
                                       ("min_weight", self.min_weight)) if v is not None}
        return dataclasses.replace(base, **overrides) if overrides else base


@dataclass(frozen=True)
class Answer:
    entity: str
    entity_id: int
    prob: float


@dataclass(frozen=True)
class Evidence:
    """The mention that supports an entity of a hop, in its passage."""

    mention_id: int
    passage_id: int
    title: str  # title of the passage's article
    text: str  # the passage text
    start: int  # character offsets of the mention in `text`
    end: int
    via: str | None  # the Z_{t-1} entity whose row of A weighs most at this passage

    def snippet(self, width: int = 110) -> str:
        """The passage around the mention, the mention marked ``[[...]]``, on one line."""
        lo, hi = max(0, self.start - width), min(len(self.text), self.end + width)
        return (("..." if lo else "") + self.text[lo:self.start] + "[[" + self.text[self.start:self.end] + "]]"
                + self.text[self.end:hi] + ("..." if hi < len(self.text) else "")).replace("\n", " ")


def evidence_of(index, mention: int, via: str | None = None) -> Evidence:
    """Mention `mention` of a `SparseIndex` in its passage."""
    _, passage, _, _, c0, c1 = (int(x) for x in index.mentions[mention])
    title = index.article_titles[int(index.passage_article[passage])]
    return Evidence(int(mention), passage, title, index.passage_text(passage), c0, c1, via)


@dataclass(frozen=True)
class HopEntity:
    entity: str
    entity_id: int
    prob: float
    evidence: Evidence


@dataclass(frozen=True)
class Hop:
    hop: int  # 1-based
    n_entities: int  # entities with non-zero probability in Z_t
    top: tuple[HopEntity, ...]  # the most probable, best first


@dataclass(frozen=True)
class Result:
    question: str  # as asked
    text: str  # what the encoder read (brackets removed)
    question_entity: str
    question_entity_id: int
    found_by: str  # "bracketed", or "linked ..." for a plain question
    hops: int
    answers: tuple[Answer, ...]  # best first
    chain: tuple[Hop, ...]  # empty when not asked for

    def to_dict(self) -> dict:
        """JSON-ready, with each mention's passage shortened to a snippet."""
        out = dataclasses.asdict(self)
        for hop, hop_out in zip(self.chain, out["chain"]):
            for entity, entity_out in zip(hop.top, hop_out["top"]):
                ev = entity_out.pop("evidence")
                entity_out.update(mention_id=ev["mention_id"], passage_id=ev["passage_id"], title=ev["title"],
                                  start=ev["start"], end=ev["end"], via=ev["via"], snippet=entity.evidence.snippet())
        return out


class DrKIT:
    """A trained model over its virtual KB, ready to answer. Build with `DrKIT.load`."""

    def __init__(self, model: MultiHopModel, vkb: VirtualKB):
        check_model_index(model.manifest, vkb)
        model.set_entities(vkb.entity_names)
        self.model = model.eval()
        self.vkb = vkb

    @classmethod
    def load(cls, index: str | Path, model: str | Path, mentions: str | Path | None = None,
             config: LoadConfig = LoadConfig()) -> "DrKIT":
        """`index`: a ``drkit index`` directory; `model`: a model or a ``drkit train`` run (its best model);
        `mentions`: the dense mention index, by default the one the model was trained with."""
        model_dir = model_dir_of(model)
        net = MultiHopModel.load(model_dir)
        mentions = mentions or net.manifest.get("mentions", {}).get("path")
        if not mentions:
            raise ConfigError(f"{model_dir} does not name its mention index; pass the mentions directory")
        if not Path(mentions).exists():
            raise ConfigError(f"the mention index {mentions} the model was trained with does not exist; "
                              "pass the mentions directory")
        if config.mips not in MIPS_KINDS:
            raise ConfigError(f"mips must be one of {', '.join(MIPS_KINDS)}, got {config.mips!r}")
        if config.ann is not None and config.mips != "ivfpq":
            raise ConfigError("ann (a saved IVF-PQ index) goes with mips 'ivfpq'")
        if config.nprobe < 1 or config.rerank < 1:
            raise ConfigError(f"nprobe and rerank must be at least 1, got {config.nprobe} and {config.rerank}")
        search = {"exact": {}, "faiss": {"nprobe": config.nprobe},
                  "ivfpq": {"nprobe": config.nprobe, "rerank": config.rerank}}[config.mips]
        if config.ann:
            search["ann"] = config.ann
        return cls(net, VirtualKB.load(index, mentions, config.mips, config.precision, **search))

    @property
    def entity_names(self) -> list[str]:
        return self.vkb.entity_names

    def parse(self, question: str) -> ParsedQuestion:
        """The encoder text and question entity; `QuestionError` when there is none."""
        return self.vkb.parse(question)

    def answer(self, question: str | ParsedQuestion, top: int = 5, chain_top: int = 3,
               query: QueryConfig = QueryConfig()) -> Result:
        """Answers and reasoning chain of one question. Raises `QuestionError` for a question with no entity."""
        return self.answer_batch([question], top, chain_top, query)[0]

    @torch.no_grad()
    def answer_batch(self, questions: Sequence[str | ParsedQuestion], top: int = 5, chain_top: int = 3,
                     query: QueryConfig = QueryConfig()) -> list[Result]:
        """`answer` for many questions at once (one forward pass). `chain_top=0` skips the chain."""
        if top < 1:
            raise ConfigError(f"top must be at least 1, got {top}")
        parsed = [q if isinstance(q, ParsedQuestion) else self.parse(q) for q in questions]
        asked = [q if isinstance(q, str) else p.text for q, p in zip(questions, parsed)]
        if not parsed:
            return []
        fc = query.follow_config(self.model.follow_config)
        if query.retrieval is None and self.vkb.searcher_kind != "exact":
            fc = dataclasses.replace(fc, retrieval="global")  # an approximate searcher is for global retrieval
        topics = np.array([p.topic for p in parsed], dtype=np.int64)
        outs = self.model([p.text for p in parsed], topics, self.vkb, hops=query.hops, trace=chain_top > 0,
                          follow_config=fc, precision=self.vkb.precision)
        ids, probs = outs[-1].z.top(top)  # (B, top)
        chains = self._chains(outs, topics, chain_top, fc) if chain_top > 0 else [()] * len(parsed)
        names = self.entity_names
        return [Result(q, p.text, p.topic_name, p.topic, p.how, len(outs),
                       tuple(Answer(names[e], int(e), float(pr)) for e, pr in zip(ids[b], probs[b]) if e >= 0),
                       chains[b])
                for b, (q, p) in enumerate(zip(asked, parsed))]

    # -- the reasoning chain ---------------------------------------------------------------------
    def _chains(self, outs, topics: np.ndarray, chain_top: int, fc: FollowConfig) -> list[tuple[Hop, ...]]:
        index, names = self.vkb.index, self.entity_names
        batch = len(topics)
        chains: list[list[Hop]] = [[] for _ in range(batch)]
        prev = [(np.array([t]), np.array([1.0])) for t in topics]  # Z_0 of each row
        for t, out in enumerate(outs):
            z, tr = out.z, out.trace
            power = float(self.model.tfidf_power[t].clamp_min(0)) if self.model.config.learn_tfidf_power \
                else fc.tfidf_power
            best = tr.best_mention(len(z))
            z_rows, z_ids = z.rows.numpy(), z.ids.numpy()
            row_start = np.searchsorted(z_rows, np.arange(batch + 1))
            current = []
            for b in range(batch):
                e_ids, e_probs = z.row(b)
                top = []
                for e, pr in zip(e_ids[:chain_top], e_probs[:chain_top]):
                    lo, hi = row_start[b], row_start[b + 1]
                    slot = lo + int(np.searchsorted(z_ids[lo:hi], e))
                    m = int(best[slot])
                    via = self._via(power, fc.self_loops, *prev[b], int(index.mentions[m][1]), int(e))
                    top.append(HopEntity(names[e], int(e), float(pr), evidence_of(index, m, via)))
                chains[b].append(Hop(t + 1, int(len(e_ids)), tuple(top)))
                current.append((e_ids, e_probs))
            prev = current
        return [tuple(c) for c in chains]

    def _via(self, power: float, self_loops: bool, prev_ids, prev_probs, passage: int, entity: int) -> str | None:
        """The entity of Z_{t-1} that weighs most in ``(Z^T A)`` at `passage`: its probability times its
        A weight there, ``exp(power * log_rel)`` (the mention's own entity excluded unless A has self-loops);
        the first of Z_{t-1}'s order on a tie."""
        graph = self.vkb.graph
        prev_ids = np.asarray(prev_ids, dtype=np.int64)
        pos, hit = graph.find_entries(prev_ids, np.full(len(prev_ids), passage, dtype=np.int64))
        if not self_loops:
            hit &= np.asarray(prev_ids) != entity
        if not hit.any():
            return None
        rows = np.flatnonzero(hit)
        factor = np.exp(power * graph.log_rel(pos[rows]).numpy()) if graph.has_passage_scores else 1.0
        w = np.asarray(prev_probs, dtype=np.float64)[rows] * factor
        if not w.max() > 0.0:
            return None
        return self.entity_names[int(prev_ids[rows[int(np.argmax(w))]])]
