"""The model in a process of its own: `ModelProcess`, an engine for the server whose batches run in a child
process, watched and started again when it dies.

Why: the HTTP side (uvicorn, FastAPI) and the model's Python code (tokenizing, the sparse follow's NumPy
steps, the reasoning chain, the JSON of each answer) would otherwise share one interpreter lock. Under load
each then waits for the other, and on 2 cores the model reached about 60% of its in-process batch-64
throughput (benchmarks/bench_serve.py). In its own process the model computes as it does in
``drkit evaluate``, and the HTTP process only moves requests and bytes. The index is loaded once, in the
child: entity lookups and ``/v1/info`` go through the same queue as questions (`drkit.serve.engine`).

The child loads the `drkit.serve.engine.Engine` itself (spawned, not forked: torch's thread pools do not
survive a fork), runs its warm-up (`Engine.warm_up`: every lazily built part, so that a wrong ANN or a
missing faiss fails here and not on a request), starts watching the index for new versions, reports what it
has loaded, then answers ``(key, items)`` messages with the JSON text of each result and the index version,
one batch at a time, in order. It ignores SIGINT and SIGTERM: the server drains its requests first and then
closes the pipe, on which the child exits.

**Healing.** A child that exits (killed, out of memory, a crash in native code) or does not answer a batch
within `batch_timeout_s` (it is then killed) is started again by a supervisor thread, after a back-off that
doubles from `restart_backoff_s` up to 30 s while starts keep failing. Meanwhile each batch gets
`EngineUnavailable` (the server answers 503 with Retry-After and ``/readyz`` is red); `restarts` counts the
starts after the first.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import signal
import threading
import time
from pathlib import Path

from drkit.errors import ConfigError
from drkit.reader.reading import ReadConfig
from drkit.serve.views import EngineUnavailable, InfoLookup, Request, check_request
from drkit.util.processes import die_with_parent

log = logging.getLogger("drkit.serve")
MAX_BACKOFF_S = 30.0


def _child(conn, index, model, mentions, load_config, chain_top: int, threads: int, reader=None,
           watch_s: float = 0.0, reading: ReadConfig = ReadConfig()) -> None:
    die_with_parent()  # a parent killed outright cannot close the pipe
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us once its requests are answered
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        from drkit.serve.engine import Engine
        from drkit.util.hardware import configure_threads

        configure_threads(threads, what="the model process")
        engine = Engine.load(index, model, mentions, load_config, chain_top=chain_top, reader=reader, reading=reading)
        engine.warm_up()
        engine.watch(watch_s)
        conn.send(("ready", {"kind": engine.kind, "max_hops": engine.max_hops, "version": engine.version,
                             "entities": engine.index.n_entities, "warm_up_s": engine.warm_up_s}))
    except Exception as exc:  # reported to the parent, which raises it as a one-line error
        conn.send(("failed", (isinstance(exc, ConfigError), f"{type(exc).__name__}: {exc}" if not isinstance(
            exc, ConfigError) else str(exc))))
        return
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            engine.stop_watching()
            return
        key, items = message
        try:
            conn.send(("ok", engine.run_json(items, key), engine.version))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}", engine.version))


class ModelProcess:
    """The engine interface of `drkit.serve.engine.Engine` (`kind`, `max_hops`, `version`, `check`,
    `run_json`, `info`) with `run_json` computed in a child process that is started again when it dies (module
    docstring). `close` stops the child and its supervisor."""

    def __init__(self, index: str | Path, model: str | Path, mentions: str | Path | None = None, load_config=None,
                 chain_top: int = 3, threads: int = 0, load_timeout_s: float = 600.0, batch_timeout_s: float = 60.0,
                 reader: str | Path | None = None, watch_s: float = 0.0, restart_backoff_s: float = 1.0,
                 reading: ReadConfig = ReadConfig()):
        from drkit.qa.pipeline import LoadConfig

        if not Path(index).is_dir():
            raise ConfigError(f"the index {index} does not exist")
        self.model = model
        # `_child`'s arguments, every time the child is started
        self._child_kwargs = {"index": str(index), "model": str(model), "mentions": str(mentions) if mentions else None,
                              "load_config": load_config or LoadConfig(), "chain_top": chain_top, "threads": threads,
                              "reader": str(reader) if reader else None, "watch_s": watch_s, "reading": reading}
        self.load_timeout_s, self.batch_timeout_s = load_timeout_s, batch_timeout_s
        self.restart_backoff_s = restart_backoff_s
        self.restarts = 0
        self.restart_failures = 0
        self._lock = threading.Lock()  # one batch at a time; guards the process and its pipe
        self._closing = threading.Event()
        self._starting = None  # the child being started, until it is ready (`close` kills it)
        self._process, self._conn, ready = self._start()
        self.kind, self.max_hops = ready["kind"], ready["max_hops"]
        self.version, self.n_entities, self.warm_up_s = ready["version"], ready["entities"], ready["warm_up_s"]
        self._supervisor = threading.Thread(target=self._supervise, name="drkit-model-supervisor", daemon=True)
        self._supervisor.start()

    # -- the child's life --------------------------------------------------------------------------
    def _start(self):
        """A new child, loaded and warmed up: (process, pipe, its "ready" report). `ConfigError` saying why
        when it fails or takes longer than `load_timeout_s`."""
        context = multiprocessing.get_context("spawn")
        conn, child_conn = context.Pipe()
        process = context.Process(target=_child, name="drkit-model", daemon=True, args=(child_conn,),
                                  kwargs=self._child_kwargs)
        process.start()
        self._starting = process
        child_conn.close()
        try:
            if not conn.poll(self.load_timeout_s):
                raise ConfigError(f"the model process did not load {self.model} and warm up within "
                                  f"{self.load_timeout_s:g} s (--load-timeout-s)")
            status, payload = conn.recv()
        except EOFError:
            process.join(5.0)
            conn.close()
            raise ConfigError(f"the model process exited while loading {self.model} "
                              f"(exit status {process.exitcode})") from None
        except BaseException:  # Ctrl-C while loading, or the time-out above: the child goes too
            process.kill()
            process.join()
            conn.close()
            raise
        finally:
            self._starting = None
        if status != "ready":
            process.join(5.0)
            conn.close()
            raise ConfigError(payload[1] if payload[0] else f"the model process could not load {self.model}: "
                              f"{payload[1]}")
        return process, conn, payload

    def _supervise(self) -> None:
        """Start the child again whenever it has died, with a doubling back-off while starts fail."""
        failures = 0
        while not self._closing.wait(0.2):
            if self._process.is_alive():
                continue
            log.error("drkit serve: the model process has exited (exit status %s); starting it again",
                      self._process.exitcode)
            while not self._closing.is_set():
                t0 = time.perf_counter()
                try:
                    process, conn, ready = self._start()
                except Exception as exc:
                    failures += 1
                    self.restart_failures += 1
                    wait = min(MAX_BACKOFF_S, self.restart_backoff_s * 2 ** (failures - 1))
                    log.error("drkit serve: the model process could not be started again (%s); next try in %.0f s",
                              exc, wait)
                    if self._closing.wait(wait):
                        return
                    continue
                with self._lock:
                    old = self._conn
                    self._process, self._conn = process, conn
                    self.version = ready["version"]
                old.close()
                if self._closing.is_set():  # closed while starting: `close` may have missed the new child
                    self._stop_child(1.0)
                    return
                self.restarts += 1
                failures = 0
                log.info("drkit serve: the model process is back (start %d, loaded and warmed up in %.1f s)",
                         self.restarts, time.perf_counter() - t0)
                break

    @property
    def alive(self) -> bool:
        """The child is up and can take a batch (false while it is being started again)."""
        return self._process.is_alive()

    @property
    def pid(self) -> int:
        return self._process.pid

    # -- the engine interface ----------------------------------------------------------------------
    def check(self, request: Request) -> None:
        check_request(self.kind, self.max_hops, request)

    def run_json(self, items, key=Request()) -> list[str]:
        """The JSON text of each item's result (`Engine.run_json`), computed by the child. `EngineUnavailable`
        when the child has exited (it is being started again), or has not answered within `batch_timeout_s`
        (it is then killed, and started again)."""
        with self._lock:  # one batch at a time, its answer read before the next is sent
            process, conn = self._process, self._conn
            if not process.is_alive():
                raise EngineUnavailable(f"the model process has exited (exit status {process.exitcode}); it is "
                                        "being started again")
            try:
                conn.send((key, list(items)))
                if not conn.poll(self.batch_timeout_s):
                    process.kill()
                    process.join()
                    raise EngineUnavailable(f"the model process did not answer a batch of {len(items)} items "
                                            f"within {self.batch_timeout_s:g} s (--batch-timeout-s); it was stopped "
                                            "and is being started again")
                status, payload, version = conn.recv()
            except (EOFError, OSError):
                process.join(1.0)
                raise EngineUnavailable(f"the model process has exited (exit status {process.exitcode}); it is "
                                        "being started again") from None
            self.version = version
        if status != "ok":
            raise RuntimeError(f"the model process failed on a batch: {payload}")
        return payload

    def info(self) -> dict:
        info = json.loads(self.run_json([0], InfoLookup())[0])
        return dict(info, model_process=self.pid, restarts=self.restarts)

    def close(self, timeout_s: float = 30.0) -> None:
        """Tell the child to exit (after the batch it is computing) and wait for it at most `timeout_s` seconds
        (then it is killed); a child being started again is killed; then the supervisor stops."""
        deadline = time.monotonic() + timeout_s
        self._closing.set()  # no more starts
        starting = self._starting
        if starting is not None and starting.is_alive():
            starting.kill()
        self._stop_child(timeout_s)
        self._supervisor.join(max(0.0, deadline - time.monotonic()) + 1.0)

    def _stop_child(self, timeout_s: float) -> None:
        try:
            self._conn.send(None)
        except (OSError, BrokenPipeError, ValueError):
            pass
        self._process.join(timeout_s)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()
