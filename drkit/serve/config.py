"""The settings of ``drkit serve`` (`ServeConfig`), each checked when the server starts."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from drkit.errors import ConfigError
from drkit.reader.reading import ReadConfig, read_field

LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class ServeConfig:
    """Settings of ``drkit serve``."""

    host: str = field(default="127.0.0.1", metadata={"help": "address to listen on; anything but loopback needs "
                                                             "--allow-remote"})
    port: int = field(default=8000, metadata={"help": "port to listen on"})
    allow_remote: bool = field(default=False, metadata={"help": "allow --host to be an address other hosts can reach "
                                                                "(the API has no authentication)"})
    max_batch: int = field(default=64, metadata={"help": "most questions answered in one batched forward pass"})
    max_wait_ms: float = field(default=5.0, metadata={"help": "longest a request waits for others to fill its batch"})
    max_queue: int = field(default=256, metadata={"help": "most questions waiting; beyond, 503 with Retry-After"})
    max_body_bytes: int = field(default=64 * 1024, metadata={"help": "largest request body (413 beyond)"})
    max_questions: int = field(default=64, metadata={"help": "most questions in one request"})
    max_chars: int = field(default=1000, metadata={"help": "longest question, in characters"})
    chain_top: int = field(default=3, metadata={"help": "entities shown per hop of the reasoning chain"})
    compare: bool = field(default=True, metadata={"help": "with --reader: the dates or countries read in the top "
                                                          "passages settle a which-of-two or same-country question "
                                                          "where they can (--no-compare: the reader's answer alone)"})
    skip_bridges: bool = read_field("skip_bridges", "with --reader: ")
    decompose: bool = read_field("decompose", "with --reader: ")
    span_checks: bool = read_field("span_checks", "with --reader: ")
    reader_quantize: str = read_field("reader_quantize", "with --reader: ")
    threads: int = field(default=0, metadata={"help": "torch threads for the model (0: every CPU the process may use)"})
    model_process: bool = field(default=True, metadata={"help": "compute the model in a process of its own, so that "
                                                                "it never waits for the HTTP side's interpreter lock "
                                                                "(--no-model-process: in the server's process)"})
    drain_s: float = field(default=10.0, metadata={"help": "on SIGTERM, the whole shutdown (the requests in flight, "
                                                           "the queue, the model process) ends within this many "
                                                           "seconds"})
    load_timeout_s: float = field(default=600.0, metadata={"help": "longest the model process may take to load and "
                                                                   "warm up, at start and each time it is started "
                                                                   "again"})
    batch_timeout_s: float = field(default=60.0, metadata={"help": "longest one batch may take; a model process "
                                                                   "over it is stopped and started again (503 "
                                                                   "meanwhile)"})
    restart_backoff_s: float = field(default=1.0, metadata={"help": "wait before starting a failed model process "
                                                                    "again; it doubles, up to 30 s, while starts fail"})
    watch_s: float = field(default=2.0, metadata={"help": "how often the index's version file (INDEX/CURRENT) is "
                                                          "read: a new version (drkit add, remove) is loaded beside "
                                                          "the old one and served from the next batch, no restart "
                                                          "(0: never)"})
    root_path: str = field(default="", metadata={"help": "the path prefix under which a reverse proxy serves the "
                                                         "API, e.g. /drkit (the proxy strips it)"})
    expose_paths: bool = field(default=False, metadata={"help": "let /v1/info show absolute paths, command lines "
                                                                "and the model process id"})
    access_log: bool = field(default=True, metadata={"help": "log one JSON line per request (request id, method, "
                                                             "path, status, ms) on stderr"})

    def __post_init__(self):
        if self.host not in LOOPBACK and not self.allow_remote:
            raise ConfigError(f"--host {self.host} would open the API (which has no authentication) to other hosts; "
                              "pass --allow-remote to do so")
        if not 0 < self.port < 65536:
            raise ConfigError(f"port must be between 1 and 65535, got {self.port}")
        if self.max_batch < 1 or self.max_queue < max(self.max_batch, self.max_questions) or self.max_wait_ms < 0:
            raise ConfigError("max_batch must be at least 1, max_queue at least max_batch and max_questions (a "
                              "request must fit in the queue), and max_wait_ms at least 0")
        if self.max_body_bytes < 1024 or self.max_questions < 1 or self.max_chars < 1 or self.chain_top < 1:
            raise ConfigError("max_body_bytes must be at least 1024; max_questions, max_chars and chain_top at least 1")
        for name in ("max_wait_ms", "drain_s", "load_timeout_s", "batch_timeout_s", "restart_backoff_s", "watch_s"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number of at least 0, got {value}")
        for name in ("load_timeout_s", "batch_timeout_s"):
            if getattr(self, name) <= 0:
                raise ConfigError(f"{name} must be more than 0, got {getattr(self, name)}")
        if self.threads < 0:
            raise ConfigError("threads must be at least 0")
        if self.root_path and (not self.root_path.startswith("/") or self.root_path.endswith("/")
                               or not re.fullmatch(r"[A-Za-z0-9._~/-]+", self.root_path)):
            raise ConfigError(f"root_path must be empty or a path such as /drkit (a leading slash, none at the end, "
                              f"letters, digits and ._~-), got {self.root_path!r}")

    def reading(self) -> ReadConfig:
        """How the reader reads (with --reader): the comparison rules and the bridges' titles as set here."""
        return ReadConfig.of(self)
