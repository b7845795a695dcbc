"""The HTTP API (drkit.serve): every endpoint, limit and error through FastAPI's test client against a model
over the MetaQA sample, the results against the front door called directly, dynamic batching against
one-question-at-a-time answers, and SIGTERM draining a real `drkit serve` process."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the serve extra is not installed: pip install 'drkit[serve]'")

from fastapi.testclient import TestClient  # noqa: E402
from serve_fixtures import QUESTIONS, ROOT, free_port, live_server, sample_run  # noqa: E402,F401
from test_retrieve import mixing_run  # noqa: E402,F401  (a fixture)

from drkit.data.text import fold  # noqa: E402
from drkit.errors import ConfigError  # noqa: E402
from drkit.qa.pipeline import DrKIT  # noqa: E402
from drkit.serve.app import ServeConfig, create_app  # noqa: E402
from drkit.serve.batching import Batcher, NotRunning, QueueFull  # noqa: E402
from drkit.serve.engine import Engine  # noqa: E402
from drkit.serve.views import ANSWERS, PASSAGES, EntityLookup, Request, redacted  # noqa: E402


@pytest.fixture(scope="module")
def engine(sample_run):  # noqa: F811
    index, run = sample_run
    return Engine.load(index, run)


@pytest.fixture(scope="module")
def client(engine):
    with TestClient(create_app(engine, ServeConfig()), raise_server_exceptions=False) as c:
        yield c


def no_trace(response) -> None:
    assert "Traceback" not in response.text and 'File "' not in response.text


def error_of(response, status: int, *fields: str) -> dict:
    """The JSON error body, checked: the status, a message, the fields at fault, no stack trace."""
    assert response.status_code == status, response.text
    no_trace(response)
    body = response.json()
    assert isinstance(body["error"], str) and body["error"]
    assert [f["field"] for f in body.get("fields", [])] == list(fields), body
    return body


# -- endpoints ------------------------------------------------------------------------------------------
def test_healthz_and_readyz(engine, client):
    assert client.get("/healthz").json() == {"status": "ok", "model": "up"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json()["status"] == "ready" and ready.json()["kind"] == ANSWERS
    # before the app's lifespan has started (index loaded, batch worker not yet running): not ready
    not_started = TestClient(create_app(engine, ServeConfig()))
    r = not_started.get("/readyz")
    assert r.status_code == 503 and r.headers["retry-after"] == "1"
    assert not_started.get("/healthz").status_code == 200


def test_info_gives_manifests_counts_and_checksums(engine, client, sample_run):  # noqa: F811
    index, run = sample_run
    info = client.get("/v1/info").json()
    assert info["kind"] == ANSWERS and info["max_hops"] == 2
    compute = engine.vkb.compute
    assert info["compute"] == {"precision": compute.precision, "device": compute.device.type, "reason": compute.reason}
    assert info["counts"] == {"entities": engine.index.n_entities, "mentions": engine.index.n_mentions,
                              "passages": engine.index.n_passages, "articles": 354}
    manifests = info["manifests"]
    # by default no absolute path, command line or process id: each path is cut to its name
    assert manifests["index"]["path"] == index.name and "model_process" not in info
    assert str(index.parent) not in json.dumps(info) and '"command"' not in json.dumps(info)
    for name, m in (("index", engine.index.manifest), ("mentions", engine.vkb.mentions.manifest)):
        assert {k: v for k, v in manifests[name].items() if k != "path"} == json.loads(json.dumps(
            redacted({k: v for k, v in m.items() if k != "files"})))
    assert manifests["model"]["drkit_version"] and manifests["index"]["inputs"]
    weights = (run / "model" / "model.safetensors").read_bytes()
    assert manifests["model"]["weights_sha256"] == hashlib.sha256(weights).hexdigest()
    assert info["limits"]["max_questions"] == 64 and info["limits"]["max_body_bytes"] == 64 * 1024
    assert info["index_version"] == 0 and info["reloads"] == 0
    # asked for: the paths and command lines as the manifests have them
    with TestClient(create_app(engine, ServeConfig(expose_paths=True))) as c:
        full = c.get("/v1/info").json()["manifests"]
    assert full["index"]["path"] == str(index) and full["index"]["command"] == engine.index.manifest["command"]
    for name, m in (("index", engine.index.manifest), ("mentions", engine.vkb.mentions.manifest)):
        assert {k: v for k, v in full[name].items() if k != "path"} == json.loads(json.dumps(
            {k: v for k, v in m.items() if k != "files"}))


def test_ask_matches_the_front_door(engine, client, sample_run):  # noqa: F811
    index, run = sample_run
    kit = DrKIT.load(index, run)
    r = client.post("/v1/ask", json={"question": QUESTIONS[0], "top_k": 4})
    assert r.status_code == 200, r.text
    body = r.json()
    assert len(body["results"]) == 1 and body["took_ms"] >= 0
    got = body["results"][0]
    want = kit.answer(QUESTIONS[0], top=4, chain_top=3)
    assert got["question"] == QUESTIONS[0] and got["hops"] == 2 and got["found_by"] == "bracketed"
    assert got["question_entities"] == [{"entity": "Kyle MacLachlan", "entity_id": want.question_entity_id}]
    assert [(a["entity_id"], a["score"]) for a in got["answers"]] == [(a.entity_id, a.prob) for a in want.answers]
    assert len(got["answers"]) == 4
    assert [h["hop"] for h in got["chain"]] == [1, 2]
    for hop, want_hop in zip(got["chain"], want.chain):
        assert hop["n_entities"] == want_hop.n_entities
        assert [e["entity_id"] for e in hop["entities"]] == [e.entity_id for e in want_hop.top]
        for e in hop["entities"]:
            ev = e["evidence"]
            # the mention is the entity's, in the passage named, at the offsets given
            assert ev["text"] == engine.index.passage_text(ev["passage_id"])
            assert fold(ev["text"][ev["start"]:ev["end"]]) == engine.index.entities.keys[e["entity_id"]]
            assert int(engine.index.mentions[ev["mention_id"]][0]) == e["entity_id"]


def test_several_questions_answer_in_order_and_a_bad_one_fails_alone(client):
    bad = "who directed the films written by nobody we know"
    questions = [QUESTIONS[1], bad, QUESTIONS[3]]
    results = client.post("/v1/ask", json={"questions": questions, "chain": False}).json()["results"]
    assert [r["question"] for r in results] == questions
    assert "error" in results[1] and "answers" not in results[1]
    assert results[0]["found_by"] == "bracketed" and results[2]["found_by"].startswith("linked")
    assert results[2]["question_entities"][0]["entity"] == "Irwin Allen"
    assert all("chain" not in r for r in (results[0], results[2]))
    alone = client.post("/v1/ask", json={"question": QUESTIONS[3], "chain": False}).json()["results"][0]
    assert alone == results[2]


def test_hops_and_top_k(client):
    one = client.post("/v1/ask", json={"question": QUESTIONS[0], "hops": 1, "top_k": 2}).json()["results"][0]
    assert one["hops"] == 1 and len(one["chain"]) == 1 and len(one["answers"]) == 2
    error_of(client.post("/v1/ask", json={"question": QUESTIONS[0], "hops": 3}), 422, "hops")
    error_of(client.post("/v1/ask", json={"question": QUESTIONS[0], "hops": 0}), 422, "hops")
    error_of(client.post("/v1/ask", json={"question": QUESTIONS[0], "top_k": 0}), 422, "top_k")
    error_of(client.post("/v1/ask", json={"question": QUESTIONS[0], "top_k": 101}), 422, "top_k")
    error_of(client.post("/v1/ask", json={"question": QUESTIONS[0], "top_k": "five"}), 422, "top_k")


def test_entity_passages(engine, client):
    e = engine.index.entities.lookup("Irwin Allen")
    body = client.get(f"/v1/entities/{e}", params={"limit": 3}).json()
    assert body["entity"] == "Irwin Allen" and body["entity_id"] == e
    mentions = np.asarray(engine.index.mentions)
    assert body["mentions"] == int((mentions[:, 0] == e).sum())
    assert body["passages_mentioning"] == len(set(mentions[mentions[:, 0] == e, 1].tolist()))
    assert 1 <= len(body["passages"]) <= 3
    for p in body["passages"]:
        assert p["text"] == engine.index.passage_text(p["passage_id"])
        for m in p["mentions"]:
            assert fold(p["text"][m["start"]:m["end"]]) == "irwin allen"
            assert tuple(mentions[m["mention_id"], [0, 1]]) == (e, p["passage_id"])
    error_of(client.get(f"/v1/entities/{engine.index.n_entities}"), 404, "entity_id")
    error_of(client.get("/v1/entities/-1"), 404, "entity_id")
    error_of(client.get("/v1/entities/abc"), 422, "entity_id")
    error_of(client.get(f"/v1/entities/{e}", params={"limit": 0}), 422, "limit")


def test_page_docs_and_openapi_are_served_offline(client):
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'id="question"' in page.text
    for asset in ("/static/app.js", "/static/app.css"):
        assert client.get(asset).status_code == 200
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    spec = client.get("/openapi.json").json()
    assert {"/v1/ask", "/v1/info", "/healthz", "/readyz", "/v1/entities/{entity_id}"} <= set(spec["paths"])
    # nothing is fetched from another host: every URL the page and the docs load is on this server
    for text in (page.text, docs.text, client.get("/static/app.js").text, client.get("/static/app.css").text):
        assert "http://" not in text and "https://" not in text and "//cdn" not in text


# -- limits and errors -----------------------------------------------------------------------------------
def test_limits_name_the_field(client):
    error_of(client.post("/v1/ask", json={"questions": [QUESTIONS[0]] * 65}), 422, "questions")
    error_of(client.post("/v1/ask", json={"question": "x" * 1001}), 422, "question")
    error_of(client.post("/v1/ask", json={"questions": [QUESTIONS[0], "x" * 1001]}), 422, "questions.1")
    error_of(client.post("/v1/ask", json={"question": "   "}), 422, "question")
    error_of(client.post("/v1/ask", json={"questions": []}), 422, "questions")
    error_of(client.post("/v1/ask", json={"question": QUESTIONS[0], "questions": [QUESTIONS[1]]}), 422, "body")
    error_of(client.post("/v1/ask", json={}), 422, "body")
    error_of(client.post("/v1/ask", json={"question": QUESTIONS[0], "colour": "red"}), 422, "colour")
    error_of(client.post("/v1/ask", json=[QUESTIONS[0]]), 422, "body")
    assert client.post("/v1/ask", json={"questions": [QUESTIONS[0]] * 64, "chain": False}).status_code == 200
    assert client.post("/v1/ask", json={"question": "who directed [Kismet] " + "x" * 970}).status_code == 200


def test_malformed_json_is_400_with_a_message(client):
    r = client.post("/v1/ask", content=b'{"question": "who directed', headers={"content-type": "application/json"})
    body = error_of(r, 400)
    assert "not valid JSON" in body["error"]


def test_body_over_64_kib_is_413(client):
    big = json.dumps({"question": QUESTIONS[0], "pad": "x" * (64 * 1024)})
    error_of(client.post("/v1/ask", content=big, headers={"content-type": "application/json"}), 413)

    def chunks():  # no Content-Length: the body is counted as it arrives
        for _ in range(70):
            yield b"x" * 1024

    error_of(client.post("/v1/ask", content=chunks(), headers={"content-type": "application/json"}), 413)


def test_a_streamed_body_over_64_kib_is_413_on_a_real_server(engine):
    import httpx

    def chunks():  # no Content-Length, 70 chunks of 1 KiB: counted as they arrive
        for _ in range(70):
            yield b"x" * 1024

    with live_server(create_app(engine, ServeConfig())) as url:
        r = httpx.post(f"{url}/v1/ask", content=chunks(), headers={"content-type": "application/json"}, timeout=30)
        error_of(r, 413)
        assert "chunked" in r.request.headers.get("transfer-encoding", "")
        assert httpx.post(f"{url}/v1/ask", json={"question": QUESTIONS[0]}, timeout=30).status_code == 200


def test_a_client_that_disconnects_leaves_the_queue(engine):
    import httpx

    gated = _Gated(engine)
    app = create_app(gated, ServeConfig(max_batch=1, max_wait_ms=0))
    with live_server(app) as url:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(httpx.post, f"{url}/v1/ask", json={"question": QUESTIONS[0]}, timeout=60)
            assert gated.entered.wait(30)  # the first is in the model; the second waits, then its client leaves
            with pytest.raises(httpx.ReadTimeout):
                httpx.post(f"{url}/v1/ask", json={"question": QUESTIONS[1]}, timeout=0.5)
            deadline = time.monotonic() + 10
            while app.state.batcher.busy > 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            assert app.state.batcher.busy == 1  # only the first, in the model
            gated.gate.set()
            assert first.result().status_code == 200
        assert app.state.batcher.stats.questions == 1 and app.state.batcher.stats.abandoned == 1


def test_unknown_route_and_method_are_json(client):
    error_of(client.get("/v1/nothing"), 404)
    error_of(client.get("/v1/ask"), 405)


class _Wrapped:
    """An engine that behaves as `engine` but for `run_json`."""

    def __init__(self, engine):
        self._engine = engine

    def __getattr__(self, name):
        return getattr(self._engine, name)


class _Broken(_Wrapped):
    """An engine whose batches fail: the server must answer 500 without a stack trace."""

    def run_json(self, questions, request):
        raise RuntimeError("secret internal detail at /some/path.py line 12")


def test_an_internal_error_is_500_without_a_trace(engine):
    with TestClient(create_app(_Broken(engine), ServeConfig())) as c:  # answered, not raised to the server
        r = c.post("/v1/ask", json={"question": QUESTIONS[0]}, headers={"X-Request-ID": "req-7"})
        body = error_of(r, 500)
        assert "secret" not in body["error"] and "/some/path.py" not in body["error"]
        assert "req-7" in body["error"] and r.headers["x-request-id"] == "req-7"  # the log names it too
        assert c.get("/healthz").status_code == 200  # the worker goes on
        assert c.get("/readyz").status_code == 200
        assert 'drkit_http_errors_total{cause="internal",status="500"} 1.0' in c.get("/metrics").text


class _Gated(_Wrapped):
    """An engine whose batches wait for `gate`, to fill the queue."""

    def __init__(self, engine):
        super().__init__(engine)
        self.gate, self.entered = threading.Event(), threading.Event()

    def run_json(self, questions, request):
        self.entered.set()
        assert self.gate.wait(30)
        return self._engine.run_json(questions, request)


def test_a_full_queue_is_503_with_retry_after(engine):
    gated = _Gated(engine)
    config = ServeConfig(max_batch=2, max_queue=4, max_questions=4, max_wait_ms=0)
    with live_server(create_app(gated, config)) as url:
        import httpx

        def ask(n):
            return httpx.post(f"{url}/v1/ask", json={"questions": [QUESTIONS[0]] * n, "chain": False}, timeout=60)

        with ThreadPoolExecutor(8) as pool:
            first = pool.submit(ask, 2)  # taken by the worker, which waits at the gate
            assert gated.entered.wait(30)
            queued = [pool.submit(ask, 2) for _ in range(2)]  # 4 questions wait: the queue is full
            deadline = time.monotonic() + 30
            while httpx.get(f"{url}/readyz").json()["queued"] < 6 and time.monotonic() < deadline:
                time.sleep(0.01)
            refused = ask(1)
            error_of(refused, 503)
            assert refused.headers["retry-after"] == "1"
            gated.gate.set()
            for f in [first, *queued]:  # nothing that was accepted is lost
                assert f.result().status_code == 200
        assert ask(1).status_code == 200


def test_serve_flags_set_how_the_reader_reads():
    from drkit.cli import build_parser
    from drkit.cli.flags import config_from_args
    from drkit.reader.reading import ReadConfig

    def reading(*flags):
        args = build_parser().parse_args(["serve", "--index", "i", "--model", "m", *flags])
        return config_from_args(args, ServeConfig).reading()

    assert reading() == ReadConfig(compare=True, skip_bridges=False)
    assert reading("--skip-bridges", "--no-compare") == ReadConfig(compare=False, skip_bridges=True)
    assert reading() == ReadConfig(decompose=True) and reading("--no-decompose") == ReadConfig(decompose=False)
    assert reading() == ReadConfig(span_checks=True) and reading("--no-span-checks") == ReadConfig(span_checks=False)


def test_serve_config_refuses_remote_hosts_without_the_flag():
    with pytest.raises(ConfigError, match="--allow-remote"):
        ServeConfig(host="0.0.0.0")
    assert ServeConfig(host="0.0.0.0", allow_remote=True).host == "0.0.0.0"
    for host in ("127.0.0.1", "localhost", "::1"):
        assert ServeConfig(host=host).host == host
    with pytest.raises(ConfigError, match="max_queue"):
        ServeConfig(max_batch=8, max_queue=4, max_questions=4)
    with pytest.raises(ConfigError, match="max_queue"):
        ServeConfig(max_batch=8, max_queue=16, max_questions=32)
    with pytest.raises(ConfigError, match="port"):
        ServeConfig(port=70000)


def test_cli_errors_are_one_line(sample_run, capsys):  # noqa: F811
    import socket

    from drkit.cli import main

    index, run = sample_run
    assert main(["serve", "--index", str(index), "--model", str(run), "--host", "0.0.0.0"]) == 2
    assert "--allow-remote" in capsys.readouterr().err
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        assert main(["serve", "--index", str(index), "--model", str(run), "--port", str(port)]) == 2
        err = capsys.readouterr().err
        assert f"port {port} on 127.0.0.1 is in use" in err and "Traceback" not in err
    assert main(["serve", "--index", str(index / "nope"), "--model", str(run), "--port", str(free_port())]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_every_setting_also_comes_from_the_environment(sample_run, monkeypatch):  # noqa: F811
    from drkit.cli import build_parser
    from drkit.cli.flags import config_from_args
    from drkit.qa.pipeline import LoadConfig

    index, run = sample_run
    for name, value in (("INDEX", str(index)), ("MODEL", str(run)), ("MAX_BATCH", "8"), ("MAX_WAIT_MS", "2.5"),
                        ("ROOT_PATH", "/drkit"), ("ACCESS_LOG", "false"), ("NPROBE", "4"), ("MIPS", "faiss")):
        monkeypatch.setenv(f"DRKIT_{name}", value)
    args = build_parser().parse_args(["serve"])  # --index and --model from the environment
    config, load = config_from_args(args, ServeConfig), config_from_args(args, LoadConfig)
    assert (args.index, args.model) == (str(index), str(run))
    assert (config.max_batch, config.max_wait_ms, config.root_path, config.access_log) == (8, 2.5, "/drkit", False)
    assert (load.mips, load.nprobe) == ("faiss", 4)
    args = build_parser().parse_args(["serve", "--max-batch", "16", "--access-log"])  # a flag wins
    assert config_from_args(args, ServeConfig).max_batch == 16 and config_from_args(args, ServeConfig).access_log
    for name, value, says in (("MAX_BATCH", "eight", "not a valid int"), ("ACCESS_LOG", "maybe", "expected one of"),
                              ("MIPS", "fast", "must be one of"), ("MAX_WAIT_MS", "nan", "finite"),
                              ("DRAIN_S", "inf", "finite"), ("ROOT_PATH", "drkit/", "root_path")):
        with monkeypatch.context() as m:
            m.setenv(f"DRKIT_{name}", value)
            args = build_parser().parse_args(["serve"])
            with pytest.raises(ConfigError, match=says) as err:
                config_from_args(args, ServeConfig), config_from_args(args, LoadConfig)
            if "valid" in says or "expected" in says or "must be one" in says:
                assert f"DRKIT_{name}" in str(err.value)
    monkeypatch.delenv("DRKIT_INDEX")
    with pytest.raises(SystemExit):  # without the variable, --index is required again
        build_parser().parse_args(["serve"])


def test_waits_that_never_end_and_bad_timeouts_are_refused_at_start():
    for bad in ({"max_wait_ms": float("nan")}, {"max_wait_ms": float("inf")}, {"drain_s": float("inf")},
                {"batch_timeout_s": 0}, {"load_timeout_s": -1}, {"watch_s": float("nan")},
                {"root_path": "/drkit/"}, {"root_path": "drkit"}, {"root_path": "/a b"}):
        with pytest.raises(ConfigError):
            ServeConfig(**bad)
    with pytest.raises(ValueError):
        Batcher(lambda k, items: items, max_wait_ms=float("inf"))


def test_a_missing_ann_or_faiss_is_an_error_at_load(sample_run, tmp_path, monkeypatch):  # noqa: F811
    from drkit.qa.pipeline import LoadConfig

    with pytest.raises(ConfigError, match="does not exist"):
        Engine.load(*sample_run, config=LoadConfig(mips="ivfpq", ann=str(tmp_path / "no-ann")))
    monkeypatch.setitem(sys.modules, "faiss", None)  # faiss not installed
    with pytest.raises(ConfigError, match="pip install faiss-cpu"):
        Engine.load(*sample_run, config=LoadConfig(mips="faiss"))


def test_an_ann_of_another_mention_index_fails_the_warm_up_not_a_request(sample_run, tmp_path):  # noqa: F811
    """A stale --ann (built over another mention index) loads lazily: the warm-up, before the server listens,
    is what finds it, so that drkit serve stops with the reason instead of saying ready and answering 500."""
    from drkit.dense.ann import build_ann_index
    from drkit.errors import ArtifactError
    from drkit.qa.pipeline import LoadConfig

    index, run = sample_run
    build_ann_index(index.parent / "mentions", tmp_path / "ann", nlist=4, log=lambda *a: None)
    manifest = json.loads((tmp_path / "ann" / "manifest.json").read_text())
    manifest["mentions"]["manifest_sha256"] = "0" * 64  # as if built over another mention index
    (tmp_path / "ann" / "manifest.json").write_text(json.dumps(manifest))
    engine = Engine.load(index, run, config=LoadConfig(mips="ivfpq", ann=str(tmp_path / "ann")))
    with pytest.raises(ArtifactError, match="was built over the mention index"):
        engine.warm_up()


def test_metrics_request_ids_and_the_access_log(engine, caplog):
    with TestClient(create_app(engine, ServeConfig(max_questions=2)), raise_server_exceptions=False) as c:
        with caplog.at_level("INFO", logger="drkit.serve.access"):
            ok = c.post("/v1/ask", json={"question": QUESTIONS[0]}, headers={"X-Request-ID": "abc-123"})
        assert ok.status_code == 200 and ok.headers["x-request-id"] == "abc-123"
        line = json.loads([r.getMessage() for r in caplog.records if r.name == "drkit.serve.access"][-1])
        assert line["request_id"] == "abc-123" and line["path"] == "/v1/ask" and line["status"] == 200
        assert line["method"] == "POST" and line["ms"] > 0
        fresh = c.get("/healthz", headers={"X-Request-ID": "no spaces <allowed>"})  # not echoed: a new id
        assert len(fresh.headers["x-request-id"]) == 32 and fresh.headers["x-request-id"] != "no spaces <allowed>"
        error_of(c.post("/v1/ask", json={"questions": QUESTIONS[:3]}), 422, "questions")
        error_of(c.post("/v1/ask", content=b"{", headers={"content-type": "application/json"}), 400)
        error_of(c.post("/v1/ask", content=b"x" * (65 * 1024)), 413)
        error_of(c.get("/v1/entities/999999"), 404, "entity_id")
        assert c.get("/v1/entities/3").status_code == 200
        metrics = c.get("/metrics")
    assert metrics.status_code == 200 and metrics.headers["content-type"].startswith("text/plain")
    text = metrics.text
    for want in ('drkit_http_requests_total{route="/v1/ask",status="200"} 1.0',
                 'drkit_http_requests_total{route="/v1/entities",status="200"} 1.0',
                 'drkit_http_errors_total{cause="invalid",status="422"} 1.0',
                 'drkit_http_errors_total{cause="bad_json",status="400"} 1.0',
                 'drkit_http_errors_total{cause="body_too_large",status="413"} 1.0',
                 'drkit_http_errors_total{cause="not_found",status="404"} 1.0',
                 "drkit_questions_answered_total 3.0",  # one question, then two entity lookups
                 "drkit_batch_size_count 3.0", "drkit_queue_depth 0.0", "drkit_index_version 0.0",
                 "drkit_ready 1.0", "drkit_model_restarts_total 0.0", 'drkit_http_request_duration_seconds_bucket{'):
        assert want in text, want


def test_the_page_and_docs_work_under_a_path_prefix(engine):
    import httpx

    config = ServeConfig(root_path="/drkit")
    # as drkit serve --root-path /drkit runs it: uvicorn's root_path; a proxy at /drkit/ strips the prefix
    with live_server(create_app(engine, config), root_path=config.root_path) as url:
        page = httpx.get(f"{url}/").text
        assert 'href="static/app.css"' in page and 'src="static/app.js"' in page and '"/' not in page
        assert "/drkit/openapi.json" in httpx.get(f"{url}/docs").text
        assert httpx.get(f"{url}/openapi.json").status_code == 200
        assert httpx.get(f"{url}/static/app.js").status_code == 200
        assert httpx.post(f"{url}/v1/ask", json={"question": QUESTIONS[0]}).status_code == 200
        assert "drkit_http_requests_total{route=\"/v1/ask\",status=\"200\"} 1.0" in httpx.get(f"{url}/metrics").text
    js = (ROOT / "drkit" / "serve" / "static" / "app.js").read_text()
    assert "call(\"/" not in js and "call(`/" not in js  # every URL the page asks for is relative


def test_entity_lookups_go_through_the_bounded_queue(engine):
    gated = _Gated(engine)
    config = ServeConfig(max_batch=1, max_queue=2, max_questions=1, max_wait_ms=0)
    with live_server(create_app(gated, config)) as url:
        import httpx

        with ThreadPoolExecutor(4) as pool:
            first = pool.submit(httpx.get, f"{url}/v1/entities/3", timeout=60)  # held at the gate
            assert gated.entered.wait(30)
            queued = [pool.submit(httpx.get, f"{url}/v1/entities/{e}", timeout=60) for e in (4, 5)]
            deadline = time.monotonic() + 30
            while httpx.get(f"{url}/readyz").json()["queued"] < 3 and time.monotonic() < deadline:
                time.sleep(0.01)
            refused = httpx.get(f"{url}/v1/entities/6")
            error_of(refused, 503)
            assert refused.headers["retry-after"] == "1"
            gated.gate.set()
            assert [f.result().json()["entity_id"] for f in [first, *queued]] == [3, 4, 5]


# -- batching --------------------------------------------------------------------------------------------
def test_answers_do_not_depend_on_the_batch(engine):
    """Each question alone, and all of them in one batch with others: the same JSON, bit for bit."""
    questions = QUESTIONS + ["who directed the films written by [Irwin Allen]", "what types are the movies "
                             "written by [Irwin Allen]", "which person wrote the films acted by [James Gray]"]
    for request in (Request(), Request(top_k=7, chain=False), Request(hops=1)):
        together = engine.run(questions, request)
        alone = [engine.run([q], request)[0] for q in questions]
        assert together == alone
        reverse = engine.run(questions[::-1], request)
        assert reverse[::-1] == together


def test_batcher_gathers_concurrent_requests_by_settings():
    calls = []

    def run(key, items):
        calls.append((key, list(items)))
        time.sleep(0.01)
        return [f"{key}:{x}" for x in items]

    async def main():
        b = Batcher(run, max_batch=4, max_wait_ms=50, max_queue=100)
        await b.start()
        jobs = [b.submit("a", [1]), b.submit("a", [2, 3]), b.submit("b", [4]), b.submit("a", [5]), b.submit("a", [6])]
        results = await asyncio.gather(*jobs)
        await b.stop()
        return results, b.stats

    results, stats = asyncio.run(main())
    assert results == [["a:1"], ["a:2", "a:3"], ["b:4"], ["a:5"], ["a:6"]]
    # the oldest request's settings first, up to max_batch questions, oldest first; other settings apart
    assert calls == [("a", [1, 2, 3, 5]), ("b", [4]), ("a", [6])]
    assert (stats.batches, stats.questions, stats.largest) == (3, 6, 4)


def test_a_failing_batch_fails_only_the_request_that_fails_alone():
    def run(key, items):
        if "bad" in items:
            raise ValueError("bad question")
        return [x.upper() for x in items]

    async def main():
        b = Batcher(run, max_batch=8, max_wait_ms=50, max_queue=100)
        await b.start()
        results = await asyncio.gather(b.submit("k", ["a", "b"]), b.submit("k", ["bad"]), b.submit("k", ["c"]),
                                       return_exceptions=True)
        await b.stop()
        return results, b.stats

    results, stats = asyncio.run(main())
    assert results[0] == ["A", "B"] and results[2] == ["C"]
    assert isinstance(results[1], ValueError)
    assert stats.failed == 2 and stats.batches == 2  # the batch of 4, then "bad" alone; 2 answered alone


def test_a_request_whose_client_left_is_not_computed():
    seen = []

    def run(key, items):
        seen.extend(items)
        return list(items)

    async def main():
        b = Batcher(run, max_batch=8, max_wait_ms=100, max_queue=100)
        await b.start()
        gone = asyncio.ensure_future(b.submit("k", ["gone"]))
        kept = asyncio.ensure_future(b.submit("k", ["kept"]))
        await asyncio.sleep(0.01)
        gone.cancel()
        result = await kept
        await b.stop()
        return result, b

    result, b = asyncio.run(main())
    assert result == ["kept"] and seen == ["kept"]
    assert b.stats.abandoned == 1 and b.busy == 0


def test_stop_answers_what_it_can_within_its_time_and_refuses_the_rest():
    release = threading.Event()

    def run(key, items):
        release.wait(10)
        return list(items)

    async def main():
        b = Batcher(run, max_batch=1, max_wait_ms=0, max_queue=100)
        await b.start()
        first = asyncio.ensure_future(b.submit("k", [1]))
        await asyncio.sleep(0.05)  # the first is computing (until released), the second waits in the queue
        second = asyncio.ensure_future(b.submit("k", [2]))
        await asyncio.sleep(0.01)
        asyncio.get_running_loop().call_later(0.05, release.set)  # the batch in hand ends within the time
        await b.stop(timeout_s=0.5)
        return await asyncio.gather(first, second, return_exceptions=True)

    first, second = asyncio.run(main())
    assert first == [1]  # the batch in hand finishes
    assert second == [2]  # and so does the queue, within the time

    async def late():
        b = Batcher(run, max_batch=1, max_wait_ms=0, max_queue=100)
        release.clear()
        await b.start()
        first = asyncio.ensure_future(b.submit("k", [1]))
        await asyncio.sleep(0.05)  # the first is computing (until released), the second waits in the queue
        second = asyncio.ensure_future(b.submit("k", [2]))
        await asyncio.sleep(0.01)
        t0 = time.perf_counter()
        await b.stop(timeout_s=0.1)  # the batch in hand takes longer: stop does not wait for it
        took = time.perf_counter() - t0
        release.set()
        return took, await asyncio.gather(first, second, return_exceptions=True)

    took, (first, second) = asyncio.run(late())
    assert took < 1.0  # bounded by its time, not by the batch (released only after stop returned)
    assert isinstance(first, NotRunning) and isinstance(second, NotRunning)


def test_batcher_waits_at_most_max_wait_and_bounds_the_queue():
    def run(key, items):
        return list(items)

    async def main():
        b = Batcher(run, max_batch=2, max_wait_ms=30, max_queue=3)
        await b.start()
        t0 = time.perf_counter()
        assert await b.submit("k", [1]) == [1]  # alone: answered once max_wait has passed
        waited = time.perf_counter() - t0
        with pytest.raises(QueueFull):
            await asyncio.gather(b.submit("k", [1, 2]), b.submit("k", [3, 4]))
        await b.stop()
        with pytest.raises(NotRunning):
            await b.submit("k", [1])
        return waited

    waited = asyncio.run(main())
    assert 0.025 <= waited < 2.0  # a generous upper bound: a loaded CI machine; the lower one is the rule


def test_concurrent_http_requests_share_batches_and_get_their_own_answers(engine):
    config = ServeConfig(max_batch=64, max_wait_ms=50)
    questions = [QUESTIONS[i % len(QUESTIONS)] for i in range(24)]
    alone = {q: engine.run([q], Request(top_k=3))[0] for q in set(questions)}
    app = create_app(engine, config)
    with live_server(app) as url:
        import httpx

        with ThreadPoolExecutor(24) as pool:
            responses = list(pool.map(lambda q: httpx.post(f"{url}/v1/ask", json={"question": q, "top_k": 3},
                                                           timeout=60), questions))
        stats = app.state.batcher.stats
    assert all(r.status_code == 200 for r in responses)
    for q, r in zip(questions, responses):
        assert r.json()["results"] == [alone[q]]
    assert stats.questions == 24 and stats.batches < 24  # gathered: fewer batches than requests


# -- a hop-mixing model ------------------------------------------------------------------------------------
def test_a_hop_mixing_model_adds_pi_and_passages(mixing_run):  # noqa: F811
    from drkit.qa.drkit_retriever import DrKITRetriever

    d = mixing_run
    engine = Engine.load(d / "index1", d / "run")
    assert engine.kind == PASSAGES
    question = json.loads((d / "questions1.jsonl").read_text().splitlines()[0])["question"]
    with TestClient(create_app(engine, ServeConfig())) as c:
        body = c.post("/v1/ask", json={"question": question, "top_k": 3}).json()
        error_of(c.post("/v1/ask", json={"question": question, "hops": 1}), 422, "hops")
        assert c.get("/v1/info").json()["kind"] == PASSAGES
    r = body["results"][0]
    want = DrKITRetriever.load(d / "index1", d / "run", chain_top=3).retrieve([question], 20)[0]
    assert r["pi"] == want.pi and len(r["pi"]) == engine.max_hops + 1
    index = engine.index
    assert [(p["id"], p["score"]) for p in r["passages"]] == [
        (index.article_keys[a], s) for a, s in list(zip(want.articles, want.scores))[:3]]
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()[:8]]
    for request in (Request(), Request(top_k=7, chain=False)):  # batch-independent, as the multi-hop model
        together = engine.run(questions, request)
        assert together == [engine.run([q], request)[0] for q in questions]
    assert len(r["answers"]) <= 3 and [h["hop"] for h in r["chain"]] == list(range(engine.max_hops + 1))
    for hop in r["chain"]:  # Z_0 too: it is rescored by the question against each entity's mentions
        for e in hop["entities"]:
            ev = e["evidence"]
            assert ev is not None
            assert fold(ev["text"][ev["start"]:ev["end"]]) == index.entities.keys[e["entity_id"]]
    # a question that names no entity gets its own error; the others of its batch their answers
    mixed = engine.run([questions[0], "???", questions[1]], Request())
    assert mixed[0] == engine.run([questions[0]], Request())[0] and mixed[2] == engine.run([questions[1]], Request())[0]
    assert mixed[1]["question"] == "???" and "no entity of the index" in mixed[1]["error"]


def test_a_hop_mixing_model_is_served_with_the_mips_asked_for(mixing_run):  # noqa: F811
    from drkit.qa.pipeline import LoadConfig

    d = mixing_run
    exact = Engine.load(d / "index1", d / "run")
    engine = Engine.load(d / "index1", d / "run", config=LoadConfig(mips="faiss", nprobe=2))
    assert engine.vkb._searcher is None and engine.warm_up_s is None  # built at the first question ...
    assert engine.warm_up() > 0 and engine.vkb._searcher is not None  # ... which the warm-up asks, not a request
    assert engine.vkb.searcher_kind == "faiss" and engine.vkb.searcher.index.nprobe == 2
    questions = [json.loads(line)["question"] for line in (d / "questions1.jsonl").read_text().splitlines()[:6]]
    got, want = engine.run(questions, Request(top_k=3)), exact.run(questions, Request(top_k=3))
    assert all(r["passages"] for r in got)  # answered, by global retrieval over 2 of the IVF lists
    assert got != want  # not the exact searcher's restricted retrieval under another name


# -- the model in a process of its own ------------------------------------------------------------------------
def test_the_model_process_answers_as_the_engine_in_process(engine, sample_run):  # noqa: F811
    from drkit.serve.worker import ModelProcess

    index, run = sample_run
    remote = ModelProcess(index, run)
    try:
        assert (remote.kind, remote.max_hops) == (engine.kind, engine.max_hops)
        assert remote.warm_up_s > 0 and remote.version == engine.version == 0
        for request in (Request(), Request(top_k=2, hops=1, chain=False)):
            assert remote.run_json(QUESTIONS, request) == engine.run_json(QUESTIONS, request)
        assert remote.run_json([3, 5], EntityLookup(2)) == engine.run_json([3, 5], EntityLookup(2))
        info = remote.info()
        assert info["manifests"] == json.loads(json.dumps(engine.info()["manifests"], default=str))
        with TestClient(create_app(remote, ServeConfig()), raise_server_exceptions=False) as c:
            want = [json.loads(r) for r in engine.run_json(QUESTIONS, Request())]
            assert c.post("/v1/ask", json={"questions": QUESTIONS}).json()["results"] == want
            first_pid = remote.pid
            os.kill(first_pid, signal.SIGKILL)  # the model process dies: not ready, 503 to a request ...
            remote._process.join()
            error_of(c.get("/readyz"), 503)
            assert c.get("/healthz").json() == {"status": "ok", "model": "restarting"}  # the server heals itself
            r = c.post("/v1/ask", json={"question": QUESTIONS[0]})
            error_of(r, 503)
            assert r.headers["retry-after"]
            deadline = time.monotonic() + 60  # ... and is started again, with no one restarting the server
            while c.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline, "the model process was not started again within 60 s"
                time.sleep(0.1)
            assert remote.pid != first_pid and remote.restarts == 1
            assert c.post("/v1/ask", json={"questions": QUESTIONS}).json()["results"] == want
            metrics = c.get("/metrics").text
            assert "drkit_model_restarts_total 1.0" in metrics
            assert 'drkit_http_errors_total{cause="model_unavailable",status="503"} 1.0' in metrics
    finally:
        remote.close()
    assert not remote._process.is_alive()


def test_a_model_process_that_stops_answering_is_stopped(sample_run):  # noqa: F811
    from drkit.serve.worker import ModelProcess

    remote = ModelProcess(*sample_run, batch_timeout_s=1.0)
    try:
        assert len(remote.run_json(QUESTIONS[:1])) == 1
        hung = remote.pid
        os.kill(hung, signal.SIGSTOP)  # hung: the batch times out, the child is killed, 503
        with TestClient(create_app(remote, ServeConfig()), raise_server_exceptions=False) as c:
            body = error_of(c.post("/v1/ask", json={"question": QUESTIONS[0]}), 503)
            assert "not available" in body["error"]
            deadline = time.monotonic() + 60  # then started again
            while not remote.alive or remote.pid == hung:
                assert time.monotonic() < deadline, "the model process was not started again within 60 s"
                time.sleep(0.1)
            assert c.post("/v1/ask", json={"question": QUESTIONS[0]}).status_code == 200
    finally:
        remote.close()


def test_the_model_process_reports_a_load_error_in_one_line(sample_run, tmp_path):  # noqa: F811
    from drkit.serve.worker import ModelProcess

    index, run = sample_run
    with pytest.raises(ConfigError, match="does not exist"):
        ModelProcess(index, tmp_path / "no-model")


def wait_until_ready(proc, url: str, timeout_s: float = 120) -> float:
    """Wait for a `drkit serve` subprocess to answer /readyz 200; returns the deadline it was given."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return deadline
        except httpx.TransportError:
            pass
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, "drkit serve did not become ready"
        time.sleep(0.1)


