"""The ASGI middleware of the server and its JSON errors: `BodyLimit` (413 for a body over the limit, counted as
it arrives) and `RequestLog` (request ids, the access log, the metrics of every response, and a JSON 500 for an
exception)."""

from __future__ import annotations

import json
import logging
import re
import time
import uuid

from drkit.serve.metrics import Metrics

log = logging.getLogger("drkit.serve")
access_log = logging.getLogger("drkit.serve.access")
REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


def error_response(status: int, message: str, fields: list | None = None, headers: dict | None = None):
    from fastapi.responses import JSONResponse

    body = {"error": message} | ({"fields": fields} if fields else {})
    return JSONResponse(body, status_code=status, headers=headers)


class BodyLimit:
    """ASGI middleware: a request body over `max_bytes` gets 413, whether or not Content-Length says so
    (a chunked body is counted as it arrives)."""

    def __init__(self, app, max_bytes: int):
        self.app, self.max_bytes = app, max_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = dict(scope.get("headers") or []).get(b"content-length")
        too_large = error_response(413, f"the request body is larger than {self.max_bytes} bytes")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            return await too_large(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.max_bytes:
                return await too_large(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


class RequestLog:
    """ASGI middleware, outermost: gives each HTTP request an id (the client's ``X-Request-ID`` when it is
    sane, else a new one) echoed in the response's ``X-Request-ID``, counts it in the metrics and, with
    `enabled`, writes one JSON line to the access log. An exception that reaches it is answered with a JSON
    500 naming the request id (never a stack trace) and logged once."""

    def __init__(self, app, metrics: Metrics, enabled: bool = True):
        self.app, self.metrics, self.enabled = app, metrics, enabled

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        given = dict(scope.get("headers") or []).get(b"x-request-id", b"").decode("latin-1")
        request_id = given if REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status = [None]

        async def send_with_id(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        t0 = time.perf_counter()
        try:
            await self.app(scope, receive, send_with_id)
        except Exception as exc:  # answered here, with the request id, and logged once with its traceback
            log.exception("error answering %s %s (request %s)", scope["method"], scope["path"], request_id)
            if status[0] is None:
                self.metrics.error(500, "internal")
                await error_response(500, f"internal error ({type(exc).__name__}, request {request_id}); the server log "
                                  "has the details")(scope, receive, send_with_id)
        finally:
            if status[0] is None:  # the client left before any response: nginx's 499
                status[0] = 499
            took = time.perf_counter() - t0
            root, path = scope.get("root_path", ""), scope["path"]
            path = path[len(root):] or "/" if root and path.startswith(root) else path
            self.metrics.request(path, status[0], took)
            if status[0] == 413:
                self.metrics.error(413, "body_too_large")
            if self.enabled:
                client = scope.get("client")
                access_log.info(json.dumps({"request_id": request_id, "method": scope["method"], "path": path,
                                            "status": status[0], "ms": round(1000 * took, 2),
                                            "client": client[0] if client else None}))
