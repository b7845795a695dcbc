"""Multi-hop passage retrieval over a title-entity corpus (the paper, 3.3) and its scoring.

`drkit retrieve` reads questions as JSONL lines ``{"id", "question"}`` (other fields are ignored, except
``supporting``: the gold corpus ids, used for scoring when present, and ``type``, used to break the
scores down), asks a `Retriever` for the best passages of each, and writes:

* ``predictions.jsonl``: one ``{"id", "passages": [{"id": <corpus id>, "title", "score", "reached",
  "entity", "hop"}, ...], "pi", "chain", "answer"}`` per question, best passage first; ``reached`` is false
  for a passage the model did not reach (the question linker's ranking, listed after the reached ones),
  ``entity`` is the title entity that placed it and ``hop`` the hop that gave it most of its score;
* ``run.trec``: the ranking as a TREC run file (``qid Q0 docid rank score name``; the score column is
  ``n - rank + 1``, so that trec_eval and ir_measures read the ranking as written), and, with gold,
  ``qrels.trec``: the supporting passages as TREC qrels (``qid 0 docid 1``);
* ``metrics.json`` (when gold or answers are given): R@k (the mean over questions of the share of their supporting
  passages in the top k, HippoRAG's "passage recall") and AR@k (the share of questions with every
  supporting passage in the top k, the DrKIT paper's HotpotQA "accuracy@k") for each k up to ``top``,
  overall and per question type, with questions/s at batch 1 and at the batch size, and ``unreached``:
  per k, the mean number of unreached passages in the top k (they count in R@k as any other), and
  ``ir_measures``: R@k, nDCG@10 and MRR (``RR``) of the same rankings computed by ir_measures
  (pytrec_eval), which a test checks against drkit's own R@k;
* ``bad_lines.txt``: every line that could not be read, with file, line and reason (counted in
  metrics.json; a bad line never stops the run and is never silently dropped).

A `Retriever` is anything with ``retrieve(questions, top) -> list[Retrieved]``: `DrKITRetriever` (a
hop-mixing model: entities ranked by Z*, each replaced by its page), and the peers of
`drkit.qa.peers` (BM25, single-step dense retrieval), so that all are run and scored by the same code.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np
import torch

from drkit.errors import ConfigError
from drkit.qa.answer_kinds import KIND_POOL, asked_kinds, prefer_kinds
from drkit.qa.metrics import KS, answer_hits, ir_measures_metrics, question_ids, recall_metrics, write_trec_qrels, write_trec_run
from drkit.reason.passages import ENTITIES, rank_passages
from drkit.reason.quantize import QUANTIZE
from drkit.util.hardware import device_field, precision_field
from drkit.util.progress import progress
from drkit.util.runs import as_saved


@dataclass(frozen=True)
class RetrieveConfig:
    """Settings of `drkit retrieve`."""

    top: int = field(default=20, metadata={"help": "passages written per question, at most (R@k and AR@k are scored for "
                                                   "k = 2, 5, 10, 20 up to it)"})
    batch_size: int = field(default=64, metadata={"help": "questions per batch"})
    qps_sample: int = field(default=100, metadata={"help": "questions timed one at a time for questions/s at "
                                                            "batch 1 (0: skip)"})
    answer_start: str = field(default="named", metadata={
        "help": "where the hops that give a hop-mixing model's entity answer start: named (the entities the "
                "question names verbatim, as a bracketed entity; a second pass of the follows) or linked (the "
                "retrieval's Z_0 of bigram-TF-IDF-linked names, one pass)", "choices": ("named", "linked")})
    answers: bool = field(default=False, metadata={
        "help": "also give each question's entity answer (the last hop's best entity it does not name): with "
                "--answer-start named a second pass of the follows, so off by default"})
    answer_kinds: bool = field(default=True, metadata={"help": "entity answers known to be of another kind than the question "
                               "asks for (when: date, who: person, where: place) go last (--entities ner gives kinds)"})
    fill: bool = field(default=True, metadata={
        "help": "after the passages the model reached, list the question linker's ranking, marked \"reached\": "
                "false and counted in metrics.json (off: only reached passages, maybe fewer than --top)"})
    precision: str = precision_field("the question encoder and the mention scores")
    device: str = device_field("the question encoder and the mention scores")
    quantize: str = field(default="none", metadata={
        "help": "int8: the question encoder's transformer layers as int8 dynamic quantisation (CPU, fp32; "
                "benchmarks/bench_quantize.py measures its speed and recall against fp32)", "choices": QUANTIZE})

    def __post_init__(self):
        if self.top < 1 or self.batch_size < 1 or self.qps_sample < 0:
            raise ConfigError(f"top and batch_size must be at least 1 and qps_sample at least 0, got {self.top}, "
                              f"{self.batch_size} and {self.qps_sample}")
        if self.answer_start not in ("named", "linked"):
            raise ConfigError(f"answer_start must be 'named' or 'linked', got {self.answer_start!r}")

    def retriever_options(self) -> dict:
        """The `DrKITRetriever` arguments these settings give."""
        return {"answer_start": self.answer_start, "answers": self.answers, "fill": self.fill, "answer_kinds": self.answer_kinds}


@dataclass
class Retrieved:
    """The passages found for one question, best first: article ids of the index and their scores."""

    articles: list[int]
    scores: list[float]
    pi: list[float] | None = None  # hop-mixing weights pi_0 .. pi_T
    chain: list | None = None  # per hop, the best entities: [{"entity", "score", "passage", "title", "mention"}, ...]
    # (passage, title, mention, mention_id: the entity's best-scoring mention in that hop, when it has one)
    answer: str | None = None  # the last hop's best entity the question does not name (multi-hop slot filling)
    answers: list[tuple[int, float]] | None = None  # the last hop's best entities the question does not name,
    # (entity id, probability), best first: `answer` and those after it
    reached: list[bool] | None = None  # per article: reached by the model (False: the question linker's ranking,
    # listed after the reached ones); None: all reached (a peer)
    entities: list[int] | None = None  # per article: the title entity that placed it
    hops: list[int | None] | None = None  # per reached article: the hop t whose pi_t Z_t gave its entity the most
    hop_sizes: list[int] | None = None  # per hop t = 0..T: the entities of Z_t with non-zero probability
    question_entities: list[tuple[int, float]] | None = None  # Z_0's best entities (linked, rescored), best first


class Retriever(Protocol):
    name: str

    def retrieve(self, questions: Sequence[str], top: int) -> list[Retrieved]: ...


@dataclass
class Question:
    id: str
    question: str
    supporting: list[str] | None
    type: str | None
    line: int
    answers: list[str] | None = None


def read_questions(path: str | Path) -> tuple[list[Question], list[str]]:
    """The usable questions of a JSONL file and one message per bad line (file:line: reason). A line is
    bad when it is not a JSON object, has no non-empty "question" string, or has a "supporting" that is
    not a list of ids; a blank line is not a question and not bad."""
    from drkit.data.lines import read_lines

    path = Path(path)
    items, bad = [], []
    for line_no, line in read_lines(path, "question file"):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError) as exc:
            bad.append(f"{path}:{line_no}: not valid JSON ({str(exc).split(':')[0]})")
            continue
        if not isinstance(obj, dict):
            bad.append(f"{path}:{line_no}: expected a JSON object, got {type(obj).__name__}")
            continue
        q = obj.get("question")
        if not isinstance(q, str) or not q.strip():
            bad.append(f"{path}:{line_no}: field 'question' must be a non-empty string")
            continue
        sup = obj.get("supporting")
        if sup is not None and (not isinstance(sup, list) or not all(isinstance(s, (str, int)) for s in sup)):
            bad.append(f"{path}:{line_no}: field 'supporting' must be a list of corpus ids")
            continue
        qtype, answers = obj.get("type"), obj.get("answers")
        answers = [a for a in answers if isinstance(a, str) and a.strip()] if isinstance(answers, list) else None
        items.append(Question(str(obj.get("id", line_no)), q.strip(), [str(s) for s in sup] if sup is not None else None,
                              qtype if isinstance(qtype, str) else None, line_no, answers or None))
    return items, bad


def passage_dicts(r: Retrieved, keys: list[str], titles: list[str], names: list[str] | None = None,
                  top: int | None = None) -> list[dict]:
    """The passages of `r` as JSON objects: ``id`` (corpus id), ``title``, ``score``, ``reached`` and, where
    known, ``entity`` (the title entity that placed it) and ``hop``; the first `top` (None: all)."""
    out = []
    for i, (a, s) in enumerate(zip(r.articles[:top], r.scores[:top])):
        item = {"id": keys[a], "title": titles[a], "score": round(float(s), 5),
                "reached": bool(r.reached[i]) if r.reached is not None else True}
        if r.entities is not None and names is not None:
            item["entity"] = names[r.entities[i]]
        if r.hops is not None:
            item["hop"] = r.hops[i]
        out.append(item)
    return out


def run_retrieval(retriever: Retriever, keys: list[str], titles: list[str], questions: str | Path, out: str | Path,
                  config: RetrieveConfig = RetrieveConfig(), log=print) -> dict:
    """Retrieve for every question of `questions`, write OUT/predictions.jsonl, OUT/bad_lines.txt and (with
    gold) OUT/metrics.json; return the metrics. `keys` and `titles` are the corpus ids and titles of the
    index's articles."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    items, bad = read_questions(questions)
    (out / "bad_lines.txt").write_text("".join(b + "\n" for b in bad), encoding="utf-8")
    for b in bad[:5]:
        log(f"skipped {b}")
    if len(bad) > 5:
        log(f"... {len(bad) - 5} more bad lines, all in {out / 'bad_lines.txt'}")
    results: list[Retrieved] = []
    names = getattr(retriever, "names", None)  # entity names, for a retriever that says which entity placed a passage
    ks = [k for k in KS if k <= config.top] or [config.top]
    t0 = time.perf_counter()
    with progress(total=len(items), desc=f"retrieve ({retriever.name})", unit="q") as bar:
        for s in range(0, len(items), config.batch_size):
            batch = items[s:s + config.batch_size]
            results += retriever.retrieve([q.question for q in batch], config.top)
            bar.update(len(batch))
    batch_s = time.perf_counter() - t0
    ranked = []
    with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
        for q, r in zip(items, results):
            ranked.append([keys[a] for a in r.articles])
            f.write(json.dumps({"id": q.id, "passages": passage_dicts(r, keys, titles, names),
                                "pi": r.pi, "chain": r.chain, "answer": r.answer}, ensure_ascii=False) + "\n")
    metrics: dict = {"retriever": retriever.name, "questions_file": str(questions), "questions": len(items),
                     "bad_lines": len(bad), "top": config.top,
                     f"batch_{config.batch_size}_questions_per_s": round(len(items) / batch_s, 2) if items else None}
    sample = items[:config.qps_sample]
    if sample:
        retriever.retrieve([sample[0].question], config.top)  # warm-up
        t = time.perf_counter()
        for q in sample:
            retriever.retrieve([q.question], config.top)
        metrics["batch_1_questions_per_s"] = round(len(sample) / (time.perf_counter() - t), 2)
        metrics["batch_1_sample"] = len(sample)
    qids = question_ids(items)
    write_trec_run(out / "run.trec", qids, ranked, retriever.name)
    if any(q.supporting is not None for q in items):
        metrics.update(recall_metrics(ranked, [q.supporting or [] for q in items], [q.type for q in items], ks))
        gold = {qid: q.supporting for qid, q in zip(qids, items) if q.supporting}
        write_trec_qrels(out / "qrels.trec", gold)
        metrics["ir_measures"] = ir_measures_metrics(gold, dict(zip(qids, ranked)), ks)
    metrics["unreached"] = {f"@{k}": round(float(np.mean([sum(not x for x in (r.reached or [])[:k]) for r in results])), 4)
                            if results else None for k in ks}
    if any(r.answer is not None for r in results) and any(q.answers for q in items):
        metrics["answers"] = answer_hits(results, items)
    if "overall" in metrics or "answers" in metrics:
        (out / "metrics.json").write_text(json.dumps(metrics, indent=1) + "\n")
    return metrics


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
        # the answer's hops start from the entities the question names verbatim ("named"), as a bracketed
        # question's do, or from retrieval's linked Z_0 ("linked"); see RetrieveConfig.answer_start
        if answer_start not in ("named", "linked"):
            raise ConfigError(f"answer_start must be 'named' or 'linked', got {answer_start!r}")
        self.answer_start = answer_start
        self.names = vkb.entity_names
        # the entity answer (`Retrieved.answer(s)`): with answer_start "named" it costs a second pass of the
        # follows, so passage retrieval alone (answers=False) skips it
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
        from drkit.reason.vkb import VirtualKB

        model = Path(model)
        if not is_mixing_model(model):
            raise ConfigError(f"{model} is not a hop-mixing model (made by 'drkit reproduce-2wiki' or train_mixing)")
        model = mixing_model_dir(model)
        m = HopMixingModel.load(model)
        if mentions is None:
            mentions = m.manifest.get("mentions", {}).get("path")
            if mentions is None:
                raise ConfigError(f"{model} does not name its mention index; pass --mentions")
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
        z_rows, z_ids = z.rows.numpy(), z.ids.numpy()
        starts = np.searchsorted(z_rows, np.arange(z.batch_size + 1))
        out = []
        for b in range(z.batch_size):
            lo, hi = starts[b], starts[b + 1]
            row = []
            for e in chain_ids[b]:
                slot = lo + int(np.searchsorted(z_ids[lo:hi], e)) if e >= 0 else -1
                m = int(best[slot]) if 0 <= slot < hi and z_ids[slot] == e else -1
                if m < 0:
                    row.append(None)
                    continue
                _, passage, _, _, c0, c1 = (int(x) for x in index.mentions[m])
                article = int(index.passage_article[passage])
                row.append({"passage": self.pages.keys[article], "title": self.pages.titles[article],
                            "mention": index.passage_text(passage)[c0:c1], "mention_id": m})
            out.append(row)
        return out

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
                                             named=named_ids, follow_config=fc)
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
        results = []
        for b, ranked in enumerate(rankings):
            chain = [[{"entity": self.names[int(e)], "entity_id": int(e), "score": round(float(p), 4),
                       **(ev[b][j] if ev is not None and ev[b][j] else {})}
                      for j, (e, p) in enumerate(zip(cids[b], cprobs[b])) if e >= 0]
                     for (cids, cprobs), ev in zip(chains, evidence)]
            hop_of = self._hops(out.z, pi[b], b, {p.entity for p in ranked if p.reached})
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
    def _hops(sets, pi_row: np.ndarray, b: int, entities: set[int]) -> dict[int, int]:
        """For each of `entities`, the hop t whose ``pi_t Z_t[e]`` gives it the most of its Z* score."""
        best: dict[int, tuple[float, int]] = {}
        for t, z in enumerate(sets):
            e_ids, e_probs = z.row(b)
            for e, p in zip(e_ids.tolist(), e_probs.tolist()):
                if e in entities and (e not in best or pi_row[t] * p > best[e][0]):
                    best[e] = (pi_row[t] * p, t)
        return {e: t for e, (_, t) in best.items()}
