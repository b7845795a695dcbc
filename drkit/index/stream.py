"""Link a corpus in runs of articles and write it into the index as it goes: a build that streams.

`link_runs` reads the articles, links, tokenizes and splits them in runs of `run_articles`
(`link_corpus`, which works article by article, so the runs give the passages of one call) and counts
the hashed n-grams of each run's passages. `write_linked` takes runs in article order (from `link_runs`,
or from the Ray engine's shard files), shifts their article, passage and piece ids as
linking all the articles at once would number them, and appends them to the index being written: passage texts and article
records at once, the id arrays to raw files that become ``.npy`` at the end, each run's n-gram counts to
a work folder, their document frequencies summed. Memory holds one run, the document frequencies and
per-passage offsets, never the whole corpus; `drkit.index.sparse.sparse_from_counts` then reads the
counts back run by run.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np
import scipy.sparse as sp

from drkit.data.corpus import Article
from drkit.index.linking import EntityLinker, LinkConfig, LinkedCorpus, MentionColumns, link_corpus
from drkit.index.tfidf import NgramHasher
from drkit.util.artifact import ArtifactWriter
from drkit.util.progress import progress
from drkit.util.warnlog import WarningLog

RUN_ARTICLES = 50_000  # articles linked at a time by the single-process build
CACHE_GRAMS = 1 << 20  # the n-gram hasher's cache is emptied past this many distinct n-grams (~200 MB)

# a LinkedCorpus's arrays appended run by run (with piece_offsets, shifted): name -> (dtype, trailing shape, note)
_APPENDED = {
    "passage_article": (np.int32, (), ""),
    "passage_char_start": (np.int64, (), ""),
    "passage_title_chars": (np.int32, (), "the carried title line, title + newline"),
    "pieces": (np.int32, (), "word-piece ids, no special tokens"),
    "mentions": (np.int32, (6,), "columns: " + ", ".join(LinkedCorpus.MENTION_COLUMNS)),
}
LINKED_ARRAYS = tuple(_APPENDED)


@dataclass
class StreamedCorpus(MentionColumns):
    """A linked corpus written into an index by `write_linked`: its sizes, its mentions (memory-mapped from
    the index being written), and its n-gram counts, kept run by run in a work folder."""

    n_articles: int
    n_passages: int
    mentions: np.ndarray  # (M, 6) int32, passage ids global
    df: np.ndarray | None  # (hash_buckets,) int64 document frequencies; None when no counts were given
    count_dir: Path
    n_runs: int
    hash_buckets: int

    def counts(self) -> Iterator[sp.csr_matrix]:
        """Each run's (passages, hash_buckets) counts, in passage order."""
        for i in range(self.n_runs):
            yield load_counts(self.count_dir / f"counts-{i:06d}", self.hash_buckets)


def save_counts(prefix: Path, counts: sp.csr_matrix) -> None:
    """A CSR count matrix as three ``.npy`` files, ``PREFIX-{data,indices,indptr}.npy``."""
    for k in ("data", "indices", "indptr"):
        np.save(f"{prefix}-{k}.npy", getattr(counts, k), allow_pickle=False)


def load_counts(prefix: Path, n_columns: int) -> sp.csr_matrix:
    data, indices, indptr = (np.load(f"{prefix}-{k}.npy", allow_pickle=False) for k in ("data", "indices", "indptr"))
    return sp.csr_matrix((data, indices, indptr), shape=(len(indptr) - 1, n_columns))


def link_runs(articles: Iterable[Article], linker: EntityLinker, config: LinkConfig, warnings: WarningLog,
              hasher: NgramHasher, entity_of=None, run_articles: int = RUN_ARTICLES,
              total: int | None = None) -> Iterator[tuple[LinkedCorpus, sp.csr_matrix]]:
    """``(LinkedCorpus, n-gram counts of its passages)`` for each run of `run_articles` articles, in order."""
    def run(batch: list[Article]):
        linked = link_corpus(batch, linker, config, warnings, entity_of=entity_of, quiet=True)
        counts = hasher.count_matrix(linked.passage_texts)
        if hasher.cache_size > CACHE_GRAMS:  # bounded memory over a corpus of many distinct n-grams
            hasher.clear_cache()
        return linked, counts

    batch: list[Article] = []
    for article in progress(articles, desc="link", unit="article", total=total):
        batch.append(article)
        if len(batch) == run_articles:
            yield run(batch)
            batch = []
    if batch:
        yield run(batch)


