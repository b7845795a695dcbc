"""Shared fixtures: a toy corpus and KB built into a sparse index, and a tiny random transformer that
uses the real all-MiniLM-L6-v2 tokenizer (so encoder tests run in seconds).

The suite computes on the CPU wherever it runs (DRKIT_DEVICE=cpu makes `auto` the CPU): its exact checks are
the CPU's. tests/test_gpu.py asks for CUDA by name where a GPU is present."""

import os

import pytest

os.environ.setdefault("DRKIT_DEVICE", "cpu")


def worker_cpus(cpus: list[int], quota: int, workers: int, me: int) -> list[int]:
    """The CPUs xdist worker `me` of `workers` keeps to: every `workers`-th of `cpus` (its affinity), at most its
    share of a cgroup CPU `quota` (`quota` whole CPUs; the affinity's size when there is none); with more workers than
    CPUs, one CPU, shared round-robin."""
    if workers >= len(cpus):
        return [cpus[me % len(cpus)]]
    return cpus[me % workers::workers][: max(1, min(quota, len(cpus)) // workers)]


def _pin_xdist_worker() -> None:
    """Under pytest-xdist (`make test` runs one worker per CPU, at most 4), each worker and the processes it starts
    keep to CPUs of their own (`worker_cpus`): drkit sizes torch's threads from the CPUs it may run on, so the
    workers do not oversubscribe the machine, nor a CPU quota smaller than the CPUs it shows."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    if not worker.startswith("gw") or not hasattr(os, "sched_setaffinity"):
        return
    from drkit.util.hardware import available_cpus  # the affinity capped by a cgroup quota

    cpus = sorted(os.sched_getaffinity(0))
    mine = worker_cpus(cpus, available_cpus(), max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))),
                       int(worker[2:]))
    os.sched_setaffinity(0, mine)
    import torch

    torch.set_num_threads(len(mine))


_pin_xdist_worker()

TOY_WIKI = """1 Kismet
2 Kismet is a 1944 film directed by William Dieterle.
3 It stars Marlene Dietrich and Ronald Colman.

1 Moon Over Miami
2 Moon Over Miami was directed by Walter Lang.
3 It stars Betty Grable and Don Ameche.

1 Juarez
2 Juarez was written by William Dieterle and stars Bette Davis.

1 Kismet Revisited
2 Kismet was remade later with Howard Keel.

1 Casablanca
2 Casablanca stars Humphrey Bogart and Ingrid Bergman.
3 Casablanca was directed by Michael Curtiz.

1 State Fair
2 State Fair was directed by Walter Lang and stars Dana Andrews.
"""

TOY_KB = """Kismet|directed_by|William Dieterle
Kismet|starred_actors|Marlene Dietrich
Kismet|starred_actors|Ronald Colman
Kismet|release_year|1944
Moon Over Miami|directed_by|Walter Lang
Moon Over Miami|starred_actors|Betty Grable
Moon Over Miami|starred_actors|Don Ameche
Juarez|written_by|William Dieterle
Juarez|starred_actors|Bette Davis
Kismet Revisited|starred_actors|Howard Keel
Casablanca|starred_actors|Humphrey Bogart
Casablanca|starred_actors|Ingrid Bergman
Casablanca|directed_by|Michael Curtiz
State Fair|directed_by|Walter Lang
State Fair|starred_actors|Dana Andrews
"""


@pytest.fixture(scope="session")
def toy_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("toy")
    (d / "wiki.txt").write_text(TOY_WIKI, encoding="utf-8")
    (d / "kb.txt").write_text(TOY_KB, encoding="utf-8")
    return d


@pytest.fixture(scope="session")
def toy_index(toy_files):
    from drkit.index.build import build_index

    return build_index(toy_files / "wiki.txt", toy_files / "index", kb=toy_files / "kb.txt", log=lambda *a: None)


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory):
    """A 2-layer, 32-wide BERT with random weights (seeded) and the all-MiniLM-L6-v2 tokenizer."""
    import torch
    from transformers import BertConfig, BertModel

    from drkit.data.tokenizer import load_tokenizer

    d = tmp_path_factory.mktemp("tiny-bert")
    torch.manual_seed(0)
    tok = load_tokenizer()
    model = BertModel(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=512))
    model.save_pretrained(str(d))
    tok.save_pretrained(str(d))
    return d


@pytest.fixture(scope="module")
def tiny_reader(tiny_base):
    """A reader on `tiny_base` (random weights) that reads at most 96 word pieces, for the reader's tests."""
    from drkit.reader.model import Reader, ReaderConfig

    return Reader.from_base(ReaderConfig(base=str(tiny_base), max_pieces=96, max_question_pieces=12, max_answer_pieces=6))
