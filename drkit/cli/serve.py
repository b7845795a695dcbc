"""``drkit serve``: the HTTP API and web page over one trained model (`drkit.serve`)."""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import sys
import time

from drkit.cli.flags import add_config_flags, command, config_from_args
from drkit.errors import ConfigError

ENV = "DRKIT_"  # every setting of drkit serve may come from DRKIT_<FLAG NAME>, e.g. DRKIT_MAX_BATCH=32


@command(
    "serve",
    help="serve a trained model over HTTP: a JSON API with dynamic batching and a web page of the reasoning chain",
    description="Load the index and the model once and answer over HTTP (FastAPI on uvicorn; needs the serve extra, "
    "pip install 'drkit[serve]'). POST /v1/ask takes {\"question\": ...} or {\"questions\": [...]} (optional "
    "top_k, hops, chain) and returns the answers with scores and the reasoning chain: per hop, the entities and "
    "the mention supporting each (passage id, title, text, character offsets); a hop-mixing model adds the "
    "ranked passages and the hop weights pi. GET /healthz, /readyz, /v1/info (manifests, counts, checksums), "
    "/v1/entities/ID (an entity's passages), /metrics (Prometheus), /docs (OpenAPI) and / (the web page). "
    "Concurrent requests are answered in one batched forward pass (--max-batch, --max-wait-ms); a question's "
    "answer does not depend on its batch. /readyz turns green once the model has loaded and answered a warm-up "
    "question; a model process that dies is started again; a new version of the index (drkit add, remove) is "
    "served from the next batch without a restart. Listens on loopback unless --allow-remote; SIGTERM or "
    "Ctrl-C finishes the requests in flight and exits within --drain-s seconds. Every flag may also be given "
    "as an environment variable, DRKIT_ and the flag's name in capitals with underscores (DRKIT_INDEX, "
    "DRKIT_MAX_BATCH, DRKIT_ROOT_PATH, ...); a flag given wins.",
)
def _serve_parser(p) -> None:
    from drkit.qa.pipeline import LoadConfig
    from drkit.serve.config import ServeConfig

    for name, help_text in (("index", "sparse index"),
                            ("model", "trained model: a 'drkit train' or 'drkit train-mixing' run, or its model/ "
                                      "directory"),
                            ("mentions", "mention index (default: the one the model was trained with)"),
                            ("reader", "a reader trained by 'drkit train-reader': every result then carries its "
                                       "answer read from the top 5 passages, with the supporting sentences (shown "
                                       "highlighted on the page)")):
        variable = ENV + name.upper()
        required = name in ("index", "model") and not os.environ.get(variable)
        p.add_argument(f"--{name}", required=required, metavar="DIR", default=os.environ.get(variable) or None,
                       help=f"{help_text} (environment: {variable})")
    add_config_flags(p, LoadConfig, "virtual KB", env_prefix=ENV)
    add_config_flags(p, ServeConfig, "server", env_prefix=ENV)
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
    from drkit.serve.config import ServeConfig

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
    load_config = config_from_args(args, LoadConfig)
    print(f"drkit serve: loading {args.model} over {args.index}"
          + (" in a model process" if config.model_process else "") + ", then a warm-up question", file=sys.stderr)
    if config.model_process:
        configure_threads(1, what="the HTTP process")  # it only parses, queues and formats: the model has the cores
        engine = ModelProcess(args.index, args.model, args.mentions, load_config, config.chain_top, config.threads,
                              load_timeout_s=config.load_timeout_s, batch_timeout_s=config.batch_timeout_s,
                              reader=args.reader, watch_s=config.watch_s, restart_backoff_s=config.restart_backoff_s,
                              reading=config.reading())
    else:
        configure_threads(config.threads)
        engine = Engine.load(args.index, args.model, args.mentions, load_config, chain_top=config.chain_top,
                             reader=args.reader, reading=config.reading())
        engine.warm_up()
        engine.watch(config.watch_s)
    print(f"drkit serve: loaded; the warm-up question took {engine.warm_up_s:.2f} s; index version "
          f"{engine.version}", file=sys.stderr)
    deadline = []
    try:
        return _serve(engine, config, deadline)
    finally:
        left = max(0.0, deadline[0] - time.monotonic()) if deadline else config.drain_s
        if config.model_process:
            engine.close(left)
        else:
            engine.stop_watching()


def _serve(engine, config, deadline: list) -> int:
    """Serve `engine` until a signal; `deadline` gets the `time.monotonic` time by which the whole shutdown
    must be done (the signal's time plus --drain-s)."""
    import uvicorn

    from drkit.serve.app import create_app

    app = create_app(engine, config)
    host = f"[{config.host}]" if ":" in config.host else config.host
    print(f"drkit serve: the page is at http://{host}:{config.port}{config.root_path}/ and the API's documentation "
          f"at http://{host}:{config.port}{config.root_path}/docs", file=sys.stderr)

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):  # the signal's time starts the drain's clock
            if not deadline:
                deadline.append(time.monotonic() + config.drain_s)
                app.state.drain_by(deadline[0])
            super().handle_exit(sig, frame)

    # uvicorn's own drain (the connections in flight) gets most of --drain-s, the queue and the model process
    # what is left of it (`create_app`'s lifespan, `_run_serve`)
    server = Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="info", access_log=False,
                                   root_path=config.root_path,
                                   timeout_graceful_shutdown=max(0.1, 0.8 * config.drain_s)))
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
