"""The model in a process of its own: `ModelProcess`, an engine for the server whose batches run in a child
process.

Why: the HTTP side (uvicorn, FastAPI) and the model's Python code (tokenizing, the sparse follow's NumPy
steps, the reasoning chain, the JSON of each answer) would otherwise share one interpreter lock. Under load
each then waits for the other, and on 2 cores the model reached about 60% of its in-process batch-64
throughput (benchmarks/bench_serve.py). In its own process the model computes as it does in
``drkit evaluate``, and the HTTP process only moves requests and bytes.

The child loads the `drkit.serve.engine.Engine` itself (spawned, not forked: torch's thread pools do not
survive a fork), reports what it has loaded, then answers ``(request, questions)`` messages with the JSON
text of each result, one batch at a time, in order. It ignores SIGINT and SIGTERM: the server drains its
requests first and then closes the pipe, on which the child exits. The HTTP process keeps the sparse index
(memory-mapped) for ``/v1/entities``.
"""

from __future__ import annotations

import multiprocessing
import signal
import threading
from pathlib import Path

from drkit.errors import ConfigError
from drkit.serve.engine import EngineUnavailable, Request, check_request, entity_passages


def _die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (a parent killed outright cannot close the pipe)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _child(conn, index, model, mentions, load_config, chain_top: int, threads: int, reader=None) -> None:
    _die_with_parent()
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us once its requests are answered
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        from drkit.serve.engine import Engine
        from drkit.util.hardware import configure_threads

        configure_threads(threads, what="the model process")
        engine = Engine.load(index, model, mentions, load_config, chain_top=chain_top, reader=reader)
        conn.send(("ready", {"kind": engine.kind, "max_hops": engine.max_hops, "info": engine.info()}))
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
            return
        request, questions = message
        try:
            conn.send(("ok", engine.run_json(questions, request)))
        except Exception as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}"))


class ModelProcess:
    """The engine interface of `drkit.serve.engine.Engine` (`kind`, `max_hops`, `index`, `check`, `run_json`,
    `entity`, `info`) with `run_json` computed in a child process. `close` stops the child."""

    def __init__(self, index: str | Path, model: str | Path, mentions: str | Path | None = None, load_config=None,
                 chain_top: int = 3, threads: int = 0, timeout_s: float = 600.0, batch_timeout_s: float = 300.0,
                 reader: str | Path | None = None):
        from drkit.index.sparse import SparseIndex
        from drkit.qa.pipeline import LoadConfig

        if not Path(index).is_dir():
            raise ConfigError(f"the index {index} does not exist")
        context = multiprocessing.get_context("spawn")
        self._conn, child_conn = context.Pipe()
        self._process = context.Process(target=_child, name="drkit-model", daemon=True, args=(
            child_conn, str(index), str(model), str(mentions) if mentions else None, load_config or LoadConfig(),
            chain_top, threads, str(reader) if reader else None))
        self.batch_timeout_s = batch_timeout_s
        self._process.start()
        child_conn.close()
        self._lock = threading.Lock()
        try:
            if not self._conn.poll(timeout_s):
                raise ConfigError(f"the model process did not load {model} within {timeout_s:.0f} s")
            status, payload = self._conn.recv()
        except EOFError:
            self.close()
            raise ConfigError(f"the model process exited while loading {model} "
                              f"(exit status {self._process.exitcode})") from None
        except BaseException:  # Ctrl-C while loading, or the time-out above: the child goes too
            self._process.kill()
            self._process.join()
            self._conn.close()
            raise
        if status != "ready":
            self.close()
            raise ConfigError(payload[1] if payload[0] else f"the model process could not load {model}: {payload[1]}")
        self.kind, self.max_hops, self._info = payload["kind"], payload["max_hops"], payload["info"]
        self.index = SparseIndex.load(index)

    @property
    def alive(self) -> bool:
        return self._process.is_alive()

    @property
    def pid(self) -> int:
        return self._process.pid

    def check(self, request: Request) -> None:
        check_request(self.kind, self.max_hops, request)

    def run_json(self, questions, request: Request = Request()) -> list[str]:
        """The JSON text of each question's result (`Engine.run`), computed by the child. `EngineUnavailable`
        when the child has exited, or has not answered within `batch_timeout_s` (it is then killed)."""
        with self._lock:  # one batch at a time, its answer read before the next is sent
            if not self._process.is_alive():
                raise EngineUnavailable(f"the model process has exited (exit status {self._process.exitcode})")
            try:
                self._conn.send((request, list(questions)))
                if not self._conn.poll(self.batch_timeout_s):
                    self._process.kill()
                    self._process.join()
                    raise EngineUnavailable(f"the model process did not answer a batch of {len(questions)} "
                                            f"questions within {self.batch_timeout_s:g} s and was stopped")
                status, payload = self._conn.recv()
            except (EOFError, OSError):
                self._process.join(1.0)
                raise EngineUnavailable(f"the model process has exited (exit status {self._process.exitcode})") \
                    from None
        if status != "ok":
            raise RuntimeError(f"the model process failed on a batch: {payload}")
        return payload

    def entity(self, entity_id: int, limit: int = 10) -> dict:
        return entity_passages(self.index, entity_id, limit)

    def info(self) -> dict:
        return dict(self._info, model_process=self._process.pid)

    def close(self, timeout_s: float = 30.0) -> None:
        """Tell the child to exit (after the batch it is computing) and wait for it."""
        try:
            self._conn.send(None)
        except (OSError, BrokenPipeError):
            pass
        self._process.join(timeout_s)
        if self._process.is_alive():
            self._process.kill()
            self._process.join()
        self._conn.close()
