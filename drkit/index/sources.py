"""The corpus files of an index, read again: the live articles of a grown index in the order it indexes them,
for `drkit compact` (`drkit.dense.update.compact`), and the names and ids of a segment's copy of its file
(`drkit.index.segments`).

An index's manifest lists its ``sources``: ``[{"file", "format", "sha256", "skip": [positions left out],
"key_prefix"}]``; a path that is not absolute is inside the index (a compacted index keeps copies of its
files in ``sources/``). A segment keeps a copy of its added file as ``corpus.jsonl`` or ``corpus.txt``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np

from drkit.data.corpus import read_corpus
from drkit.errors import ArtifactError, ConfigError
from drkit.index.live import SEGMENTS, read_state
from drkit.index.sparse import SparseIndex
from drkit.util.artifact import file_checksum
from drkit.util.warnlog import WarningLog


def key_prefix(seg_id: str, corpus_format: str) -> str:
    """What the ids of a segment's articles start with: nothing for JSONL (its ids are the user's, unique in
    the index); ``"NNNNNN:"`` for WikiMovies text, whose ids are line numbers in their own file."""
    return "" if corpus_format == "jsonl" else f"{seg_id}:"


def _prefixed(articles, prefix: str) -> list:
    return [dataclasses.replace(a, key=prefix + a.key) if prefix else a for a in articles]


def segment_corpus_name(corpus_format: str) -> str:
    return "corpus.jsonl" if corpus_format == "jsonl" else "corpus.txt"


def live_articles(live: SparseIndex, base_corpus: str | Path | None = None) -> tuple[list, list[dict]]:
    """The live articles of a (grown) index, read again from its corpus files, and the source records of
    an index built from them. The base's files are those its manifest names (their checksums must match;
    `base_corpus` stands in for a base built from one file that has moved); the segments' are their copies."""
    path = live.path
    manifest = live.manifest
    sources = manifest.get("sources") or [{"file": manifest.get("inputs", {}).get("corpus", {}).get("path"),
                                           "format": manifest["config"].get("corpus_format"),
                                           "sha256": manifest.get("inputs", {}).get("corpus", {}).get("sha256")}]
    if base_corpus is not None:
        if len(sources) != 1:
            raise ConfigError(f"{path} was built from {len(sources)} corpus files; --base-corpus stands in for one")
        sources = [{**sources[0], "file": str(base_corpus)}]
    articles, records = [], []
    for s in sources:
        file = Path(s["file"]) if Path(s["file"]).is_absolute() else path / s["file"]
        if not file.exists() or (s.get("sha256") and file_checksum(file)["sha256"] != s["sha256"]):
            why = "is missing" if not file.exists() else "has changed since"
            raise ArtifactError(f"the corpus {file} that {path} was built from {why}; pass --base-corpus with the "
                                "file the index was built from")
        skip = set(s.get("skip", []))
        read = _prefixed(read_corpus(file, s["format"], WarningLog()), s.get("key_prefix", ""))
        articles += [a for i, a in enumerate(read) if i not in skip]
        records.append({"file": file, "format": s["format"], "sha256": s.get("sha256"), "n": len(read),
                        "key_prefix": s.get("key_prefix", ""),
                        "positions": [i for i in range(len(read)) if i not in skip]})
    state = read_state(path)
    for seg in state["segments"]:
        seg_dir = path / SEGMENTS / seg
        info = json.loads((seg_dir / "manifest.json").read_text(encoding="utf-8"))["segment"]
        fmt, prefix = info["format"], info.get("key_prefix", "")
        file = seg_dir / segment_corpus_name(fmt)
        read = _prefixed(read_corpus(file, fmt, WarningLog()), prefix)
        articles += read
        records.append({"file": file, "format": fmt, "sha256": file_checksum(file)["sha256"], "n": len(read),
                        "key_prefix": prefix,
                        "positions": list(range(len(read)))})
    keys = [str(a.key) for a in articles]
    alive = np.ones(len(articles), dtype=bool)
    removed = np.asarray(state["removed"], dtype=np.int64)
    if len(removed) and (removed.min() < 0 or removed.max() >= len(alive)):
        raise ArtifactError(f"{path}: its version file marks articles outside [0, {len(alive)}) removed; its corpus "
                            "files do not hold the articles it indexes")
    alive[removed] = False
    if len(articles) != len(alive) or [keys[i] for i in np.flatnonzero(alive)] != live.article_keys:
        raise ArtifactError(f"the corpus files of {path} do not hold the articles it indexes; rebuild it")
    # the source records of the compacted index: which positions of each file are left out
    out_sources, g = [], 0
    for rec in records:
        positions = rec["positions"]
        dead = {positions[i] for i in range(len(positions)) if not alive[g + i]}
        g += len(positions)
        skipped = sorted((set(range(rec["n"])) - set(positions)) | dead)
        out_sources.append({"file": rec["file"], "format": rec["format"], "sha256": rec["sha256"], "skip": skipped,
                            "key_prefix": rec["key_prefix"]})
    return [a for a, ok in zip(articles, alive) if ok], out_sources
