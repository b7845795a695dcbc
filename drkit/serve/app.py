"""The HTTP API and web page (FastAPI): ``create_app(engine, config)``.

Endpoints:

* ``POST /v1/ask``: ``{"question": "..."}`` or ``{"questions": ["...", ...]}``, with optional ``top_k``
  (answers and passages returned per question, default 5), ``hops`` (at most the model's; a hop-mixing model
  weighs its hops itself) and ``chain`` (the reasoning chain, default true). Returns ``{"results": [...],
  "took_ms"}``: one result per question, in order (`drkit.serve.engine.Engine.run`).
* ``GET /v1/entities/{entity_id}``: the passages that mention an entity, with the mentions' offsets (the web
  page's expandable entities). Through the same bounded queue as questions.
* ``GET /healthz`` (the server is up; it stays up while a dead model process is started again),
  ``GET /readyz`` (index and model loaded and warmed up, the model process up, not shutting down),
  ``GET /v1/info`` (the manifests of the index, mentions and model, the index version; paths cut to their
  names and command lines left out unless `expose_paths`), ``GET /metrics`` (Prometheus text format),
  ``/docs`` (the OpenAPI page, served offline) and ``/openapi.json``.
* ``GET /``: the web page (``drkit/serve/static``: HTML, CSS and JavaScript, nothing fetched from elsewhere,
  every URL relative so that the page works under a proxy's path prefix, `root_path`).

Limits: a body of at most `max_body_bytes` (413), at most `max_questions` questions of at most `max_chars`
characters each (422 naming the field), a bounded queue (503 with Retry-After). Every error is JSON,
``{"error": message, "fields": [{"field", "message"}]}`` where fields are at fault, and never a stack trace.
Every response carries ``X-Request-ID`` (the client's, if it sent a sane one, else a new one), which the
access log (one JSON line per request, logger ``drkit.serve.access``) names too.
"""


import asyncio
import json
import logging
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated

from drkit.errors import ConfigError
from drkit.serve.batching import Batcher, NotRunning, QueueFull
from drkit.serve.config import ServeConfig
from drkit.serve.engine import Engine
from drkit.serve.metrics import Metrics
from drkit.serve.middleware import BodyLimit, RequestLog, error_response
from drkit.serve.views import MAX_TOP_K, EngineUnavailable, EntityLookup, InfoLookup, Request, redacted

STATIC = Path(__file__).parent / "static"
log = logging.getLogger("drkit.serve")


async def _disconnected(http) -> None:
    """Returns when the client of `http` (a Starlette request whose body has been read) disconnects."""
    while (await http.receive())["type"] != "http.disconnect":
        pass