# -- a real process: SIGTERM drains what is in flight --------------------------------------------------------
def test_sigterm_drains_in_flight_requests_and_exits_cleanly(sample_run):  # noqa: F811
    import httpx

    index, run = sample_run
    port = free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([sys.executable, "-m", "drkit", "serve", "--index", str(index), "--model", str(run),
                             "--port", str(port), "--max-wait-ms", "1500"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{port}"
        deadline = wait_until_ready(proc, url)
        with ThreadPoolExecutor(6) as pool:
            # each waits in the batcher for up to 1.5 s: SIGTERM arrives while all are in flight
            futures = [pool.submit(httpx.post, f"{url}/v1/ask", json={"questions": QUESTIONS}, timeout=60)
                       for _ in range(6)]
            while httpx.get(f"{url}/readyz", timeout=5).json()["queued"] < 6 * len(QUESTIONS):
                assert time.monotonic() < deadline and not any(f.done() for f in futures)
                time.sleep(0.01)
            proc.send_signal(signal.SIGTERM)
            responses = [f.result() for f in futures]
        assert [r.status_code for r in responses] == [200] * 6
        assert all(len(r.json()["results"]) == len(QUESTIONS) for r in responses)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "Traceback" not in err and "Finished server process" in err
    finally:
        if proc.poll() is None:
            proc.kill()


# -- live updates: a new index version served without a restart -----------------------------------------------
NEW_FILM = ("1 Zorblax Returns\n2 Zorblax Returns is a 1981 film directed by Irwin Allen.\n"
            "3 It was written by Irwin Allen and stars James Gray.\n")


def test_a_document_added_while_serving_is_answered_without_a_restart(sample_run, tmp_path):  # noqa: F811
    """The default server (the model in its own process) over a copy of the sample index: `drkit add` of a film
    that only the new document names, while a load loop runs; the next batches answer a question about it,
    naming the new version, and no request of the loop fails."""
    import shutil

    import httpx

    from drkit.dense.update import add_documents
    from drkit.serve.worker import ModelProcess

    index, run = sample_run
    shutil.copytree(index, tmp_path / "index")
    shutil.copytree(index.parent / "mentions", tmp_path / "mentions")
    question = "who directed [Zorblax Returns]"
    remote = ModelProcess(tmp_path / "index", run, tmp_path / "mentions", watch_s=0.2)
    try:
        assert "not an entity of the index" in json.loads(remote.run_json([question])[0])["error"]
        with live_server(create_app(remote, ServeConfig())) as url:
            statuses, stop = [], threading.Event()

            def load():
                with httpx.Client(timeout=60) as client:
                    while not stop.is_set():
                        statuses.append(client.post(f"{url}/v1/ask", json={"questions": QUESTIONS[:2]}).status_code)

            loop = threading.Thread(target=load)
            loop.start()
            try:
                (tmp_path / "new.txt").write_text(NEW_FILM, encoding="utf-8")
                (tmp_path / "names.txt").write_text("Zorblax Returns\n", encoding="utf-8")
                report = add_documents(tmp_path / "index", tmp_path / "new.txt", [tmp_path / "mentions"],
                                       entity_lists=[tmp_path / "names.txt"], log=lambda *a: None)
                deadline = time.monotonic() + 60
                while (r := httpx.post(f"{url}/v1/ask", json={"question": question}, timeout=60).json()["results"][0]
                       ).get("index_version") != report["version"] or "error" in r:
                    assert time.monotonic() < deadline, f"the new version was not served within 60 s: {r}"
                    time.sleep(0.1)
            finally:
                stop.set()
                loop.join()
            # the new film is the question entity, and its hop-1 evidence is the new document
            assert r["question_entities"][0]["entity"] == "Zorblax Returns"
            assert any(e["evidence"] and e["evidence"]["title"] == "Zorblax Returns" for e in r["chain"][0]["entities"])
            assert httpx.get(f"{url}/v1/info").json()["index_version"] == report["version"] == 1
            assert statuses and set(statuses) == {200}, sorted(set(statuses))
            assert "drkit_index_version 1.0" in httpx.get(f"{url}/metrics").text
    finally:
        remote.close()


def test_a_new_index_version_keeps_the_reader_loaded_once(sample_run, tiny_base, tmp_path, monkeypatch):  # noqa: F811
    """`Engine.refresh` loads the new index beside the served one; the reader, which is not watched, is not loaded
    from disk again: the new version reads with the same one."""
    import shutil

    from drkit.dense.update import add_documents
    from drkit.reader.model import Reader, ReaderConfig
    from drkit.serve.engine import Engine

    index, run = sample_run
    shutil.copytree(index, tmp_path / "index")
    shutil.copytree(index.parent / "mentions", tmp_path / "mentions")
    Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=96)).save(tmp_path / "reader")
    loads, load = [], Reader.load
    monkeypatch.setattr(Reader, "load", lambda path: loads.append(path) or load(path))
    engine = Engine.load(tmp_path / "index", run, tmp_path / "mentions", reader=tmp_path / "reader")
    first = engine.kit
    (tmp_path / "new.txt").write_text(NEW_FILM, encoding="utf-8")
    (tmp_path / "names.txt").write_text("Zorblax Returns\n", encoding="utf-8")
    add_documents(tmp_path / "index", tmp_path / "new.txt", [tmp_path / "mentions"],
                  entity_lists=[tmp_path / "names.txt"], log=lambda *a: None)
    assert engine.refresh() and engine.kit is not first
    assert engine.kit.reader is first.reader and loads == [tmp_path / "reader"]
    result = engine.kit.answer("who directed [Zorblax Returns]")  # the new version answers, and reads
    assert result.question_entity == "Zorblax Returns" and result.reading is not None


