"""Models to serve in the API and browser tests: a 2-hop model over the MetaQA sample shipped in data/sample
(the tiny random transformer of conftest, 4 training steps: the answers are the model's, not good ones), and
a live uvicorn server on a free loopback port."""

from __future__ import annotations

import socket
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
QUESTIONS = ["which person wrote the films acted by [Kyle MacLachlan]",
             "who directed the films written by [Irwin Allen]",
             "who wrote films together with [James Gray]",
             "who acted in the films written by Irwin Allen"]  # plain: the entity is found by name


@pytest.fixture(scope="module")
def sample_run(tmp_path_factory, tiny_base):
    """(index, training run) of a 2-hop model over the sample."""
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.mentions import EmbedConfig, build_mention_index
    from drkit.dense.pretrain import PretrainConfig, pretrain
    from drkit.index.build import build_index
    from drkit.reason.follow import FollowConfig
    from drkit.reason.model import ModelConfig
    from drkit.reason.train import TrainConfig, train

    d = tmp_path_factory.mktemp("serve-sample")
    quiet = lambda *a: None  # noqa: E731
    build_index(SAMPLE / "wiki.txt", d / "index", kb=SAMPLE / "kb.txt", log=quiet)
    pretrain(d / "index", SAMPLE / "kb.txt", d / "enc", PretrainConfig(steps=0, precision="fp32"),
             EncoderConfig(base=str(tiny_base), dim=32), log=quiet)
    build_mention_index(d / "index", d / "enc", d / "mentions", EmbedConfig(precision="fp32"), log=quiet)
    dev = d / "dev.txt"  # a short dev file: the run's model selection only
    dev.write_text("".join((SAMPLE / "2-hop" / "qa_dev.txt").read_text(encoding="utf-8").splitlines(True)[:32]),
                   encoding="utf-8")
    train(d / "index", d / "mentions", SAMPLE / "2-hop" / "qa_train.txt", dev, d / "run",
          model_config=ModelConfig(hops=2, shared_layers=1, hop_layers=1), follow_config=FollowConfig(top_k=100),
          config=TrainConfig(steps=4, batch_size=4, precision="fp32", eval_every=4), log=quiet)
    return d / "index", d / "run"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def live_server(app, port: int | None = None, root_path: str = ""):
    """`app` served by a real uvicorn server on 127.0.0.1 in a thread (`root_path`: as behind a proxy that strips
    that prefix); yields its base URL."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", access_log=False,
                                          root_path=root_path))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the uvicorn server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=30)
