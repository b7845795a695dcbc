"""What ``GET /metrics`` reports, in the Prometheus text format (prometheus_client, one registry per app).

Counted as they happen: HTTP requests by route and status, their latency by route, the errors by status and
cause (413 body_too_large, 400 bad_json, 422 invalid, 404 not_found, 503 queue_full / shutting_down /
model_unavailable, 500 internal), the size and duration of each batch. Read when scraped: questions
answered, batches, requests abandoned by their client, failed batches, the queue's depth, the index version
served, live reloads, model process restarts, readiness.
"""

from __future__ import annotations

import time

ROUTES = ("/v1/ask", "/v1/entities", "/v1/info", "/healthz", "/readyz", "/metrics", "/docs", "/openapi.json",
          "/static", "/")
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


def route_of(path: str) -> str:
    """The route a request path belongs to (a fixed set, so that a metric's labels stay few); "other" else."""
    for route in ROUTES:
        if route == "/":
            if path == "/":
                return route
        elif path == route or path.startswith(route + "/"):
            return route
    return "other"


class Metrics:
    """The server's metrics. `engine` and `batcher` are read at each scrape; `ready` is a callable."""

    def __init__(self, engine, batcher, ready):
        from prometheus_client import CollectorRegistry, Counter, Histogram

        self.registry = CollectorRegistry(auto_describe=True)
        self.requests = Counter("drkit_http_requests", "HTTP requests answered, by route and status",
                                ("route", "status"), registry=self.registry)
        self.latency = Histogram("drkit_http_request_duration_seconds", "time to answer an HTTP request, by route",
                                 ("route",), buckets=LATENCY_BUCKETS, registry=self.registry)
        self.errors = Counter("drkit_http_errors", "error responses by status and cause", ("status", "cause"),
                              registry=self.registry)
        self.batch_size = Histogram("drkit_batch_size", "items (questions, entity ids) computed in one batch",
                                    buckets=BATCH_BUCKETS, registry=self.registry)
        self.batch_seconds = Histogram("drkit_batch_duration_seconds", "time to compute one batch",
                                       buckets=LATENCY_BUCKETS, registry=self.registry)
        self.registry.register(_Live(engine, batcher, ready))
        self.started = time.time()

    def error(self, status: int, cause: str) -> None:
        self.errors.labels(str(status), cause).inc()

    def batch(self, size: int, seconds: float) -> None:
        self.batch_size.observe(size)
        self.batch_seconds.observe(seconds)

    def request(self, path: str, status: int, seconds: float) -> None:
        route = route_of(path)
        self.requests.labels(route, str(status)).inc()
        self.latency.labels(route).observe(seconds)

    def text(self) -> tuple[bytes, str]:
        """The exposition and its content type."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class _Live:
    """A collector of what the engine and the batcher count themselves, read at each scrape."""

    def __init__(self, engine, batcher, ready):
        self.engine, self.batcher, self.ready = engine, batcher, ready

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        stats, engine = self.batcher.stats, self.engine
        counters = (("drkit_questions_answered", "items answered in a batch", stats.questions),
                    ("drkit_batches", "batches computed", stats.batches),
                    ("drkit_requests_abandoned", "requests whose client left before their batch", stats.abandoned),
                    ("drkit_batches_failed", "batches that raised (their requests then ran alone)", stats.failed),
                    ("drkit_queue_rejected", "requests refused because the queue was full", stats.rejected),
                    ("drkit_model_restarts", "times the model process was started again",
                     getattr(engine, "restarts", 0)),
                    ("drkit_model_restart_failures", "starts of the model process that failed",
                     getattr(engine, "restart_failures", 0)))
        for name, help_text, value in counters:
            yield CounterMetricFamily(name, help_text, value=value)
        gauges = (("drkit_queue_depth", "items queued or being computed", self.batcher.busy),
                  ("drkit_index_version", "the index version served (INDEX/CURRENT)", getattr(engine, "version", 0)),
                  ("drkit_model_up", "1 when the model can take a batch", int(getattr(engine, "alive", True))),
                  ("drkit_ready", "1 when /readyz is green", int(self.ready())))
        for name, help_text, value in gauges:
            yield GaugeMetricFamily(name, help_text, value=value)
