"""``drkit serve``: the HTTP API and web page over one trained model (`drkit.serve`)."""

from __future__ import annotations

import errno
import logging
import signal
import socket
import sys

from drkit.cli.flags import add_config_flags, config_from_args
from drkit.errors import ConfigError


def _serve_parser(sub) -> None:
    from drkit.qa.pipeline import LoadConfig
    from drkit.serve.app import ServeConfig

    p = sub.add_parser(
        "serve",
        help="serve a trained model over HTTP: a JSON API with dynamic batching and a web page of the reasoning chain",
        description="Load the index and the model once and answer over HTTP (FastAPI on uvicorn; needs the serve extra, "
        "pip install 'drkit[serve]'). POST /v1/ask takes {\"question\": ...} or {\"questions\": [...]} (optional "
        "top_k, hops, chain) and returns the answers with scores and the reasoning chain: per hop, the entities and "
        "the mention supporting each (passage id, title, text, character offsets); a hop-mixing model adds the "
        "ranked passages and the hop weights pi. GET /healthz, /readyz, /v1/info (manifests, counts, checksums), "
        "/v1/entities/ID (an entity's passages), /docs (OpenAPI) and / (the web page). Concurrent requests are "
        "answered in one batched forward pass (--max-batch, --max-wait-ms); a question's answer does not depend on "
        "its batch. Listens on loopback unless --allow-remote; SIGTERM or Ctrl-C finishes the requests in flight "
        "(up to --drain-s seconds), then exits.",
    )
    p.add_argument("--index", required=True, metavar="DIR", help="sparse index")
    p.add_argument("--model", required=True, metavar="DIR",
                   help="trained model: a 'drkit train' or 'drkit train-mixing' run, or its model/ directory")
    p.add_argument("--mentions", metavar="DIR", default=None,
                   help="mention index (default: the one the model was trained with)")
    p.add_argument("--reader", metavar="DIR", default=None,
                   help="a reader trained by 'drkit train-reader': every result then carries its answer read from the "
                   "top 5 passages, with the supporting sentences (shown highlighted on the page)")
    add_config_flags(p, LoadConfig, "virtual KB")
    add_config_flags(p, ServeConfig, "server")
    p.set_defaults(run=_run_serve)


def check_port_free(host: str, port: int) -> None:
    """`ConfigError` when `host:port` cannot be listened on (in use, or not an address of this machine)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(f"port {port} on {host} is in use; pass another --port") from None
            raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None


def _run_serve(args) -> int:
    from drkit.qa.pipeline import LoadConfig
    from drkit.serve.app import ServeConfig

    config = config_from_args(args, ServeConfig)
    try:
        import fastapi  # noqa: F401
        import fastapi_offline  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"drkit serve needs the serve extra ({exc.name} is not installed): "
                          "pip install 'drkit[serve]'") from None
    check_port_free(config.host, config.port)
    from drkit.serve.engine import Engine
    from drkit.serve.worker import ModelProcess
    from drkit.util.hardware import configure_threads

    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(message)s", stream=sys.stderr)
    print(f"drkit serve: loading {args.model} over {args.index}"
          + (" in a model process" if config.model_process else ""), file=sys.stderr)
    load_config = config_from_args(args, LoadConfig)
    if config.model_process:
        configure_threads(1, what="the HTTP process")  # it only parses, queues and formats: the model has the cores
        engine = ModelProcess(args.index, args.model, args.mentions, load_config, config.chain_top, config.threads,
                              reader=args.reader)
    else:
        configure_threads(config.threads)
        engine = Engine.load(args.index, args.model, args.mentions, load_config, chain_top=config.chain_top,
                             reader=args.reader)
    try:
        return _serve(engine, config)
    finally:
        if config.model_process:
            engine.close()


def _serve(engine, config) -> int:
    import uvicorn

    from drkit.serve.app import create_app

    app = create_app(engine, config)
    host = f"[{config.host}]" if ":" in config.host else config.host
    print(f"drkit serve: the page is at http://{host}:{config.port}/ and the API's documentation at "
          f"http://{host}:{config.port}/docs", file=sys.stderr)
    server = uvicorn.Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="info",
                                          access_log=False, timeout_graceful_shutdown=config.drain_s))
    # uvicorn handles SIGTERM and SIGINT itself (stop accepting, finish the requests in flight, stop the batch
    # worker) and then raises the signal again with the handlers it found in place: these, so that a drained
    # server exits with status 0 instead of being killed by the signal it has already handled.
    stopped_by = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda s, frame: stopped_by.append(signal.Signals(s).name))
    server.run()
    if not server.started:  # uvicorn logged why (e.g. the port was taken in the meantime)
        raise ConfigError(f"the server could not start on {config.host}:{config.port}")
    print(f"drkit serve: stopped{' by ' + stopped_by[0] if stopped_by else ''}, requests in flight answered",
          file=sys.stderr)
    return 0


def add_parsers(sub) -> None:
    _serve_parser(sub)