def write_linked(runs: Iterable[tuple[LinkedCorpus, sp.csr_matrix | None]], w: ArtifactWriter, work: Path,
                 hash_buckets: int) -> StreamedCorpus:
    """Write `runs` (consecutive runs of articles, each linked on its own, with their counts or None) into the
    index `w` as one corpus: ``articles.jsonl``, ``passage_text.bin`` and its offsets, `_APPENDED` and
    ``piece_offsets``, the same files as linking all the articles at once would give. Counts go to `work`."""
    work.mkdir(parents=True, exist_ok=True)
    raw = {name: open(work / f"{name}.bin", "wb") for name in _APPENDED}
    text_offsets, piece_offsets = [np.zeros(1, np.int64)], [np.zeros(1, np.int64)]
    n_articles = n_passages = n_pieces = text_bytes = n_runs = 0
    df = None
    try:
        with open(w.path("passage_text.bin"), "wb") as text, w.jsonl("articles.jsonl", note="row = article id") as add:
            for linked, counts in runs:
                encoded = [t.encode("utf-8") for t in linked.passage_texts]
                text.write(b"".join(encoded))
                text_offsets.append(text_bytes + np.cumsum(np.fromiter(map(len, encoded), np.int64, len(encoded))))
                text_bytes = int(text_offsets[-1][-1]) if len(encoded) else text_bytes
                for key, title in zip(linked.article_keys, linked.article_titles):
                    add({"key": key, "title": title})
                mentions = np.array(linked.mentions, dtype=np.int32).reshape(-1, 6)
                mentions[:, 1] += n_passages
                shifted = {"passage_article": linked.passage_article + n_articles, "mentions": mentions}
                for name, (dtype, _, _) in _APPENDED.items():
                    raw[name].write(np.ascontiguousarray(shifted.get(name, getattr(linked, name)), dtype=dtype).tobytes())
                piece_offsets.append(linked.piece_offsets[1:] + n_pieces)
                if counts is not None:
                    df = np.zeros(hash_buckets, np.int64) if df is None else df
                    df += np.bincount(counts.indices, minlength=hash_buckets)
                    save_counts(work / f"counts-{n_runs:06d}", counts)
                n_articles += len(linked.article_keys)
                n_passages += linked.n_passages
                n_pieces += int(linked.piece_offsets[-1])
                n_runs += 1
    finally:
        for f in raw.values():
            f.close()
    w.files["passage_text.bin"] = {"bytes": text_bytes, "note": "UTF-8, sliced by passage_text_offsets"}
    w.save_array("passage_text_offsets", np.concatenate(text_offsets))
    for name, (dtype, trailing, note) in _APPENDED.items():
        _raw_to_npy(work / f"{name}.bin", w, name, dtype, trailing, note)
    w.save_array("piece_offsets", np.concatenate(piece_offsets))
    mentions = np.load(w.path("mentions.npy"), mmap_mode="r")
    return StreamedCorpus(n_articles, n_passages, mentions, df, work, n_runs if df is not None else 0, hash_buckets)


def _raw_to_npy(raw: Path, w: ArtifactWriter, name: str, dtype, trailing: tuple, note: str) -> None:
    """The raw array file `raw` as ``name.npy`` in `w` (a header, then its bytes copied by reads and writes,
    not mapped: gigabytes of pieces do not count in the build's memory); `raw` is deleted."""
    dtype = np.dtype(dtype)
    width = dtype.itemsize * int(np.prod(trailing, dtype=np.int64))
    shape = (raw.stat().st_size // width,) + tuple(trailing)
    with open(w.path(f"{name}.npy"), "wb") as out, open(raw, "rb") as src:
        np.lib.format.write_array_header_1_0(out, {"descr": np.lib.format.dtype_to_descr(dtype),
                                                   "fortran_order": False, "shape": shape})
        shutil.copyfileobj(src, out, 1 << 24)
    w.files[f"{name}.npy"] = {"dtype": str(dtype), "shape": list(shape), "note": note}
    raw.unlink()
