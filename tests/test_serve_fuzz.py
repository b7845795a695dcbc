"""The HTTP API fuzzed from its own OpenAPI document (schemathesis, on hypothesis): requests generated for every
operation, valid ones and invalid ones (schemathesis's positive and negative modes), against a real uvicorn
server over the sample's 2-hop model. No response may be a 500 or carry a stack trace, an error is JSON with a
message, and every status is one the API uses."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'drkit[serve]'")
schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is in the test extra")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis.errors import Unsatisfiable  # noqa: E402
from serve_fixtures import live_server, sample_run  # noqa: E402,F401

STATUSES = {200, 400, 404, 405, 413, 422, 503}


def test_no_generated_request_gets_a_500_or_a_stack_trace(sample_run):  # noqa: F811
    from schemathesis import GenerationMode

    from drkit.serve.app import ServeConfig, create_app
    from drkit.serve.engine import Engine

    engine = Engine.load(*sample_run)
    engine.warm_up()
    seen: dict[str, set] = {}
    with live_server(create_app(engine, ServeConfig())) as url:
        schema = schemathesis.openapi.from_url(f"{url}/openapi.json")
        operations = [result.ok() for result in schema.get_all_operations()]
        assert {op.label for op in operations} >= {"POST /v1/ask", "GET /v1/entities/{entity_id}", "GET /v1/info",
                                                   "GET /metrics", "GET /readyz", "GET /healthz"}
        for op in operations:
            for mode in GenerationMode:
                @given(case=op.as_strategy(generation_mode=mode))
                @settings(max_examples=30, deadline=None, database=None, suppress_health_check=list(HealthCheck))
                def check(case):
                    response = case.call(timeout=60)
                    seen.setdefault(op.label, set()).add(response.status_code)
                    where = (case.method, case.path, case.body if hasattr(case, "body") else None)
                    assert response.status_code in STATUSES, (where, response.status_code, response.text[:300])
                    assert "Traceback" not in response.text and 'File "' not in response.text, where
                    if response.status_code >= 400:
                        body = json.loads(response.text)
                        assert isinstance(body.get("error"), str) and body["error"], (where, body)

                try:
                    check()
                except Unsatisfiable:  # an operation without parameters or body has no invalid request to make
                    assert mode == GenerationMode.NEGATIVE, op.label
    # the fuzzing reached both sides of the API: answers and refusals
    assert {200, 422} <= seen["POST /v1/ask"] and {200, 404, 422} <= seen["GET /v1/entities/{entity_id}"], seen