def create_app(engine: Engine, config: ServeConfig = ServeConfig()):
    """The FastAPI app serving `engine` (module docstring): an `Engine`, or a `drkit.serve.worker.ModelProcess`
    (the same interface, the model in a child process), warmed up by the caller. Its batch worker runs while
    the app's lifespan does; the engine's lifetime is the caller's. ``app.state.drain_by(deadline)`` (a
    `time.monotonic` time; callable from a signal handler) is how the server says it must stop by then: the
    requests still in the queue at 70% of the time left get 503, and the lifespan's drain ends by it."""
    from fastapi import Request as HTTPRequest
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import FileResponse, JSONResponse, Response
    from fastapi.staticfiles import StaticFiles
    from fastapi_offline import FastAPIOffline
    from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator
    from starlette.exceptions import HTTPException

    from drkit import __version__

    Question = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=config.max_chars)]

    class AskRequest(BaseModel):
        """One question (`question`) or several (`questions`), and how to answer them."""

        model_config = ConfigDict(extra="forbid", json_schema_extra={
            "examples": [{"question": "who directed the films written by [Irwin Allen]"},
                         {"questions": ["which person wrote the films acted by [Kyle MacLachlan]"], "top_k": 3}]})
        question: Question | None = Field(None, description="a question, plain or with its entity in [brackets]")
        questions: list[Question] | None = Field(None, min_length=1, max_length=config.max_questions,
                                                 description=f"up to {config.max_questions} questions")
        top_k: int = Field(5, ge=1, le=MAX_TOP_K, description="answers (and passages) returned per question")
        hops: int | None = Field(None, ge=1, description="hops to run (at most the model's; default: the model's)")
        chain: bool = Field(True, description="return the reasoning chain")

        @model_validator(mode="after")
        def one_of(self):
            if (self.question is None) == (self.questions is None):
                raise ValueError("give either 'question' (one) or 'questions' (a list), not both and not neither")
            return self

    metrics: Metrics | None = None
    batcher = Batcher(lambda key, items: engine.run_json(items, key), config.max_batch, config.max_wait_ms,
                      config.max_queue, observe=lambda size, seconds: metrics.batch(size, seconds))

    def drain_by(deadline: float) -> None:
        """Called in the event loop when a signal asks the server to stop by `deadline` (`time.monotonic`): the
        requests still waiting or computing at 70% of the time left get 503, so that they are answered before
        uvicorn's own drain (80% of it) cancels them with its bare 500."""
        app.state.stop_deadline = deadline
        left = max(0.0, deadline - time.monotonic())
        asyncio.get_running_loop().call_later(0.7 * left, batcher.refuse_all)

    @asynccontextmanager
    async def lifespan(app):
        await batcher.start()
        loop = asyncio.get_running_loop()
        app.state.drain_by = lambda deadline: loop.call_soon_threadsafe(drain_by, deadline)
        app.state.ready = True
        n_entities = getattr(engine, "n_entities", None) or engine.index.n_entities
        log.info("drkit serve: %s model, %s entities, index version %s, ready", engine.kind, f"{n_entities:,}",
                 engine.version)
        try:
            yield
        finally:
            app.state.ready = False
            deadline = app.state.stop_deadline
            await batcher.stop(config.drain_s if deadline is None else max(0.0, deadline - time.monotonic()))

    app = FastAPIOffline(title="drkit", version=__version__, lifespan=lifespan,
                         description="DrKIT: multi-hop questions answered over a text corpus used as a virtual "
                                     "knowledge base. The reasoning chain gives, hop by hop, the entities reached and "
                                     "the mention in a passage that supports each.")
    app.state.ready, app.state.batcher, app.state.engine, app.state.stop_deadline = False, batcher, engine, None
    app.state.drain_by = lambda deadline: None  # until the lifespan has started

    def ready() -> bool:
        return app.state.ready and getattr(engine, "alive", True)

    metrics = Metrics(engine, batcher, ready)
    app.state.metrics = metrics
    app.add_middleware(BodyLimit, max_bytes=config.max_body_bytes)
    app.add_middleware(RequestLog, metrics=metrics, enabled=config.access_log)  # outermost: sees every response

    def reject(status: int, cause: str, message: str, fields: list | None = None, headers: dict | None = None):
        metrics.error(status, cause)
        return error_response(status, message, fields, headers)

    async def queued(key, items: list):
        """The results of `items` computed through the batch queue, or the error response that says why not."""
        try:
            return await batcher.submit(key, items)
        except QueueFull as exc:
            return reject(503, "queue_full", f"the server is busy: {exc}; retry shortly", headers={"Retry-After": "1"})
        except NotRunning:  # shutting down
            return reject(503, "shutting_down", "the server is shutting down", headers={"Retry-After": "1"})
        except EngineUnavailable as exc:
            log.error("%s", exc)
            return reject(503, "model_unavailable", "the model is not available; retry later",
                          headers={"Retry-After": "5"})

    @app.exception_handler(RequestValidationError)
    async def invalid(request: HTTPRequest, exc: RequestValidationError):
        errors = exc.errors()
        if any(e.get("type") == "json_invalid" for e in errors):
            return reject(400, "bad_json", "the request body is not valid JSON: " + "; ".join(
                str(e.get("ctx", {}).get("error", e.get("msg"))) for e in errors))
        fields = [{"field": ".".join(str(p) for p in e.get("loc", ())[1:]) or "body", "message": e.get("msg", "")}
                  for e in errors]
        return reject(422, "invalid", "invalid request: " + "; ".join(f"{f['field']}: {f['message']}" for f in fields),
                      fields)

    @app.exception_handler(HTTPException)
    async def httperror_response(request: HTTPRequest, exc: HTTPException):
        cause = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http")
        return reject(exc.status_code, cause, str(exc.detail), headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal(request: HTTPRequest, exc: Exception):
        request_id = request.scope.get("state", {}).get("request_id")
        log.exception("error answering %s %s (request %s)", request.method, request.url.path, request_id)
        return reject(500, "internal", f"internal error ({type(exc).__name__}, request {request_id}); the server log "
                      "has the details")

    # from the demo's model (make demo), shortened: one answer, one entity of one hop, the passage cut
    example = {"results": [{
        "question": "who directed the films written by [Irwin Allen]", "text": "who directed the films written by Irwin Allen",
        "found_by": "bracketed", "question_entities": [{"entity": "Irwin Allen", "entity_id": 237}], "hops": 2,
        "answers": [{"entity": "Ronald Neame", "entity_id": 1404, "score": 0.3778}],
        "chain": [{"hop": 1, "n_entities": 49, "entities": [{
            "entity": "The Poseidon Adventure", "entity_id": 1403, "score": 0.0685, "via": "Irwin Allen",
            "evidence": {"mention_id": 3262, "passage_id": 250, "title": "The Poseidon Adventure",
                         "text": "The Poseidon Adventure\nThe Poseidon Adventure is a 1972 adventure film directed by "
                                 "Irwin Allen and Ronald Neame. ...", "start": 0, "end": 22}}]}]}], "took_ms": 14.2}
    responses = {200: {"description": "one result per question, in order; a hop-mixing model adds `pi` and `passages`, "
                                      "a question naming no entity of the index gets `{question, error}`",
                       "content": {"application/json": {"example": example}}},
                 413: {"description": "body over the limit"}, 422: {"description": "a field is invalid (named)"},
                 503: {"description": "queue full, shutting down or model unavailable (Retry-After)"}}

    @app.post("/v1/ask", summary="Answer questions, with the reasoning chain", responses=responses)
    async def ask(body: AskRequest, http: HTTPRequest) -> Response:
        questions = [body.question] if body.question is not None else body.questions
        request = Request(body.top_k, body.hops, body.chain)
        try:
            engine.check(request)
        except ConfigError as exc:
            name = str(exc).split(":")[0]
            return reject(422, "invalid", f"invalid request: {exc}", [{"field": name, "message": str(exc)}])
        t0 = time.perf_counter()
        answer = asyncio.ensure_future(queued(request, questions))
        gone = asyncio.ensure_future(_disconnected(http))
        await asyncio.wait({answer, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():  # the client has gone: its questions leave the queue unanswered
            answer.cancel()
            return Response(status_code=499)
        gone.cancel()
        results = answer.result()
        if isinstance(results, Response):
            return results
        took_ms = round(1000 * (time.perf_counter() - t0), 2)
        # each result arrives as its JSON text (computed beside the model): joined, not decoded and encoded again
        return Response('{"results": [' + ", ".join(results) + f'], "took_ms": {took_ms}}}',
                        media_type="application/json")

    @app.get("/v1/entities/{entity_id}", summary="The passages that mention an entity",
             responses={404: {"description": "no such entity"}, 503: {"description": "queue full (Retry-After)"}})
    async def entity(entity_id: int, limit: int = 10) -> Response:
        if not 1 <= limit <= 100:
            return reject(422, "invalid", "invalid request: limit: must be between 1 and 100",
                          [{"field": "limit", "message": "must be between 1 and 100"}])
        results = await queued(EntityLookup(limit), [entity_id])
        if isinstance(results, Response):
            return results
        if results[0].startswith('{"error"'):
            message = json.loads(results[0])["error"]
            return reject(404, "not_found", message, [{"field": "entity_id", "message": message}])
        return Response(results[0], media_type="application/json")

    @app.get("/healthz", summary="The server is up (it stays up while a model process that died is started again)")
    async def healthz() -> JSONResponse:
        return JSONResponse({"status": "ok", "model": "up" if getattr(engine, "alive", True) else "restarting"})

    @app.get("/readyz", summary="Index and model loaded and warmed up, ready to answer")
    async def readyz() -> JSONResponse:
        if not ready():
            reason = ("the model process is being started again" if app.state.ready else
                      "shutting down" if app.state.stop_deadline is not None else "not ready")
            return reject(503, "not_ready", reason, headers={"Retry-After": "1"})
        return JSONResponse({"status": "ready", "kind": engine.kind, "index_version": engine.version,
                             "queued": batcher.busy, "batches": batcher.stats.batches,
                             "questions": batcher.stats.questions})

    limits = {k: getattr(config, k) for k in ("max_batch", "max_wait_ms", "max_queue", "max_body_bytes",
                                              "max_questions", "max_chars", "chain_top", "batch_timeout_s",
                                              "watch_s")}

    @app.get("/v1/info", summary="The index, mention index and model being served: manifests, counts, checksums, "
                                 "the index version")
    async def get_info() -> Response:
        results = await queued(InfoLookup(), [0])
        if isinstance(results, Response):
            return results
        info = json.loads(results[0]) | {"limits": limits, "restarts": getattr(engine, "restarts", 0)}
        if config.expose_paths:
            info["model_process"] = getattr(engine, "pid", None)
        return JSONResponse(info if config.expose_paths else redacted(info))

    @app.get("/metrics", summary="Counters, gauges and histograms in the Prometheus text format")
    async def get_metrics() -> Response:
        body, content_type = metrics.text()
        return Response(body, media_type=content_type)

    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    @app.get("/", include_in_schema=False)
    async def page() -> FileResponse:
        return FileResponse(STATIC / "index.html", media_type="text/html")

    return app
