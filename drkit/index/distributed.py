"""Linking and TF-IDF counting of a corpus on Ray (``drkit index --engine ray``).

The articles are sent to Ray Data as rows (their fields: plain strings and numbers), and `map_batches`
hands consecutive runs of them to actors that each hold the entity linker and the n-gram hasher. An actor
links, tokenizes and splits its run exactly as `link_corpus` does (linking is per article), counts the
hashed n-grams of its passages, and writes the result to a shard file under the build's work folder; it
returns the run's article range and its counts. The driver checks that the runs tile the articles once
(`check_tiling`: no shard may drop or repeat rows), checks each shard file against what its actor
reported, and hands them on in article order to `drkit.index.stream.write_linked`, which joins them as
it joins the single-process build's runs: the same arrays, bit for bit.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from drkit.data.corpus import Article
from drkit.data.kb import EntityTable
from drkit.errors import DrkitError
from drkit.index.linking import EntityLinker, LinkConfig, LinkedCorpus, link_corpus
from drkit.index.stream import LINKED_ARRAYS, load_counts, save_counts
from drkit.index.tfidf import NgramHasher
from drkit.util.ray_engine import check_tiling, ray_session
from drkit.util.runs import as_saved
from drkit.util.warnlog import WarningLog

_ARRAYS = (*LINKED_ARRAYS, "piece_offsets")


def _article_rows(articles: list[Article]) -> list[dict]:
    return [{"i": i, "key": a.key, "title": a.title, "text": a.text, "line": a.source_line,
             "links": "" if a.links is None else json.dumps([list(x) for x in a.links])}
            for i, a in enumerate(articles)]


def _runs(index: np.ndarray) -> list[tuple[int, int]]:
    """Positions [a, b) of `index` (sorted) where it counts up by one: its consecutive runs."""
    breaks = np.flatnonzero(np.diff(index) != 1) + 1
    edges = np.concatenate(([0], breaks, [len(index)]))
    return list(zip(edges[:-1].tolist(), edges[1:].tolist()))


class _LinkShard:
    """A Ray actor: links and counts runs of articles, writing each run to a shard file."""

    def __init__(self, entity_records: list[dict], link_config: dict, hash_buckets: int, ngram: int, out: str):
        import torch

        torch.set_num_threads(1)
        os.environ["DRKIT_PROGRESS"] = "0"  # no progress bars from the workers
        self.table = EntityTable.from_records(entity_records)
        self.config = as_saved(LinkConfig, link_config)
        self.linker = EntityLinker.of_config(self.table, self.config)
        self.hasher = NgramHasher(hash_buckets, ngram)
        self.out = Path(out)

    def __call__(self, batch: dict) -> dict:
        order = np.argsort(batch["i"], kind="stable")
        index = np.asarray(batch["i"], dtype=np.int64)[order]
        result = {"lo": [], "hi": [], "passages": [], "mentions": [], "path": []}
        for a, b in _runs(index):
            rows = order[a:b]
            articles = [Article(key=str(batch["key"][r]), title=str(batch["title"][r]), text=str(batch["text"][r]),
                                source_line=int(batch["line"][r]),
                                links=None if not batch["links"][r] else tuple(tuple(x) for x in json.loads(batch["links"][r])))
                        for r in rows]
            warnings = WarningLog()
            linked = link_corpus(articles, self.linker, self.config, warnings, entity_of=self.table.lookup)
            counts = self.hasher.count_matrix(linked.passage_texts)
            path = self.out / f"shard-{int(index[a]):012d}"
            path.mkdir(parents=True, exist_ok=True)
            for name in _ARRAYS:
                np.save(path / f"{name}.npy", getattr(linked, name), allow_pickle=False)
            save_counts(path / "counts", counts)
            (path / "strings.json").write_text(json.dumps({"keys": linked.article_keys, "titles": linked.article_titles,
                                                           "texts": linked.passage_texts, "warnings": warnings.to_dict()}))
            for k, v in (("lo", int(index[a])), ("hi", int(index[b - 1]) + 1), ("passages", linked.n_passages),
                         ("mentions", len(linked.mentions)), ("path", str(path))):
                result[k].append(v)
        return {k: np.asarray(v) for k, v in result.items()}


def _read_shard(path: Path, passages: int, mentions: int, hash_buckets: int) -> tuple[LinkedCorpus, sp.csr_matrix, dict]:
    strings = json.loads((path / "strings.json").read_text())
    arrays = {name: np.load(path / f"{name}.npy", allow_pickle=False) for name in _ARRAYS}
    linked = LinkedCorpus(article_keys=strings["keys"], article_titles=strings["titles"], passage_texts=strings["texts"],
                          **arrays)
    counts = load_counts(path / "counts", hash_buckets)
    if linked.n_passages != passages or len(linked.mentions) != mentions or counts.shape[0] != passages:
        raise DrkitError(f"the Ray shard {path} holds {linked.n_passages} passages ({counts.shape[0]} rows of counts) "
                         f"and {len(linked.mentions)} mentions; its worker reported {passages} and {mentions}")
    return linked, counts, strings["warnings"]


def link_and_count_on_ray(articles: list[Article], table: EntityTable, link_config: LinkConfig, hash_buckets: int,
                          ngram: int, work: Path, warnings: WarningLog, shard_articles: int = 2000,
                          num_cpus: int | None = None, address: str | None = None, log=print):
    """`link_corpus(articles, ...)` and the hashed n-gram counts of its passages, computed on Ray in runs of
    at most `shard_articles` articles. Yields ``(LinkedCorpus, counts CSR (passages, hash_buckets))`` for each
    run, in article order (the runs of `drkit.index.stream.write_linked`), once Ray has linked them all and
    their article ranges tile the corpus; each shard file is checked against its worker's report as it is
    read, and deleted once its run is handed on."""
    import dataclasses

    work = Path(work).resolve()  # the workers' path too (on a cluster: storage every node sees)
    work.mkdir(parents=True, exist_ok=True)
    with ray_session(num_cpus, address) as ray:
        workers = max(1, min(int(ray.available_resources().get("CPU", 1)), -(-len(articles) // shard_articles)))
        ds = ray.data.from_items(_article_rows(articles), override_num_blocks=max(1, -(-len(articles) // shard_articles)))
        out = ds.map_batches(_LinkShard, batch_size=shard_articles, concurrency=workers, num_cpus=1,
                             batch_format="numpy",
                             fn_constructor_args=(table.to_records(), dataclasses.asdict(link_config), hash_buckets,
                                                  ngram, str(work)))
        rows = out.take_all()
    log(f"linked {len(articles):,} articles on Ray in {len(rows)} shards ({workers} workers)")
    shards = sorted((int(r["lo"]), int(r["hi"]), int(r["passages"]), int(r["mentions"]), str(r["path"])) for r in rows)
    check_tiling([(lo, hi) for lo, hi, *_ in shards], len(articles), "articles")
    for lo, hi, passages, mentions, path in shards:
        linked, counts, shard_warnings = _read_shard(Path(path), passages, mentions, hash_buckets)
        if len(linked.article_keys) != hi - lo:
            raise DrkitError(f"the Ray shard {path} holds {len(linked.article_keys)} articles, not {hi - lo}")
        warnings.merge(shard_warnings)
        yield linked, counts
        shutil.rmtree(path, ignore_errors=True)  # written into the index by now: not two copies on disk