def test_a_multi_hop_kit_with_a_reader_retrieves_without_reading(sample_run, tiny_base, tmp_path, monkeypatch):  # noqa: F811
    """`DrKIT.retrieve` of a multi-hop model gives the passages of a kit without a reader, and does not read
    (`answer` does)."""
    from drkit.reader.model import Reader, ReaderConfig

    index, run = sample_run
    Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=96)).save(tmp_path / "reader")
    kit = DrKIT.load(index, run, reader=tmp_path / "reader")
    read, reader_read = [], kit.reader.read
    monkeypatch.setattr(kit.reader, "read", lambda *a, **k: read.append(1) or reader_read(*a, **k))
    want = [(p.id, p.score) for p in DrKIT.load(index, run).retrieve(QUESTIONS[0], 3)]
    assert want and [(p.id, p.score) for p in kit.retrieve(QUESTIONS[0], 3)] == want and not read
    assert kit.answer(QUESTIONS[0], passages=3).reading is not None and read


def test_sigterm_exits_within_the_drain_time_even_with_a_hung_batch(sample_run):  # noqa: F811
    """The worst case of a drain: the model process hangs (SIGSTOP) inside a batch when SIGTERM arrives. The
    server must still exit, with status 0, within --drain-s (plus the interpreter's own exit), the hung
    request answered 503 before the deadline, and the model process must not outlive it."""
    import httpx

    index, run = sample_run
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "drkit", "serve", "--index", str(index), "--model", str(run),
                             "--port", str(port), "--drain-s", "3", "--max-wait-ms", "0", "--expose-paths"],
                            cwd=ROOT, env=dict(os.environ, PYTHONUNBUFFERED="1"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    url, child = f"http://127.0.0.1:{port}", None
    try:
        deadline = wait_until_ready(proc, url)
        child = httpx.get(f"{url}/v1/info").json()["model_process"]
        os.kill(child, signal.SIGSTOP)  # hung: the next batch never ends by itself
        with ThreadPoolExecutor(1) as pool:
            hung = pool.submit(httpx.post, f"{url}/v1/ask", json={"question": QUESTIONS[0]}, timeout=60)
            while httpx.get(f"{url}/readyz", timeout=5).json()["queued"] < 1:  # its batch is in the model process
                assert time.monotonic() < deadline
                time.sleep(0.01)
            t0 = time.monotonic()
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=60)
            took = time.monotonic() - t0
            refused = hung.result()
        assert proc.returncode == 0, proc.stderr.read()
        assert took < 3 + 3, f"SIGTERM to exit took {took:.1f} s with --drain-s 3"
        # answered before the deadline, with a 503 and a reason, not cut off by uvicorn's forced stop (a bare 500)
        assert refused.status_code == 503 and "shutting down" in refused.json()["error"], refused.text
        gone = time.monotonic() + 10
        while True:  # the hung model process was killed, not left behind
            try:
                os.kill(child, 0)
            except ProcessLookupError:
                break
            with open(f"/proc/{child}/stat") as f:
                if f.read().split(") ")[1].startswith("Z"):  # a zombie is dead, awaiting its reaper
                    break
            assert time.monotonic() < gone, "the model process outlived the server"
            time.sleep(0.1)
    finally:
        if proc.poll() is None:
            proc.kill()
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
