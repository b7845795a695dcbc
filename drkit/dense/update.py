"""Grow an index without a rebuild: `add_documents` (``drkit add``), `remove_documents` (``drkit remove``) and
`compact` (``drkit compact``).

The sparse side (segments, the version file, the live view and its policy) is `drkit.index.segments`;
this module adds the dense side. An added segment's mentions are embedded with the encoder of each mention
index given (its own weights and settings, read from its manifest) and stored in the segment as
``vectors-KEY.npy`` before the version file names the segment, so a model trained before the update
answers over the new articles at once (`MentionIndex.for_index` gathers the live vectors). Compaction
writes a new sparse index and new mention indexes: the sparse part equals `build_index` of the live
articles, and a mention whose passage (its word pieces) and span are unchanged keeps its vector, which
equals what `drkit embed` computes (a passage is embedded unpadded, alone in its length's batch); only
the rest are embedded.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from drkit.data.kb import EntityTable
from drkit.dense.embedding import (
    EmbedConfig,
    batch_plan,
    embed_batch,
    embed_mentions,
    encoder_identity,
    index_identity,
    mention_encoder,
    mention_rows,
)
from drkit.dense.encoder import DualEncoder
from drkit.dense.mentions import FORMAT, FORMAT_VERSION, MentionIndex
from drkit.errors import ArtifactError, ConfigError
from drkit.index.build import with_title_aliases, write_index
from drkit.index.linking import LinkConfig
from drkit.index.live import CURRENT, SEGMENTS, read_state, write_state
from drkit.index.segments import (
    collect_garbage,
    next_segment_number,
    read_ids,
    removal_state,
    sync_tree,
    update_lock,
    write_segment,
)
from drkit.index.sources import live_articles
from drkit.index.sparse import SparseIndex
from drkit.util.artifact import ArtifactWriter, file_checksum
from drkit.util.progress import progress
from drkit.util.runs import as_saved


def mention_indexes_beside(index_dir: str | Path) -> list[Path]:
    """The mention indexes in the folders beside the index at `index_dir` (its parent's subfolders) that were
    embedded from it: those a ``drkit add`` must give vectors too."""
    index_dir = Path(index_dir).resolve()
    candidates = []
    for d in sorted(index_dir.parent.iterdir()):
        manifest = d / "manifest.json"
        try:  # a folder this user may not read (lost+found) is no mention index of theirs
            if d == index_dir or not d.is_dir() or not manifest.is_file():
                continue
            m = json.loads(manifest.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(m, dict) and m.get("format") == FORMAT and isinstance(m.get("index"), dict):
            candidates.append((d, m["index"].get("mentions_sha256")))
    if not candidates:
        return []
    sha = file_checksum(index_dir / "mentions.npy")["sha256"]  # read only when there is a mention index to match
    return [d for d, theirs in candidates if theirs == sha]


def _mention_indexes(index: SparseIndex, mentions: Sequence[str | Path], log=print,
                     beside: bool = False) -> list[MentionIndex]:
    """The mention indexes of `mentions`, each checked against `index`; every mention index the index's
    segments carry vectors for, and with `beside` (an update of the index) every one beside the index
    (`mention_indexes_beside`), must be among them (else the next segment would lack its vectors). A live
    segment that lacks the vectors of a mention index given (added without it) gets them now."""
    loaded = [MentionIndex.load(m) for m in mentions]
    for m in loaded:
        m.check_compatible(index)
    keys = {m.vectors_key() for m in loaded}
    state = read_state(index.path)
    for seg in state["segments"]:
        for f in (index.path / SEGMENTS / seg).glob("vectors-*.npy"):
            key = f.stem.removeprefix("vectors-")
            if key not in keys:
                raise ConfigError(f"the segment {f.parent} carries vectors ({f.name}) for a mention index not given; "
                                  "pass --mentions for every mention index of this index, so that each stays complete")
    given = {Path(m.path).resolve() for m in loaded}
    missing = [str(d) for d in mention_indexes_beside(index.path) if d.resolve() not in given] if beside else []
    if missing:
        raise ConfigError(f"{', '.join(missing)} {'is a mention index' if len(missing) == 1 else 'are mention indexes'} "
                          f"of {index.path} (beside it) not given with --mentions: {'it' if len(missing) == 1 else 'they'}"
                          " would lack the vectors of the new articles, and every load with "
                          f"{'it' if len(missing) == 1 else 'them'} would fail. Pass --mentions for each (or move "
                          "one no longer used out of that folder)")
    for m in loaded:
        for seg in state["segments"]:
            folder = index.path / SEGMENTS / seg
            if not (folder / f"vectors-{m.vectors_key()}.npy").exists():
                t = time.perf_counter()
                vectors, _ = embed_mentions(SparseIndex(folder), _encoder_of(m), EmbedConfig.from_manifest(
                    m.manifest["config"]))
                _save_vectors(folder, f"vectors-{m.vectors_key()}", vectors)
                log(f"{folder}: embedded its mentions for {m.path}, which it lacked (added without it), in "
                    f"{time.perf_counter() - t:.1f} s")
    return loaded


def _encoder_of(mentions: MentionIndex) -> DualEncoder:
    """The encoder that embedded `mentions`, checked to be the same weights."""
    folder = mentions.encoder_dir()
    if encoder_identity(folder)["sha256"] != mentions.manifest["encoder"]["sha256"]:
        raise ArtifactError(f"the encoder {folder} has changed since it embedded {mentions.path}; "
                            "embed with one encoder throughout")
    return DualEncoder.load(folder)


def _save_vectors(folder: Path, name: str, vectors: np.ndarray) -> None:
    tmp = folder / f".{name}.tmp-{os.getpid()}.npy"
    np.save(tmp, np.ascontiguousarray(vectors), allow_pickle=False)
    os.replace(tmp, folder / f"{name}.npy")


def add_documents(index_dir: str | Path, corpus: str | Path, mentions: Sequence[str | Path] = (),
                  corpus_format: str | None = None, entity_lists: Sequence[str | Path] = (), replace: bool = False,
                  log=print) -> dict:
    """Add the articles of `corpus` to the index at `index_dir` as a new segment, with the vectors of its
    mentions for each mention index of `mentions`; see the module docstring. Returns a report (counts,
    seconds per step, the new version)."""
    index_dir = Path(index_dir)
    t0 = time.perf_counter()
    with update_lock(index_dir):
        state = read_state(index_dir)
        gone = collect_garbage(index_dir, state)
        if gone:
            log(f"deleted what an interrupted update left in {index_dir}: {', '.join(gone)}")
        if not (index_dir / CURRENT).exists():  # version 0 on disk before the first segment: from now on a
            write_state(index_dir, state)       # segment without CURRENT can only mean a lost version file
        live = SparseIndex.load(index_dir)
        loaded = _mention_indexes(live, mentions, log, beside=True)
        t = time.perf_counter()
        seg_dir, new_state, counts = write_segment(index_dir, corpus, corpus_format, entity_lists, replace, log)
        timings = {"link_and_score": time.perf_counter() - t}
        segment = SparseIndex(seg_dir)
        for m in loaded:
            t = time.perf_counter()
            config = EmbedConfig.from_manifest(m.manifest["config"])
            vectors, _ = embed_mentions(segment, _encoder_of(m), config)
            _save_vectors(seg_dir, f"vectors-{m.vectors_key()}", vectors)
            timings[f"embed {m.path}"] = time.perf_counter() - t
        sync_tree(seg_dir)  # on disk before the version that names it
        write_state(index_dir, new_state)
    timings["total"] = time.perf_counter() - t0
    report = {"version": new_state["version"], "segment": seg_dir.name, **counts,
              "timings_s": {k: round(v, 2) for k, v in timings.items()}}
    log(f"{index_dir}: version {report['version']}: added {counts['articles']:,} articles ({counts['passages']:,} "
        f"passages, {counts['mentions']:,} mentions, {counts['new_entities']:,} new entities"
        + (f", {counts['replaced_articles']} replaced" if counts["replaced_articles"] else "")
        + f") in {timings['total']:.1f} s")
    return report


def remove_documents(index_dir: str | Path, ids: Sequence[str] | str | Path, log=print) -> dict:
    """Mark the articles whose corpus ids are `ids` (a list, or a file of one id per line) removed: no answer
    or chain cites their passages from the next load on. Every id must name a live article (else nothing
    changes). Returns ``{"version", "removed"}``."""
    index_dir = Path(index_dir)
    source = "the ids"
    if isinstance(ids, (str, Path)):
        source = str(ids)
        ids = read_ids(ids)
    if not ids:
        raise ConfigError(f"{source}: no article id to remove")
    with update_lock(index_dir):
        collect_garbage(index_dir, read_state(index_dir))
        state, n = removal_state(index_dir, list(ids), source)
        write_state(index_dir, state)
    log(f"{index_dir}: version {state['version']}: removed {n:,} articles")
    return {"version": state["version"], "removed": n}


def compact(index_dir: str | Path, out: str | Path, mentions: Sequence[str | Path] = (),
            mentions_out: Sequence[str | Path] = (), base_corpus: str | Path | None = None, overwrite: bool = False,
            log=print) -> SparseIndex:
    """Write the live view of the index at `index_dir` as a new index `out` (`build_index` of its live
    articles: IDF recomputed, every passage linked again) and each mention index of `mentions` as
    `mentions_out` (vectors of unchanged passages reused, the rest embedded). The index at `index_dir` is
    left as it is. Entities: those a build of the live articles makes when the index's entities are its
    titles alone; else (a KB's, or lists beside the titles) every entity of the live view, ids unchanged."""
    if len(mentions) != len(mentions_out):
        raise ConfigError(f"give one --mentions-out for each --mentions ({len(mentions)} against {len(mentions_out)})")
    index_dir = Path(index_dir)
    given = {Path(p).resolve() for p in [index_dir, *mentions]}
    for o in [out, *mentions_out]:
        if Path(o).resolve() in given:
            raise ConfigError(f"{o} is an input of the compaction; write the compacted index and mention indexes to "
                              "new folders (the old ones stay as they are)")
        if Path(o).exists() and not overwrite:
            raise ArtifactError(f"{o} already exists; choose another path or pass --overwrite")
    with update_lock(index_dir):  # no add or remove while the live view is read
        return _compact(index_dir, out, mentions, mentions_out, base_corpus, overwrite, log)


def _compact(index_dir: Path, out, mentions, mentions_out, base_corpus, overwrite: bool, log) -> SparseIndex:
    state = read_state(index_dir)
    live = SparseIndex.load(index_dir)
    loaded = _mention_indexes(live, mentions, log)
    t = time.perf_counter()
    articles, sources = live_articles(live, base_corpus)
    manifest = live.manifest
    link_config = as_saved(LinkConfig, manifest["config"]["link"])
    lists_added = any(_added_lists(index_dir / SEGMENTS / seg) for seg in state["segments"])
    if manifest.get("inputs", {}).get("entities") == "titles" and not lists_added:  # as build_index makes it
        titles = [a.title for a in articles if a.title.strip()]
        aliases = (with_title_aliases(list(titles), {}, {}, titles, link_config.min_name_length)
                   if manifest["inputs"].get("title_aliases") else {})
        table = EntityTable.from_names(titles).with_aliases(aliases)
    else:  # a KB's entities, or lists beside the titles: every entity kept, ids unchanged
        table = live.entities
    copies = [(Path(s["file"]), f"sources/{i:03d}{Path(s['file']).suffix}") for i, s in enumerate(sources)]
    new_sources = [{"file": name, "format": s["format"], "sha256": s["sha256"], "skip": s["skip"],
                    "key_prefix": s["key_prefix"]}
                   for s, (_, name) in zip(sources, copies)]
    config = manifest["config"]
    new = write_index(articles, table, out, link_config=link_config, sparse_config=live.config,
                      corpus_format=config.get("corpus_format", "jsonl"), inputs=manifest.get("inputs", {}),
                      sources=new_sources, overwrite=overwrite, log=log, label=str(index_dir),
                      extra_manifest={"compacted_from": {"path": str(index_dir), "version": state["version"]},
                                      "next_segment": next_segment_number(manifest, state)},
                      copy_files=copies)
    log(f"compacted {index_dir} into {out}: {len(articles):,} articles in {time.perf_counter() - t:.1f} s")
    for m, m_out in zip(loaded, mentions_out):
        recompute_mention_index(live, m, new, m_out, overwrite, log)
    return new


def _added_lists(seg_dir: Path) -> bool:
    import json

    return bool(json.loads((seg_dir / "manifest.json").read_text(encoding="utf-8"))["segment"].get("entity_lists"))


def _passage_key(pieces: np.ndarray) -> bytes:
    return hashlib.blake2b(np.ascontiguousarray(pieces, dtype=np.int32).tobytes(), digest_size=16).digest()


def recompute_mention_index(old: SparseIndex, mentions: MentionIndex, new: SparseIndex, out: str | Path,
                            overwrite: bool = False, log=print) -> MentionIndex:
    """The mention index of `new` for the encoder of `mentions` (a mention index of `old`): a mention of a
    passage whose word pieces are those of a passage of `old`, at the same span, takes that mention's vector;
    the passages with any other mention are embedded."""
    t = time.perf_counter()
    vectors = mentions.for_index(old).vectors
    old_pm = old.passage_mention_indptr
    old_m = np.asarray(old.mentions)
    by_key: dict[bytes, int] = {}
    for p in range(old.n_passages):
        by_key.setdefault(_passage_key(old.passage_pieces(p)), p)
    new_m = np.asarray(new.mentions)
    new_pm = new.passage_mention_indptr
    source = np.full(len(new_m), -1, dtype=np.int64)  # the old mention each new one reuses
    for q in progress(range(new.n_passages), desc="match passages", unit="passage"):
        a, b = new_pm[q], new_pm[q + 1]
        if a == b:
            continue
        p = by_key.get(_passage_key(new.passage_pieces(q)))
        if p is None:
            continue
        spans = {(int(s), int(e)): i for i, (s, e) in enumerate(old_m[old_pm[p]:old_pm[p + 1], 2:4], start=old_pm[p])}
        for j in range(a, b):
            source[j] = spans.get((int(new_m[j, 2]), int(new_m[j, 3])), -1)
    missing = np.unique(new_m[source < 0, 1]) if (source < 0).any() else np.zeros(0, np.int64)
    config = EmbedConfig.from_manifest(mentions.manifest["config"]).resolved()
    dim = mentions.dim
    with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite) as w:
        out_vectors = w.open_array("mention_vectors", (new.n_mentions, dim), np.float16,
                                   note="row = mention id of the sparse index; f(m) = [f_start ; f_end]")
        reused = source >= 0
        out_vectors[reused] = vectors[source[reused]]
        embedded = 0
        if len(missing):
            encoder = mention_encoder(_encoder_of(mentions), config)
            indptr = new.passage_mention_indptr
            with torch.inference_mode():
                for ps in progress(batch_plan(new, config, missing), desc="embed", unit="batch"):
                    for r, v in embed_batch(new, encoder, new_m, mention_rows(indptr, ps), ps, config):
                        out_vectors[r] = v
                        embedded += len(r)
        out_vectors.flush()
        seconds = time.perf_counter() - t
        w.manifest.update(config=dataclasses.asdict(config), encoder=mentions.encoder_record_at(out),
                          index=index_identity(new), dim=dim, mentions=new.n_mentions,
                          embedding={"seconds": round(seconds, 2), "reused": int(reused.sum()), "embedded": embedded,
                                     "passages_embedded": int(len(missing))},
                          compacted_from={"path": str(mentions.path)})
    log(f"{out}: {int(reused.sum()):,} mention vectors reused, {embedded:,} embedded ({len(missing):,} passages) "
        f"in {seconds:.1f} s")
    return MentionIndex(out)
