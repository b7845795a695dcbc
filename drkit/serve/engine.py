"""What the HTTP API serves: one trained model over its index, loaded once, answering batches of questions
as JSON-ready dicts.

Two kinds of model sit behind the same API, both answering through the front door,
`drkit.qa.pipeline.DrKIT.answer_batch`, exactly as ``drkit ask`` does, with the virtual KB's settings
(`LoadConfig`: --mips, --ann, --nprobe, --rerank, --precision, --device) honoured for both:

* a multi-hop model (``drkit train``: MetaQA-style questions, a bracketed or linked question entity, a fixed
  hop count);
* a hop-mixing model (``drkit train-mixing`` / ``drkit reproduce-2wiki``: plain questions of unknown hop
  count over a title-entity corpus), whose results add the ranked passages and the hop weights pi.

Every result has the same shape (see `Engine.run`); a question that cannot be answered (no entity of the
index named in it, or any other error of its own) gets ``{"question", "error"}`` in its place, and never
fails the other questions of its batch.

What goes through the server's one queue is a batch of items with a key: questions with their `Request`,
entity ids with an `EntityLookup`, or one `InfoLookup` (`Engine.run_json` tells them apart), so that every
call that touches the index is bounded by the same queue and computed where the index is loaded.

**Live updates.** An engine loaded with `Engine.load` watches its index's version file (``INDEX/CURRENT``,
`drkit.index.live`) and the manifests of its index and mention index: when ``drkit add`` or ``remove`` make a
new version (or an ``--overwrite`` swaps a new folder in), `refresh` loads it beside the one being served,
warms it up, and then replaces it in one assignment. A batch reads the
version once, when it starts: it finishes on the version it started on, and the next batch runs on the new
one. The old one is freed when its last batch is done. Each result names its ``index_version``.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from drkit.errors import ConfigError, QuestionError
from drkit.qa.pipeline import HOP_MIXING, DrKIT, LoadConfig, QueryConfig, answered_alone_on_error
from drkit.reader.decompose import Decomposer
from drkit.reader.reading import ReadConfig
from drkit.reason.vkb import ParsedQuestion
from drkit.serve.versions import manifest_stamps, on_disk, served_version
from drkit.serve.views import (
    ANSWERS,
    PASSAGES,
    EntityLookup,
    InfoLookup,
    Request,
    chain_dicts,
    check_request,
    entity_passages,
    reading_dict,
    sha256_of,
)

log = logging.getLogger("drkit.serve")


@dataclass(frozen=True)
class _Served:
    """One version of the index with the model over it: what a batch runs on from its start to its end, and
    what was on disk when it was loaded (`on_disk`)."""

    kit: DrKIT
    version: int
    on_disk: tuple


class Engine:
    """A loaded model and index behind the API. Build with `Engine.load`; `run` is thread-safe only in the
    sense that it reads and never writes shared state: the server calls it from one worker thread (and a
    live update, `refresh`, from another, which swaps the version in one assignment)."""

    def __init__(self, index_dir: Path, model_dir: Path, kit: DrKIT, chain_top: int = 3,
                 reload: Callable[[], DrKIT] | None = None, seen: tuple | None = None):
        """`seen`: `on_disk(index_dir)` as read before `kit` was loaded."""
        self.kind = PASSAGES if kit.kind == HOP_MIXING else ANSWERS
        self.chain_top = chain_top
        self.max_hops = kit.max_hops
        self.index_dir, self.model_dir = Path(index_dir), Path(model_dir)
        self._reload = reload  # a fresh DrKIT over the index as it is now (None: this engine never reloads)
        before = seen if seen is not None else on_disk(index_dir)  # read before the load: a version added
        self._served = _Served(kit, served_version(kit, before[0]),  # meanwhile is loaded at the next look
                               before + manifest_stamps(kit.vkb.mentions.path))
        self._refresh_lock = threading.Lock()
        self._failure: tuple | None = None  # (on_disk, next try, tries) of what failed to load: tried with back-off
        self._last_error = ""
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self.reloads = 0
        self.reload_failures = 0
        self.warm_up_s: float | None = None
        self._checksums: dict[Path, str | None] = {}

    @classmethod
    def load(cls, index: str | Path, model: str | Path, mentions: str | Path | None = None,
             config: LoadConfig = LoadConfig(), chain_top: int = 3, reader=None,
             reading: ReadConfig = ReadConfig()) -> "Engine":
        """The model of `model` (a ``drkit train`` or ``drkit train-mixing`` run, or its model directory) on the
        index `index`; the mention index defaults to the one the model was trained with; `reader`: a ``drkit
        train-reader`` reader (or one loaded, `drkit.reader.model.Reader`), loaded once (an index reload keeps it),
        whose answer every result then carries (``reading``), read as `reading` says (as `DrKIT.load`). `refresh`
        loads a later version of the index with the same settings."""
        from drkit.reason.mixing import is_mixing_model, mixing_model_dir
        from drkit.reason.model import model_dir_of

        if chain_top < 1:
            raise ConfigError(f"chain_top must be at least 1, got {chain_top}")
        if not Path(index).is_dir():
            raise ConfigError(f"the index {index} does not exist")
        if not Path(model).exists():
            raise ConfigError(f"the model {model} does not exist")

        if reader is not None:  # loaded once: a reload of the index keeps it (the reader is not watched)
            from drkit.reader.model import Reader

            reader = Reader.loaded(reader)

        def load_kit() -> DrKIT:
            return DrKIT.load(index, model, mentions, config, reader=reader, reading=reading)

        model_dir = mixing_model_dir(model) if is_mixing_model(model) else Path(model_dir_of(model))
        seen = on_disk(index)
        return cls(Path(index), model_dir, load_kit(), chain_top=chain_top, reload=load_kit, seen=seen)

    # -- the version served ------------------------------------------------------------------------
    @property
    def kit(self) -> DrKIT:
        return self._served.kit

    @property
    def vkb(self):
        return self._served.kit.vkb

    @property
    def index(self):
        return self._served.kit.vkb.index

    @property
    def version(self) -> int:
        """The index version being served (``INDEX/CURRENT``)."""
        return self._served.version

    def warm_up(self, kit: DrKIT | None = None) -> float:
        """Run one question through every lazily built part of `kit` (default: the one served): the MIPS index (FAISS,
        IVF-PQ), the question linker, the vectors, the reader and its parser. Raises what they raise (an ANN that does
        not match, faiss missing), so that a server fails at start, not on its first request. Seconds taken."""
        kit = kit or self.kit
        t0 = time.perf_counter()
        index = kit.vkb.index
        if self.kind == ANSWERS:
            counts = np.diff(np.asarray(index.entity_mention_indptr))
            entity = int(np.argmax(counts > 0)) if len(counts) else 0
            name = index.entities.names[entity]
            try:  # builds the linker of plain questions; a name it does not find is no failure
                kit.parse(f"what is {name}")
            except QuestionError:
                pass
            kit.answer_batch([ParsedQuestion(f"what is {name}", entity, name, "bracketed")], top=1, chain_top=1)
        else:
            kit.answer_batch([index.article_titles[0] if len(index.article_titles) else "warm-up"], top=1,
                             chain_top=1, passages=1)
        if kit.reader is not None and kit.reading.decompose:  # the parser of two-hop questions, loaded once
            Decomposer.shared()
        took = time.perf_counter() - t0
        if kit is self.kit:
            self.warm_up_s = took
        return took

    def refresh(self) -> bool:
        """Serve the index as it is on disk if it is not what is served (a new CURRENT version, or a folder
        swapped in by ``--overwrite``): load it beside the served one, warm it up, then swap (between batches: a
        batch holds the version it started on). True if it swapped. A load that fails is logged, the served
        version stays, and it is tried again after a back-off (5 s, doubling up to 5 minutes)."""
        if self._reload is None:
            return False
        with self._refresh_lock:
            served = self._served
            try:
                now = on_disk(self.index_dir, served.kit.vkb.mentions.path)
            except Exception as exc:  # an unreadable CURRENT: keep serving what is loaded
                self._note_failure(("unreadable",), exc)
                return False
            if now == served.on_disk:
                self._failure = None
                return False
            if self._failure is not None and self._failure[0] == now and time.monotonic() < self._failure[1]:
                return False
            t0 = time.perf_counter()
            try:
                kit = self._reload()
                self.warm_up(kit)
                version = served_version(kit, now[0])
            except Exception as exc:
                self._note_failure(now, exc)
                return False
            self._served = _Served(kit, version, now)  # the swap: one assignment, read once by each batch
            self.reloads += 1
            self._failure, self._last_error = None, ""
            log.info("drkit serve: now serving index version %d (loaded and warmed up in %.1f s)", version,
                     time.perf_counter() - t0)
            return True

    def _note_failure(self, seen: tuple, exc: Exception) -> None:
        tries = self._failure[2] + 1 if self._failure is not None and self._failure[0] == seen else 1
        self._failure = (seen, time.monotonic() + min(300.0, 5.0 * 2 ** (tries - 1)), tries)
        self.reload_failures += 1
        message = f"{type(exc).__name__}: {exc}"
        if message != self._last_error:  # said once, not at every look
            log.error("drkit serve: the index as it is on disk could not be loaded (still serving version %d; "
                      "tried again with a back-off): %s", self._served.version, message)
        self._last_error = message

    def watch(self, interval_s: float) -> None:
        """Call `refresh` every `interval_s` seconds in a daemon thread until `stop_watching` (0: never)."""
        if interval_s <= 0 or self._watcher is not None or self._reload is None:
            return

        def loop():
            while not self._stop.wait(interval_s):
                self.refresh()

        self._watcher = threading.Thread(target=loop, name="drkit-index-watch", daemon=True)
        self._watcher.start()

    def stop_watching(self) -> None:
        self._stop.set()
        if self._watcher is not None:
            self._watcher.join(5.0)

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
        served = self._served  # read once: the whole batch runs on this version
        run = self._run_kit if self.kind == ANSWERS else self._run_retriever
        results = run(served.kit, list(questions), request)
        for r in results:
            r["index_version"] = served.version
        return results

    def run_json(self, items: Sequence, key=Request()) -> list[str]:
        """The JSON text of each item's result (what the server sends): `run` of questions for a `Request`,
        `entity` of entity ids for an `EntityLookup` (an id out of range gets ``{"error", "status": 404}``),
        `info` for an `InfoLookup`."""
        if isinstance(key, EntityLookup):
            results = []
            for entity_id in items:
                try:
                    results.append(self.entity(int(entity_id), key.limit))
                except ConfigError as exc:
                    results.append({"error": str(exc), "status": 404})
        elif isinstance(key, InfoLookup):
            results = [self.info() for _ in items]
        else:
            results = self.run(items, key)
        return [json.dumps(r, ensure_ascii=False, allow_nan=False, default=str) for r in results]

    def _run_kit(self, kit: DrKIT, questions: list[str], request: Request) -> list[dict]:
        parsed, errors = {}, {}
        for i, q in enumerate(questions):
            try:
                parsed[i] = kit.parse(q)
            except QuestionError as exc:
                errors[i] = str(exc)
        order = sorted(parsed)
        results = answered_alone_on_error(
            lambda batch: kit.answer_batch(batch, top=request.top_k, chain_top=self.chain_top if request.chain else 0,
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

    def _run_retriever(self, kit: DrKIT, questions: list[str], request: Request) -> list[dict]:
        results = answered_alone_on_error(
            lambda batch: kit.answer_batch(batch, top=request.top_k, chain_top=self.chain_top if request.chain else 0,
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
    def _weights_sha256(self, directory: Path) -> str | None:
        """The sha256 of the weights in `directory`, computed once (a reload keeps the same model and reader)."""
        if directory not in self._checksums:
            self._checksums[directory] = sha256_of(Path(directory) / "model.safetensors")
        return self._checksums[directory]

    def entity(self, entity_id: int, limit: int = 10) -> dict:
        """`entity_passages` of this engine's index."""
        return entity_passages(self.index, entity_id, limit)

    def info(self) -> dict:
        """What is served: the model's kind and hop count, where and in what it computes (`compute`: precision,
        device and why), the index's counts, and the manifests of the index,
        the mention index and the model (corpus, counts, versions, input checksums) with the sha256 of the
        model's weights."""
        from drkit import __version__

        served = self._served
        kit = served.kit
        index, mentions = kit.vkb.index, kit.vkb.mentions
        loaded = {"index": (self.index_dir, index.manifest), "mentions": (Path(mentions.path), mentions.manifest),
                  "model": (self.model_dir, kit.model.manifest)}
        manifests = {}
        for name, (path, m) in loaded.items():
            # without the list of arrays: long, and it says nothing a caller needs
            manifests[name] = {"path": str(path), **{k: v for k, v in m.items() if k != "files"}}
        manifests["model"]["weights_sha256"] = self._weights_sha256(self.model_dir)
        reader = kit.reader
        if reader is not None:
            manifests["reader"] = {"path": str(reader.path), **{k: v for k, v in reader.manifest.items()
                                                                  if k not in ("files", "settings")},
                                   "weights_sha256": self._weights_sha256(reader.path),
                                   "quantize": kit.reader.quantize,  # int8: drkit serve --reader-quantize int8
                                   "compute": {"precision": kit.read_compute.precision,  # int8: fp32 on the CPU
                                               "device": kit.read_compute.device.type, "reason": kit.read_compute.reason},
                                   "compare": kit.reading.compare,  # the comparison rules on (drkit serve --no-compare: off)
                                   "skip_bridges": kit.reading.skip_bridges,  # drkit serve --skip-bridges
                                   "span_checks": kit.reading.span_checks,  # on unless drkit serve --no-span-checks
                                   "decompose": kit.reading.decompose and Decomposer.shared() is not None}  # no spaCy: off
        return {"drkit_version": __version__, "kind": self.kind, "max_hops": self.max_hops,
                "index_version": served.version, "reloads": self.reloads, "reload_failures": self.reload_failures,
                "warm_up_s": None if self.warm_up_s is None else round(self.warm_up_s, 3),
                "compute": {"precision": kit.vkb.compute.precision, "device": kit.vkb.compute.device.type,
                            "reason": kit.vkb.compute.reason},
                "counts": {"entities": index.n_entities, "mentions": index.n_mentions,
                           "passages": index.n_passages, "articles": len(index.article_titles)},
                "manifests": manifests}
