"""`DrKITRetriever`: passages ranked by a trained hop-mixing model (the paper, 3.3), with its chain, pi and, when
asked, the entity answer; a `drkit.qa.retrieve.Retriever`, so that `drkit retrieve` runs and scores it as it does
the peers (`drkit.qa.peers`) and controls (`drkit.qa.controls`)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from drkit.data.asked import asked_kinds
from drkit.errors import ConfigError
from drkit.qa.answer_kinds import KIND_POOL, kinds_lost, prefer_kinds
from drkit.qa.retrieve import Retrieved
from drkit.reason.passages import ENTITIES, rank_passages
from drkit.util.runs import as_saved


class DrKITRetriever:
    """Passages ranked by a hop-mixing model's Z* (`drkit.reason.mixing`): the best entities, each replaced
    by its page, a page of several passages divided among them by the question (`drkit.reason.passages`:
    a passage's relevance r(a) is the best, over hops t and the mentions m in it, of
    ``log pi_t + f(m) . g_t / lambda``). Only passages the model reached are listed, unless `fill` is set:
    then the question linker's ranking follows, below them and marked unreached."""

    name = "drkit"

    def __init__(self, model, vkb, linker, entities: int = ENTITIES, chain_top: int = 3,
                 evidence: bool = True, answer_skips_named: bool = True, answer_top: int = 5,
                 answer_start: str = "named", answers: bool = True, fill: bool = True, answer_kinds: bool = True):
        from drkit.reason.passages import PageRanker

        self.model, self.vkb, self.linker = model, vkb, linker
        self.pages = PageRanker.from_index(vkb.index)
        self.entities, self.chain_top, self.evidence = entities, chain_top, evidence
        self.precision = vkb.precision  # the question encoder's setting, as the VirtualKB's scores
        # the answer is the last hop's best entity that the question does not name verbatim, as MetaQA's
        # question entity is removed from the answers: a chain that walks back to the question's own
        # entity (film -> director -> film) does not answer it
        self.answer_skips_named = answer_skips_named
        self.answer_top = answer_top  # entities kept in `Retrieved.answers`
        self.answer_kinds = answer_kinds  # entities of the kind the question asks for first (drkit.qa.answer_kinds)
        if answers and answer_kinds and kinds_lost(vkb.index):
            from drkit.util.hardware import say

            say(f"{vkb.index.path}: its entities were recognised before drkit index recorded their kinds, so the "
                "entity answer's kind filter (--answer-kinds) has none to use; build the index again to have it")
        # the answer's hops start from the entities the question names verbatim ("named"), as a bracketed
        # question's do, or from retrieval's linked Z_0 ("linked"); see RetrieveConfig.answer_start
        if answer_start not in ("named", "linked"):
            raise ConfigError(f"answer_start must be 'named' or 'linked', got {answer_start!r}")
        self.answer_start = answer_start
        self.names = vkb.entity_names
        # the entity answer (`Retrieved.answer(s)`): with answer_start "named" it costs a second pass of the
        # follows (the question's transformer layers, computed once, serve both passes), so passage retrieval
        # alone (answers=False) skips it
        self.answers = answers
        self.fill = fill  # the linker's ranking after the reached passages, marked unreached

    @classmethod
    def load(cls, index: str | Path, model: str | Path, mentions: str | Path | None = None, precision: str = "auto",
             searcher: str = "exact", search: dict | None = None, device: str = "auto", **kw) -> "DrKITRetriever":
        """A trained hop-mixing model (a ``drkit.mixing-model`` directory, or a training run holding one in
        ``model/``) on an index; the mention index defaults to the one it was trained with. `precision`:
        `drkit.util.hardware.PRECISIONS`; `searcher` and `search`: the MIPS of global retrieval and its
        settings (`drkit.reason.vkb.VirtualKB`); `device`: where the model and the mention scores compute."""
        from drkit.dense.mentions import MentionIndex
        from drkit.index.question_linking import QuestionLinkConfig, QuestionLinker
        from drkit.index.sparse import SparseIndex
        from drkit.reason.mixing import HopMixingModel, is_mixing_model, mixing_model_dir
        from drkit.reason.vkb import VirtualKB, trained_mentions

        model = Path(model)
        if not is_mixing_model(model):
            raise ConfigError(f"{model} is not a hop-mixing model (made by 'drkit reproduce-2wiki' or train_mixing)")
        model = mixing_model_dir(model)
        m = HopMixingModel.load(model)
        if mentions is None:
            mentions = trained_mentions(model, m.manifest)
        sparse = SparseIndex.load(index)
        mention_index = MentionIndex.load(mentions)
        trained = m.manifest.get("mentions", {}).get("encoder_sha256")
        used = mention_index.manifest.get("encoder", {}).get("sha256")
        if trained and used and trained != used:
            raise ConfigError(f"{mentions} was embedded by the encoder {mention_index.manifest['encoder'].get('path')} "
                              f"(sha256 {used[:12]}), but {model} was trained on mentions embedded by "
                              f"{m.manifest.get('encoder')} (sha256 {trained[:12]}): embed the corpus with "
                              f"'drkit embed --encoder {m.manifest.get('encoder')}'")
        vkb = VirtualKB(sparse, mention_index, searcher, precision, device, **(search or {}))
        m.base.set_entities(vkb.entity_names)
        m.to(vkb.compute.device)
        linker = QuestionLinker.from_index(sparse, as_saved(QuestionLinkConfig, m.manifest.get("link", {})))
        return cls(m, vkb, linker, **kw)

    def _evidence(self, z, trace, chain_ids: np.ndarray) -> list[list[dict | None]]:
        """For each row's chain entities of one hop, its best-scoring mention: the passage (corpus id), the
        title of its article and the mention's text."""
        index = self.vkb.index
        best = trace.best_mention(len(z))
        # the slot in Z of each (row, chain entity), then its best mention (-1: none); Z is sorted by (row, id)
        n = self.vkb.graph.n_entities
        keys = z.rows.numpy() * n + z.ids.numpy()
        ids = chain_ids.reshape(-1)
        wanted = np.repeat(np.arange(z.batch_size), chain_ids.shape[1]) * n + ids
        slot = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
        found = (ids >= 0) & (keys[slot] == wanted) if len(keys) else np.zeros(len(ids), dtype=bool)
        mention = np.where(found, best[slot] if len(keys) else -1, -1)
        have = np.flatnonzero(mention >= 0)
        rows_of = np.asarray(index.mentions[mention[have]])  # (n, 6): entity, passage, ..., char start, end
        articles = np.asarray(index.passage_article[rows_of[:, 1]]) if len(have) else np.zeros(0, np.int64)
        flat: list[dict | None] = [None] * len(ids)
        for i, m, (_, passage, _, _, c0, c1), article in zip(have.tolist(), mention[have].tolist(), rows_of.tolist(),
                                                             articles.tolist()):
            flat[i] = {"passage": self.pages.keys[article], "title": self.pages.titles[article],
                       "mention": index.passage_text(passage)[c0:c1], "mention_id": m}
        width = chain_ids.shape[1]
        return [flat[b * width:(b + 1) * width] for b in range(z.batch_size)]

    def retrieve(self, questions: Sequence[str], top: int, chain_top: int | None = None, answers: bool | None = None,
                 answer_top: int | None = None, follow_config=None) -> list[Retrieved]:
        """The best `top` passages of each question (at most: only reached ones, and the linker's when
        `fill`), with pi, the chain and, when `answers`, the entity answer. `chain_top`, `answers`,
        `answer_top` and `follow_config` (the follows' settings, used as given) override the retriever's for
        this call; without `follow_config`, an approximate searcher implies global retrieval."""
        from drkit.reason.train_mixing import linked_entity_set, named_entity_set

        if top < 1:
            raise ConfigError(f"top must be at least 1, got {top}")
        chain_top = self.chain_top if chain_top is None else chain_top
        answers = self.answers if answers is None else answers
        answer_top = self.answer_top if answer_top is None else answer_top
        linked = self.linker.link(list(questions))
        # the fallback ranking: the linker's, long enough for `top` (a second linking only when it is asked for)
        fill = self.linker.link(list(questions), top=top) if self.fill and self.linker.config.top < top else linked
        fc = follow_config
        if fc is None and self.vkb.searcher_kind != "exact":  # an approximate searcher is for global retrieval
            import dataclasses

            fc = dataclasses.replace(self.model.follow_config, retrieval="global")
        trace = self.evidence and chain_top > 0
        with torch.no_grad():
            named_ids = linked.named()
            linked_answers = answers and self.answer_start == "linked"
            out = self.model(list(questions), linked_entity_set(linked), self.vkb, precision=self.precision, trace=trace,
                             named=named_ids, follow_config=fc, answers=linked_answers)
            answer_z = out.answer if linked_answers else None
            if answers and self.answer_start == "named":
                answer_z = self.model.answer(list(questions), named_entity_set(linked), self.vkb, precision=self.precision,
                                             named=named_ids, follow_config=fc, encoded=out.encoded)
        fallback = [fill.row(b)[0] if self.fill else None for b in range(len(questions))]
        rankings = rank_passages(out, self.vkb, self.pages, top, self.model.follow_config.temperature, self.entities,
                                 fallback)
        chains = [z.top(chain_top) for z in out.z]
        named = [set(row[row >= 0].tolist()) if self.answer_skips_named else set() for row in named_ids]
        kinds = self.vkb.index.entities.kinds if self.answer_kinds else None
        if answer_z is not None:
            pool = max(answer_top, KIND_POOL if kinds is not None else 0)
            last_ids, last_probs = answer_z.top(pool + max(map(len, named), default=0))
        z0_ids, z0_probs = out.z[0].top(3)
        sizes = np.stack([np.bincount(z.rows.numpy(), minlength=len(questions)) for z in out.z], axis=1)
        evidence = [self._evidence(z, tr, cids) if tr is not None else None
                    for z, tr, (cids, _) in zip(out.z, out.traces, chains)]
        pi = out.pi.detach().double().numpy()
        hop_rows = [_by_row(z) for z in out.z]
        results = []
        for b, ranked in enumerate(rankings):
            chain = [[{"entity": self.names[int(e)], "entity_id": int(e), "score": round(float(p), 4),
                       **(ev[b][j] if ev is not None and ev[b][j] else {})}
                      for j, (e, p) in enumerate(zip(cids[b], cprobs[b])) if e >= 0]
                     for (cids, cprobs), ev in zip(chains, evidence)]
            hop_of = self._hops(hop_rows, pi[b], b, {p.entity for p in ranked if p.reached})
            found = None
            if answer_z is not None:
                found = prefer_kinds([(int(e), float(p)) for e, p in zip(last_ids[b], last_probs[b]) if e >= 0 and
                                      int(e) not in named[b]], kinds, asked_kinds(questions[b]) if kinds else None)
            results.append(Retrieved(
                [p.article for p in ranked], [p.score for p in ranked], pi=[round(float(x), 4) for x in pi[b]],
                chain=chain, answer=self.names[found[0][0]] if found else None,
                answers=found[:answer_top] if found is not None else None, reached=[p.reached for p in ranked],
                entities=[p.entity for p in ranked], hops=[hop_of.get(p.entity) if p.reached else None for p in ranked],
                hop_sizes=sizes[b].tolist(),
                question_entities=[(int(e), float(p)) for e, p in zip(z0_ids[b], z0_probs[b]) if e >= 0]))
        return results

    @staticmethod
    def _hops(hop_rows, pi_row: np.ndarray, b: int, entities: set[int]) -> dict[int, int]:
        """For each of `entities`, the hop t whose ``pi_t Z_t[e]`` gives it the most of its Z* score (the
        first such hop on a tie); `hop_rows`: `_by_row` of each Z_t."""
        best: dict[int, tuple[float, int]] = {}
        for t, (starts, ids, probs) in enumerate(hop_rows):
            lo, hi = starts[b], starts[b + 1]
            for e, p in zip(ids[lo:hi].tolist(), probs[lo:hi].tolist()):
                if e in entities and (e not in best or pi_row[t] * p > best[e][0]):
                    best[e] = (pi_row[t] * p, t)
        return {e: t for e, (_, t) in best.items()}


def _by_row(z) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An entity set's entries as numpy, row by row: (`EntitySet.row_starts`, entity ids, probabilities as float32)."""
    return z.row_starts(), z.ids.numpy(), z.probs.detach().float().numpy()
