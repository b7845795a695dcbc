"""What the HTTP API serves: one trained model over its index, loaded once, answering batches of questions
as JSON-ready dicts.

Two kinds of model sit behind the same API, both answering through the front door,
`drkit.qa.pipeline.DrKIT.answer_batch`, exactly as ``drkit ask`` does, with the virtual KB's settings
(`LoadConfig`: --mips, --ann, --nprobe, --rerank, --precision) honoured for both:

* a multi-hop model (``drkit train``: MetaQA-style questions, a bracketed or linked question entity, a fixed
  hop count);
* a hop-mixing model (``drkit train-mixing`` / ``drkit reproduce-2wiki``: plain questions of unknown hop
  count over a title-entity corpus), whose results add the ranked passages and the hop weights pi.

Every result has the same shape (see `Engine.run`); a question that cannot be answered (no entity of the
index named in it, or any other error of its own) gets ``{"question", "error"}`` in its place, and never
fails the other questions of its batch.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np

from drkit.errors import ConfigError, QuestionError
from drkit.qa.pipeline import HOP_MIXING, DrKIT, LoadConfig, QueryConfig, answered_alone_on_error
from drkit.qa.results import Evidence

ANSWERS = "answers"  # a multi-hop model: answers and chain
PASSAGES = "passages"  # a hop-mixing model: also the ranked passages and pi
MAX_TOP_K = 100


def evidence_dict(ev: Evidence) -> dict:
    return {"mention_id": ev.mention_id, "passage_id": ev.passage_id, "title": ev.title, "text": ev.text,
            "start": ev.start, "end": ev.end}


def chain_dicts(result) -> list[dict]:
    """The reasoning chain of a `drkit.qa.results.Result` as the API returns it."""
    return [{"hop": h.hop, "n_entities": h.n_entities, "entities": [
        {"entity": e.entity, "entity_id": e.entity_id, "score": e.prob,
         "via": e.evidence.via if e.evidence is not None else None,
         "evidence": evidence_dict(e.evidence) if e.evidence is not None else None} for e in h.top]}
        for h in result.chain]


def reading_dict(reading) -> dict:
    """The reader's answer of a result as the API returns it: ``answer``, ``type`` (span, yes, no), ``prob``, the
    span's ``passage_id``, ``in_title``, ``start``, ``end``; ``supporting`` sentences (``passage_id``, ``title``,
    ``sentence``, ``text``, ``prob``, ``start``, ``end`` in the passage text); ``evidence``: the passages read that
    hold the span or a supporting sentence (``id``, ``title``, ``text``)."""
    out = dataclasses.asdict(reading)
    out["answer"] = out.pop("text")
    out["evidence"] = [{"id": p.id, "title": p.title, "text": p.text} for p in reading.evidence]
    return out


def _sha256(path: Path) -> str | None:
    if not path.is_file():
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


class EngineUnavailable(RuntimeError):
    """The model cannot answer now (its process has exited or stopped answering); the server says 503."""


@dataclass(frozen=True)
class Request:
    """The settings a batch shares: requests are batched together only when these are equal."""

    top_k: int = 5
    hops: int | None = None
    chain: bool = True


def check_request(kind: str, max_hops: int, request: Request) -> None:
    """`ConfigError` naming the field when `request` cannot be run by a model of `kind` with `max_hops` hops."""
    if not 1 <= request.top_k <= MAX_TOP_K:
        raise ConfigError(f"top_k: must be between 1 and {MAX_TOP_K}, got {request.top_k}")
    if request.hops is not None:
        if kind == PASSAGES:
            raise ConfigError(f"hops: this hop-mixing model weighs 0..{max_hops} hops itself (pi); leave hops out")
        if not 1 <= request.hops <= max_hops:
            raise ConfigError(f"hops: this model has {max_hops} trained hops; got {request.hops}")


def entity_passages(index, entity_id: int, limit: int = 10) -> dict:
    """The passages of `index` (a `SparseIndex`) that mention entity `entity_id` (the first `limit`, in corpus
    order), each with the character offsets of its mentions, and its page (the articles titled by it) where it
    has one."""
    if not 0 <= entity_id < index.n_entities:
        raise ConfigError(f"entity_id: must be between 0 and {index.n_entities - 1}, got {entity_id}")
    indptr = index.entity_mention_indptr
    mention_ids = np.asarray(index.entity_mentions[indptr[entity_id]:indptr[entity_id + 1]])
    rows = np.asarray(index.mentions[mention_ids]) if len(mention_ids) else np.zeros((0, 6), dtype=np.int64)
    mentioning = np.unique(rows[:, 1])  # sorted: corpus order
    keep = np.isin(rows[:, 1], mentioning[:limit])
    passages: dict[int, list] = {}
    for m, row in zip(mention_ids[keep].tolist(), rows[keep].tolist()):
        passages.setdefault(row[1], []).append({"mention_id": m, "start": row[4], "end": row[5]})
    page_indptr, page_articles = index.entity_pages
    pages = [int(a) for a in page_articles[page_indptr[entity_id]:page_indptr[entity_id + 1]]]
    return {"entity": index.entities.names[entity_id], "entity_id": entity_id, "mentions": int(len(mention_ids)),
            "passages_mentioning": int(len(mentioning)),
            "passages": [{"passage_id": p, "title": index.article_titles[int(index.passage_article[p])],
                          "text": index.passage_text(p), "mentions": ms} for p, ms in sorted(passages.items())],
            "page": [{"id": index.article_keys[a], "title": index.article_titles[a]} for a in pages]}


class Engine:
    """A loaded model and index behind the API. Build with `Engine.load`; `run` is thread-safe only in the
    sense that it reads and never writes shared state: the server calls it from one worker thread."""

    def __init__(self, index_dir: Path, model_dir: Path, kit: DrKIT, chain_top: int = 3):
        self.kind = PASSAGES if kit.kind == HOP_MIXING else ANSWERS
        self.kit, self.chain_top = kit, chain_top
        self.vkb = kit.vkb
        self.index = self.vkb.index
        self.max_hops = kit.max_hops
        self.dirs = {"index": index_dir, "model": model_dir, "mentions": Path(self.vkb.mentions.path)}

    @classmethod
    def load(cls, index: str | Path, model: str | Path, mentions: str | Path | None = None,
             config: LoadConfig = LoadConfig(), chain_top: int = 3, reader: str | Path | None = None) -> "Engine":
        """The model of `model` (a ``drkit train`` or ``drkit train-mixing`` run, or its model directory) on the
        index `index`; the mention index defaults to the one the model was trained with; `reader`: a ``drkit
        train-reader`` reader, whose answer every result then carries (``reading``)."""
        from drkit.reason.mixing import is_mixing_model, mixing_model_dir
        from drkit.reason.model import model_dir_of

        if chain_top < 1:
            raise ConfigError(f"chain_top must be at least 1, got {chain_top}")
        if not Path(index).is_dir():
            raise ConfigError(f"the index {index} does not exist")
        if not Path(model).exists():
            raise ConfigError(f"the model {model} does not exist")
        kit = DrKIT.load(index, model, mentions, config, reader=reader)
        model_dir = mixing_model_dir(model) if is_mixing_model(model) else Path(model_dir_of(model))
        return cls(Path(index), model_dir, kit, chain_top=chain_top)

    # -- the API's answers -------------------------------------------------------------------------
    def check(self, request: Request) -> None:
        """`ConfigError` naming the field when `request` cannot be run by this model."""
        check_request(self.kind, self.max_hops, request)

    def run(self, questions: Sequence[str], request: Request = Request()) -> list[dict]:
        """One result per question, in order (module docstring). A result holds ``question``, ``answers``
        (``entity``, ``entity_id``, ``score``; best first, at most ``top_k``), ``hops`` and, with ``chain``,
        ``chain``: per hop, its number ``hop`` (0 is the linked Z_0 of a hop-mixing model), ``n_entities``
        and ``entities``, each with ``entity``, ``entity_id``, ``score``, ``via`` (the previous hop's entity
        that led to its passage, when known) and ``evidence``: ``mention_id``, ``passage_id``, ``title``,
        ``text`` and the mention's character offsets ``start``, ``end`` in ``text`` (null for an entity with
        no mention in that hop, e.g. the bracketed question entity). A hop-mixing model's results add ``pi`` and ``passages``: those
        it reached, best first, each with ``id`` (the corpus id), ``title``, ``score``, ``hop`` and ``entity``."""
        self.check(request)
        if self.kind == ANSWERS:
            return self._run_kit(list(questions), request)
        return self._run_retriever(list(questions), request)

    def run_json(self, questions: Sequence[str], request: Request = Request()) -> list[str]:
        """`run`, each result as its JSON text (what the server sends)."""
        return [json.dumps(r, ensure_ascii=False, allow_nan=False) for r in self.run(questions, request)]

    def _run_kit(self, questions: list[str], request: Request) -> list[dict]:
        parsed, errors = {}, {}
        for i, q in enumerate(questions):
            try:
                parsed[i] = self.kit.parse(q)
            except QuestionError as exc:
                errors[i] = str(exc)
        order = sorted(parsed)
        results = answered_alone_on_error(
            lambda batch: self.kit.answer_batch(batch, top=request.top_k, chain_top=self.chain_top if request.chain else 0,
                                                query=QueryConfig(hops=request.hops)), [parsed[i] for i in order])
        by_row = dict(zip(order, results))
        out = []
        for i, q in enumerate(questions):
            r = by_row.get(i)
            if i in errors or isinstance(r, Exception):
                out.append({"question": q, "error": errors.get(i) or str(r)})
                continue
            item = {"question": q, "text": r.text, "found_by": r.found_by,
                    "question_entities": [{"entity": r.question_entity, "entity_id": r.question_entity_id}],
                    "hops": r.hops,
                    "answers": [{"entity": a.entity, "entity_id": a.entity_id, "score": a.prob} for a in r.answers]}
            if request.chain:
                item["chain"] = chain_dicts(r)
            if r.reading is not None:
                item["reading"] = reading_dict(r.reading)
            out.append(item)
        return out

    def _run_retriever(self, questions: list[str], request: Request) -> list[dict]:
        results = answered_alone_on_error(
            lambda batch: self.kit.answer_batch(batch, top=request.top_k, chain_top=self.chain_top if request.chain else 0,
                                                passages=request.top_k), questions)
        out = []
        for q, r in zip(questions, results):
            if isinstance(r, Exception):
                out.append({"question": q, "error": str(r)})
                continue
            item = {"question": q, "text": q, "found_by": r.found_by,
                    "question_entities": [{"entity": e.entity, "entity_id": e.entity_id} for e in r.chain[0].top]
                    if r.chain else [{"entity": r.question_entity, "entity_id": r.question_entity_id}],
                    "hops": self.max_hops, "pi": list(r.pi),
                    "answers": [{"entity": a.entity, "entity_id": a.entity_id, "score": a.prob} for a in r.answers],
                    # the passages the model reached (the linker's fallback is not served)
                    "passages": [{"id": p.id, "title": p.title, "score": p.score, "hop": p.hop, "entity": p.entity}
                                 for p in r.passages if p.reached]}
            if request.chain:
                item["chain"] = chain_dicts(r)
            if r.reading is not None:
                item["reading"] = reading_dict(r.reading)
            out.append(item)
        return out

    # -- an entity's passages, and what is loaded ----------------------------------------------------
    def entity(self, entity_id: int, limit: int = 10) -> dict:
        """`entity_passages` of this engine's index."""
        return entity_passages(self.index, entity_id, limit)

    def info(self) -> dict:
        """What is served: the model's kind and hop count, the index's counts, and the manifests of the index,
        the mention index and the model (corpus, counts, versions, input checksums) with the sha256 of the
        model's weights."""
        from drkit import __version__

        model = self.kit.model
        loaded = {"index": self.index.manifest, "mentions": self.vkb.mentions.manifest, "model": model.manifest}
        manifests = {}
        for name, m in loaded.items():
            # without the list of arrays: long, and it says nothing a caller needs
            manifests[name] = {"path": str(self.dirs[name]), **{k: v for k, v in m.items() if k != "files"}}
        weights = self.dirs["model"] / "model.safetensors"
        manifests["model"]["weights_sha256"] = _sha256(weights)
        reader = self.kit.reader
        if reader is not None:
            manifests["reader"] = {"path": str(reader.path), **{k: v for k, v in reader.manifest.items()
                                                                  if k not in ("files", "settings")},
                                   "weights_sha256": _sha256(reader.path / "model.safetensors")}
        index = self.index
        return {"drkit_version": __version__, "kind": self.kind, "max_hops": self.max_hops,
                "counts": {"entities": index.n_entities, "mentions": index.n_mentions,
                           "passages": index.n_passages, "articles": len(index.article_titles)},
                "manifests": manifests}
