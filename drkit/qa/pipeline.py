"""The front door: ``DrKIT.load(index, model)``, then ``.answer(question)`` or ``.retrieve(question, k)``.

One object answers questions at query time, read-only: the sparse index, the dense mention index, the
trained model and the question linker, loaded once. It takes either kind of trained model:

* a multi-hop model (``drkit train``; MetaQA-style questions with a bracketed or linked question entity
  and a fixed hop count);
* a hop-mixing model (``drkit train-mixing``, ``drkit reproduce-2wiki``; plain questions of unknown hop
  count over a title-entity corpus: Z* = sum_t pi_t Z_t), through `drkit.qa.drkit_retriever.DrKITRetriever`.

`answer` and `answer_batch` return typed results: the answers with their probabilities and the reasoning
chain, i.e. for each hop t the most probable entities of Z_t, each with its supporting mention (the
retrieved mention of that entity with the highest logit), the passage it sits in (id, title, text,
character offsets of the mention) and, for a multi-hop model, the entity of Z_{t-1} whose row of A
reached that passage; a hop-mixing model's results add pi, its chain starts at Z_0 (hop 0) and its
answers are the last hop's best entities the question does not name. `retrieve` and `retrieve_batch`
return typed `Passage` lists: a hop-mixing model's ranked passages (`drkit.reason.passages`), or for a
multi-hop model the passages that hold each hop's best entities' supporting mentions. ``drkit ask``,
``drkit retrieve``, ``drkit evaluate``, ``drkit serve`` and the demo go through it.

With a reader (``DrKIT.load(..., reader=DIR)``, `drkit.reader`), every answered question's top passages are
also read: `Result.reading` holds the reader's answer (a span, "yes" or "no") with its supporting sentences, and
`Result.passages` puts the passages read that hold one of them first (`DrKIT.retrieve` keeps the retriever's order).

Per-call knobs (hops, how many answers, the follow's K, min_weight and retrieval) are arguments; nothing
is stored between calls, so the same question gets the same answer whatever came before it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from drkit.dense.mips import MIPS_KINDS, import_faiss
from drkit.dense.quantize import QUANTIZE, quantize_transformer
from drkit.errors import ConfigError, DrkitError, QuestionError
from drkit.qa.results import Answer, Hop, HopEntity, Passage, Result, evidence_of
from drkit.qa.settings import LoadConfig, QueryConfig  # also imported from here: the public names
from drkit.reader.reading import ReadConfig
from drkit.reason.follow import FollowConfig
from drkit.reason.model import MultiHopModel, model_dir_of
from drkit.reason.vkb import ParsedQuestion, VirtualKB, check_model_index, trained_mentions


def answered_alone_on_error(run, items: list) -> list:
    """``run(items)``; when it raises a `DrkitError`, each item alone, so that only the failing ones get
    their error (the exception, in the item's place)."""
    try:
        return list(run(items))
    except DrkitError:
        results: list = []
        for item in items:
            try:
                results.append(run([item])[0])
            except DrkitError as exc:
                results.append(exc)
        return results


MULTI_HOP = "multi-hop"  # `DrKIT.kind` of a `drkit train` model
HOP_MIXING = "hop-mixing"  # of a `drkit train-mixing` / `drkit reproduce-2wiki` model


class DrKIT:
    """A trained model over its virtual KB, ready to answer. Build with `DrKIT.load`."""

    def __init__(self, model, vkb: VirtualKB, retriever=None, reader=None, reading: ReadConfig = ReadConfig()):
        """`model`: a `MultiHopModel` on `vkb`; or a hop-mixing model, with `retriever` (its
        `drkit.qa.drkit_retriever.DrKITRetriever` on `vkb`); `reader`: a `drkit.reader.model.Reader` that reads the top
        ``reading.passages`` passages of each answered question (`drkit.reader.reading.ReadConfig`: with its
        ``compare``, the dates or countries read in those passages settle a which-of-two or same-country
        question where they can, `drkit.reader.compare`; without it the reader's answer stands alone)."""
        self.retriever = retriever
        self.vkb = vkb
        # the reader reads where the model answers, in its precision (`_read` hands it `read_compute`); an int8
        # reader (asked for, or given) in fp32 on the CPU, whatever `auto` chose for the model, as drkit answer reads
        # (a reader already there is left as it is: an index reload shares it with the kit still serving)
        self.read_compute = vkb.compute
        if reader is not None:  # an int8 one: a copy (a reader shared stays fp32), read in fp32 on the CPU
            reader, int8 = reader.for_reading(reading.reader_quantize)
            self.read_compute = int8 or vkb.compute
        if reader is not None and reader.device != self.read_compute.device:
            reader = reader.to(self.read_compute.device)
        self.reader = reader
        self.reading = reading
        if retriever is not None:
            self.kind, self.model = HOP_MIXING, retriever.model.eval()
            return
        check_model_index(model.manifest, vkb)
        model.set_entities(vkb.entity_names)
        self.kind, self.model = MULTI_HOP, model.to(vkb.compute.device).eval()

    @classmethod
    def load(cls, index: str | Path, model: str | Path, mentions: str | Path | None = None,
             config: LoadConfig = LoadConfig(), retriever_options: dict | None = None,
             reader=None, reading: ReadConfig = ReadConfig()) -> "DrKIT":
        """`index`: a ``drkit index`` directory; `model`: a model, or the run that trained it (``drkit train``:
        its best model; ``drkit train-mixing``: its model); `mentions`: the dense mention index, by default the
        one the model was trained with (give it for another corpus); `retriever_options`: a hop-mixing
        model's `drkit.qa.drkit_retriever.DrKITRetriever` arguments (`RetrieveConfig.retriever_options`); `reader`: a
        ``drkit train-reader`` reader (or run), or one loaded (`drkit.reader.model.Reader`), which then reads the
        top ``reading.passages`` passages of every answered question (`Result.reading`), settling which-of-two and
        same-country questions by the dates or countries read unless ``reading.compare`` is False, and reading a
        two-hop question as two one-hop questions (`Result.reading.steps`) unless ``reading.decompose`` is False
        (`drkit.reader.reading.ReadConfig`, `drkit.reader.compare`, `drkit.reader.decompose`)."""
        from drkit.reason.mixing import is_mixing_model

        search = cls._search_settings(config)
        # int8 answers on the CPU: with it, `auto` does not take a GPU
        device = "cpu" if config.quantize == "int8" and config.device == "auto" else config.device
        if not Path(model).exists():
            raise ConfigError(f"the model {model} does not exist")
        if reader is not None:
            from drkit.reader.model import Reader

            reader = Reader.loaded(reader)
        if is_mixing_model(model):
            from drkit.qa.drkit_retriever import DrKITRetriever

            r = DrKITRetriever.load(index, model, mentions, precision=config.precision, device=device,
                                    searcher=config.mips, search=search, **(retriever_options or {}))
            return cls._quantized(cls(r.model, r.vkb, r, reader, reading), config)
        model_dir = model_dir_of(model)
        net = MultiHopModel.load(model_dir)
        mentions = mentions or trained_mentions(model_dir, net.manifest)
        return cls._quantized(cls(net, VirtualKB.load(index, mentions, config.mips, config.precision, device,
                                                      **search),
                                  reader=reader, reading=reading), config)

    @staticmethod
    def _quantized(kit: "DrKIT", config: LoadConfig) -> "DrKIT":
        """`kit` with its question encoder quantised to int8 when `config.quantize` asks for it."""
        if config.quantize not in QUANTIZE:
            raise ConfigError(f"quantize must be one of {', '.join(QUANTIZE)}, got {config.quantize!r}")
        if config.quantize == "int8":
            quantize_transformer(kit.model, kit.vkb.compute.precision)
        return kit

    @staticmethod
    def _search_settings(config: LoadConfig) -> dict:
        """The MIPS settings of `config`, checked."""
        if config.mips not in MIPS_KINDS:
            raise ConfigError(f"mips must be one of {', '.join(MIPS_KINDS)}, got {config.mips!r}")
        if config.ann is not None and config.mips != "ivfpq":
            raise ConfigError("ann (a saved IVF-PQ index) goes with mips 'ivfpq'")
        if config.nprobe < 1 or config.rerank < 1:
            raise ConfigError(f"nprobe and rerank must be at least 1, got {config.nprobe} and {config.rerank}")
        search = {"exact": {}, "faiss": {"nprobe": config.nprobe},
                  "ivfpq": {"nprobe": config.nprobe, "rerank": config.rerank}}[config.mips]
        if config.mips != "exact":
            import_faiss()  # at load, not at the first question
        if config.ann:
            if not Path(config.ann).is_dir():
                raise ConfigError(f"the ANN index {config.ann} does not exist; build it with drkit ann")
            search["ann"] = config.ann
        return search

    @property
    def entity_names(self) -> list[str]:
        return self.vkb.entity_names

    @property
    def max_hops(self) -> int:
        return int(self.model.config.hops)

    def parse(self, question: str) -> ParsedQuestion:
        """The encoder text and question entity; `QuestionError` when there is none."""
        return self.vkb.parse(question)

    def answer(self, question: str | ParsedQuestion, top: int = 5, chain_top: int = 3,
               query: QueryConfig = QueryConfig(), passages: int = 0) -> Result:
        """Answers and reasoning chain of one question (a hop-mixing model's: with its best `passages`
        passages; with a reader, those it read that hold a supporting sentence first). Raises `QuestionError` for a
        question with no entity."""
        return self.answer_batch([question], top, chain_top, query, passages)[0]

    def retrieve(self, question: str, k: int = 10, query: QueryConfig = QueryConfig()) -> list[Passage]:
        """The best `k` passages for one question (module docstring), best first."""
        return self.retrieve_batch([question], k, query)[0]

    @torch.no_grad()
    def retrieve_batch(self, questions: Sequence[str], k: int = 10,
                       query: QueryConfig = QueryConfig()) -> list[list[Passage]]:
        """`retrieve` for many questions at once (one forward pass)."""
        if k < 1:
            raise ConfigError(f"k must be at least 1, got {k}")
        if not questions:
            return []
        if self.kind == HOP_MIXING:
            self._check_plain(questions)
            found = self.retriever.retrieve(list(questions), k, chain_top=0, answers=False,
                                            follow_config=self._mixing_follow_config(query))
            self._check_linked(questions, found)
            return [self._passages(r, k) for r in found]
        return [list(r.passages) for r in self._answer_batch(questions, 1, 0, query, k)]  # not read: the retriever's order

    @staticmethod
    def _check_plain(questions: Sequence) -> None:
        for q in questions:
            if not isinstance(q, str):
                raise ConfigError("a hop-mixing model reads plain questions (str), not parsed ones")
            if not q.strip():
                raise QuestionError("the question is empty")

    @staticmethod
    def _check_linked(questions: Sequence[str], found) -> None:
        """`QuestionError` for the first question the linker found no entity in (its Z_0 is empty: no hop
        can start)."""
        for q, r in zip(questions, found):
            if not r.question_entities:
                raise QuestionError(f"no entity of the index is named in the question {q!r} (the question linker "
                                    "found none)")

    def _mixing_follow_config(self, query: QueryConfig) -> FollowConfig | None:
        if query.hops is not None:
            raise ConfigError(f"hops: this hop-mixing model weighs 0..{self.max_hops} hops itself (pi); leave hops out")
        fc = query.follow_config(self.model.follow_config)
        if query.retrieval is None and self.vkb.searcher_kind != "exact":
            fc = dataclasses.replace(fc, retrieval="global")  # an approximate searcher is for global retrieval
        return None if fc is self.model.follow_config else fc

    def _passages(self, r, k: int) -> list[Passage]:
        """The first `k` passages of a `drkit.qa.retrieve.Retrieved`."""
        index, names = self.vkb.index, self.entity_names
        return [Passage(index.article_keys[a], index.article_titles[a], index.article_text(a), float(s),
                        bool(r.reached[i]), r.hops[i], names[r.entities[i]], int(a))
                for i, (a, s) in enumerate(zip(r.articles[:k], r.scores[:k]))]

    def _mixing_batch(self, questions: Sequence[str], top: int, chain_top: int, query: QueryConfig,
                      passages: int) -> list[Result]:
        self._check_plain(questions)
        fc = self._mixing_follow_config(query)
        found = self.retriever.retrieve(list(questions), max(passages, 1), chain_top=chain_top, answers=True,
                                        answer_top=top, follow_config=fc)
        self._check_linked(questions, found)
        index, names = self.vkb.index, self.entity_names
        results = []
        for q, r in zip(questions, found):
            chain = tuple(Hop(t, int(r.hop_sizes[t]), tuple(
                HopEntity(e["entity"], e["entity_id"], e["score"],
                          evidence_of(index, e["mention_id"]) if "mention_id" in e else None) for e in hop))
                for t, hop in enumerate(r.chain)) if chain_top > 0 else ()
            linked = r.question_entities[0] if r.question_entities else None
            results.append(Result(q, q, names[linked[0]] if linked else "", linked[0] if linked else -1,
                                  "linked (bigram TF-IDF over entity names), rescored by the question", self.max_hops,
                                  tuple(Answer(names[e], e, p) for e, p in r.answers or []), chain, tuple(r.pi),
                                  tuple(self._passages(r, passages)) if passages > 0 else ()))
        return results

    @torch.no_grad()
    def answer_batch(self, questions: Sequence[str | ParsedQuestion], top: int = 5, chain_top: int = 3,
                     query: QueryConfig = QueryConfig(), passages: int = 0) -> list[Result]:
        """`answer` for many questions at once (one forward pass). `chain_top=0` skips the chain. A
        multi-hop model's `passages`: those holding each hop's best entities' mentions (`retrieve`); with a reader,
        those read that hold a supporting sentence first (`_read`)."""
        if top < 1:
            raise ConfigError(f"top must be at least 1, got {top}")
        if passages < 0:
            raise ConfigError(f"passages must be at least 0, got {passages}")
        if not questions:
            return []
        if self.reader is not None:
            results = self._answer_batch(questions, top, chain_top, query, max(passages, self.reading.passages))
            return self._read(results, passages)
        return self._answer_batch(questions, top, chain_top, query, passages)

    def _read(self, results: list[Result], passages: int) -> list[Result]:
        """`results` with the reader's answer from each one's top passages (None where there is none), and their
        first `passages` passages, those read that hold a supporting sentence first (`drkit.qa.answer.supporting_first`:
        the reader's evidence orders the passages by the question where the retriever's scores do not; on 2Wiki's
        two folds passage R@2 0.812 -> 0.828, docs/reader.md).
        Each question is read alone: its answer does not depend on its batch, and at 512 word pieces batch 1 was
        the faster (126.8 against 137.6 ms a question at batch 8, `benchmarks/bench_reader.py`)."""
        from drkit.qa.results import held_first, reader_answer
        from drkit.reader.examples import ReaderExample, ReaderPassage

        out = []
        for i, r in enumerate(results):  # a question without passages is not read (`reading` stays None)
            read = r.passages[: self.reading.passages]
            ps = tuple(ReaderPassage(p.id, p.title, p.text) for p in read)
            reading = reader_answer(self.reader.read([ReaderExample(str(i), r.text, ps)], 1, compute=self.read_compute,
                                                     config=self.reading)[0], ps) if ps else None
            ranked = r.passages  # the sentences supporting it are in the passages read, so they come first
            if reading is not None:
                ranked = held_first(r.passages, {s.passage_id for s in reading.supporting}, key=lambda p: p.id)
            out.append(dataclasses.replace(r, passages=tuple(ranked[:passages]), reading=reading))
        return out

    def _answer_batch(self, questions, top: int, chain_top: int, query: QueryConfig, passages: int) -> list[Result]:
        if self.kind == HOP_MIXING:
            return self._mixing_batch(questions, top, chain_top, query, passages)
        parsed = [q if isinstance(q, ParsedQuestion) else self.parse(q) for q in questions]
        asked = [q if isinstance(q, str) else p.text for q, p in zip(questions, parsed)]
        if not parsed:
            return []
        fc = query.follow_config(self.model.follow_config)
        if query.retrieval is None and self.vkb.searcher_kind != "exact":
            fc = dataclasses.replace(fc, retrieval="global")  # an approximate searcher is for global retrieval
        topics = np.array([p.topic for p in parsed], dtype=np.int64)
        outs = self.model([p.text for p in parsed], topics, self.vkb, hops=query.hops, trace=chain_top > 0 or passages > 0,
                          follow_config=fc, precision=self.vkb.precision)
        ids, probs = outs[-1].z.top(top)  # (B, top)
        chains = self._chains(outs, topics, chain_top, fc) if chain_top > 0 else [()] * len(parsed)
        found = self._chains(outs, topics, passages, fc) if passages > 0 else [()] * len(parsed)
        names = self.entity_names
        return [Result(q, p.text, p.topic_name, p.topic, p.how, len(outs),
                       tuple(Answer(names[e], int(e), float(pr)) for e, pr in zip(ids[b], probs[b]) if e >= 0),
                       chains[b], passages=tuple(self._evidence_passages(found[b], passages)))
                for b, (q, p) in enumerate(zip(asked, parsed))]

    def _evidence_passages(self, chain: tuple[Hop, ...], k: int) -> list[Passage]:
        """A multi-hop model's passages: the article of each chain entity's supporting mention, scored by
        the entity's probability in its hop (an article reached twice keeps its best), best first."""
        index = self.vkb.index
        best: dict[int, tuple[float, int, str]] = {}
        for hop in chain:
            for e in hop.top:
                a = int(index.passage_article[e.evidence.passage_id])
                if a not in best or e.prob > best[a][0]:
                    best[a] = (e.prob, hop.hop, e.entity)
        order = sorted(best.items(), key=lambda kv: (-kv[1][0], kv[1][1], kv[0]))[:k]
        return [Passage(index.article_keys[a], index.article_titles[a], index.article_text(a), p, True, t, e, a)
                for a, (p, t, e) in order]

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
