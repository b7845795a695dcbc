"""`--engine ray`: linking, splitting and n-gram counting on Ray Data (actors over runs of articles) and
mention embedding on Ray, against the single-process builds: the same arrays, bit for bit. Ray runs on
this machine (``ray.init(num_cpus=2)``); without Ray installed these tests say why they skip."""

import json
from pathlib import Path

import numpy as np
import pytest
from benchmark_scripts import load_benchmark
from test_model import films_kb  # noqa: F401  (a fixture)

from drkit.errors import DrkitError
from drkit.index.build import build_index
from drkit.index.linking import LinkConfig
from drkit.util.ray_engine import check_tiling

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"


@pytest.fixture(scope="module")
def ray_running():
    ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'drkit[ray]')")
    pytest.importorskip("ray.data", reason="Ray Data is not installed (pip install 'ray[data]')")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def same_index(a: Path, b: Path) -> None:
    """Every file of two index folders equal, but the manifest's creation time and command and the report's
    timings."""
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        if name.endswith(".npy"):
            x, y = np.load(a / name), np.load(b / name)
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        elif name == "manifest.json":
            ma, mb = (json.loads((p / name).read_text()) for p in (a, b))
            for m in (ma, mb):
                m.pop("created"), m.pop("command")
            assert ma == mb
        elif name == "report.json":
            ra, rb = (json.loads((p / name).read_text()) for p in (a, b))
            ra.pop("timings_s"), rb.pop("timings_s")
            assert ra == rb
        else:
            assert (a / name).read_bytes() == (b / name).read_bytes(), name


def synthetic_corpus(path: Path, n: int) -> None:
    load_benchmark("bench_scale").write_corpus(path, n, seed=3)


def test_ray_index_equals_the_single_process_index(ray_running, tmp_path):
    """One JSONL corpus with both kinds of article: the sample's WikiMovies articles (no links: the linker
    finds the mentions; long ones cut into passages) and a synthetic title-entity corpus with hyperlinks;
    entities: every title plus the sample KB's. Linked in runs of 53 articles on Ray."""
    from drkit.data.corpus import read_corpus
    from drkit.data.kb import entities_from_kb, read_kb
    from drkit.util.warnlog import WarningLog

    quiet = lambda *a: None  # noqa: E731
    synthetic_corpus(tmp_path / "links.jsonl", 300)
    with open(tmp_path / "corpus.jsonl", "w") as f:
        for a in read_corpus(SAMPLE / "wiki.txt", "wikimovies", WarningLog()):
            f.write(json.dumps({"id": f"wm{a.key}", "title": a.title, "text": a.text}) + "\n")
        f.write((tmp_path / "links.jsonl").read_text())
    (tmp_path / "names.txt").write_text("\n".join(entities_from_kb(list(read_kb(SAMPLE / "kb.txt"))).names) + "\n")
    kw = dict(entities=["titles", tmp_path / "names.txt"], link_config=LinkConfig(max_passage_pieces=48), log=quiet)
    build_index(tmp_path / "corpus.jsonl", tmp_path / "local", **kw)
    built = build_index(tmp_path / "corpus.jsonl", tmp_path / "ray", engine="ray", shard_articles=53, **kw)
    assert built.n_passages > 654 and not [p for p in tmp_path.iterdir() if ".link-work" in p.name]
    same_index(tmp_path / "local", tmp_path / "ray")


def test_ray_embedding_equals_the_single_process_embedding(ray_running, films_kb, tmp_path):  # noqa: F811
    """The films index of test_model with its tiny encoder, embedded on Ray actors in small encoder batches."""
    from drkit.dense.mentions import EmbedConfig, build_mention_index

    d, _ = films_kb
    quiet = lambda *a: None  # noqa: E731
    config = EmbedConfig(precision="fp32", batch_tokens=128)
    local = build_mention_index(d / "index", d / "enc", tmp_path / "m-local", config, log=quiet)
    on_ray = build_mention_index(d / "index", d / "enc", tmp_path / "m-ray", config, log=quiet, engine="ray")
    assert on_ray.manifest["embedding"]["engine"] == "ray" and len(on_ray) > 100
    assert np.array_equal(np.asarray(local.vectors), np.asarray(on_ray.vectors))  # the same batches, the same code
    assert not (tmp_path / ".m-ray.partial").exists()


def test_check_tiling_refuses_a_lost_or_repeated_shard():
    assert check_tiling([(5, 9), (0, 5)], 9, "articles") == [(0, 5), (5, 9)]
    with pytest.raises(DrkitError, match="5..6 are missing"):
        check_tiling([(0, 5), (7, 9)], 9, "articles")
    with pytest.raises(DrkitError, match="come twice"):
        check_tiling([(0, 5), (3, 9)], 9, "articles")
    with pytest.raises(DrkitError, match="8..8 of 9"):
        check_tiling([(0, 5), (5, 8)], 9, "articles")
