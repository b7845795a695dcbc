"""The version file of a grown index and its live view: the one home of what `drkit.index.sparse` reads when
it loads an index and `drkit.index.segments` writes when it grows one (so that neither imports the other).

    INDEX/CURRENT    {"version": n, "segments": ["000001", ...], "removed": [global article ids]}

`read_state` reads it (an index with segments but no CURRENT is an error, never "nothing added"),
`write_state` replaces it atomically, and `apply_live_view` turns a loaded base index into the live view of a
state: base + segments - removed articles, made in memory (the policy: `drkit.index.segments`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from drkit.data.kb import EntityTable
from drkit.errors import ArtifactError
from drkit.index.csr import concat_ranges
from drkit.util.artifact import load_array

SEGMENTS = "segments"
CURRENT = "CURRENT"
EMPTY_STATE = {"version": 0, "segments": [], "removed": []}


# -- the version file ------------------------------------------------------------------------------------------
def written_segments(path: str | Path) -> list[str]:
    """The complete segment folders under the index at `path` (named by number, with their manifest), whether
    or not CURRENT names them."""
    folder = Path(path) / SEGMENTS
    if not folder.is_dir():
        return []
    return sorted(c.name for c in folder.iterdir() if c.is_dir() and c.name.isdigit() and (c / "manifest.json").exists())


def read_state(path: str | Path) -> dict:
    """The version of the index at `path`: ``{"version", "segments", "removed"}`` (version 0, nothing added or
    removed, when it has no CURRENT file and no segment). An index with segments but no CURRENT has lost its
    version file: `ArtifactError` saying how to recover, never an empty view (which the next update would
    take as "delete every segment")."""
    file = Path(path) / CURRENT
    if not file.exists():
        segments = written_segments(path)
        if segments:
            state = json.dumps({"version": len(segments), "segments": segments, "removed": []})
            raise ArtifactError(
                f"{file} is missing, but {Path(path) / SEGMENTS} holds the segments {', '.join(segments)}: the index's "
                f"version file (which segments are live, which articles removed) is lost. Restore it from a backup; "
                f"or, to make every segment live again (articles removed since are back, until removed again), "
                f"write {state} to {file} (an index that never had a CURRENT, made by an older drkit whose first "
                f"'drkit add' was interrupted: leave its last segment out of that list); or delete "
                f"{Path(path) / SEGMENTS} to go back to the index as built. Nothing was changed.")
        return dict(EMPTY_STATE)
    try:
        state = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ArtifactError(f"{file}: not a readable version file ({exc})") from None
    if not (isinstance(state, dict) and isinstance(state.get("version"), int)
            and isinstance(state.get("segments"), list) and isinstance(state.get("removed"), list)):
        raise ArtifactError(f"{file}: expected {{\"version\": int, \"segments\": [...], \"removed\": [...]}}")
    return state


def write_state(path: str | Path, state: dict) -> None:
    """Replace CURRENT by `state` atomically (a temporary file, flushed to disk, then renamed over it)."""
    path = Path(path)
    tmp = path / f".{CURRENT}.tmp-{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path / CURRENT)
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- the live view -----------------------------------------------------------------------------------------------
@dataclass
class LiveInfo:
    """What the live view of a grown index was made from: its version, and for the base and each segment
    (in order) its folder and the rows of its mentions that are live (to gather their vectors)."""

    version: int
    segments: list[str]
    removed: int  # articles removed
    part_dirs: list[Path]
    part_kept_mentions: list[np.ndarray]


def apply_live_view(index, state: dict) -> None:
    """Turn `index` (a `drkit.index.sparse.SparseIndex`, its base arrays loaded) into the live view of `state`;
    see `drkit.index.segments`."""
    parts = [index] + [type(index)(index.path / SEGMENTS / s) for s in state["segments"]]
    n_articles = [len(p._articles) for p in parts]
    article_shift = np.cumsum([0] + n_articles)
    alive = np.ones(int(article_shift[-1]), dtype=bool)
    removed = np.asarray(state["removed"], dtype=np.int64)
    if len(removed) and (removed.min() < 0 or removed.max() >= len(alive)):
        raise ArtifactError(f"{index.path / CURRENT}: removed article ids outside [0, {len(alive)})")
    alive[removed] = False
    passage_global_article = np.concatenate([np.asarray(p.passage_article, np.int64) + s
                                             for p, s in zip(parts, article_shift)])
    passage_alive = alive[passage_global_article]
    passage_shift = np.cumsum([0] + [p.n_passages for p in parts])
    new_passage = np.cumsum(passage_alive) - 1
    new_article = np.cumsum(alive) - 1

    tables, n_entities = [index.entities], len(index.entities)
    mentions, kept_mentions = [], []
    for p, shift in zip(parts, passage_shift):
        m = np.asarray(p.mentions)
        if p is not index:
            tables.append(p.entities)
            n_entities += len(p.entities)
            if p.n_entities != n_entities:
                raise ArtifactError(f"{p.path}: its EP has {p.n_entities} rows for {n_entities} entities")
        g = m[:, 1].astype(np.int64) + shift
        keep = passage_alive[g]
        kept = m[keep].copy()
        kept[:, 1] = new_passage[g[keep]]
        mentions.append(kept)
        kept_mentions.append(np.flatnonzero(keep))
    mentions = np.concatenate(mentions).astype(np.int32)
    linked_now = np.bincount(mentions[:, 0], minlength=n_entities) > 0

    w = np.float32(index.config.unlinked_weight)
    rows, passages, scores = [], [], []
    for p, shift in zip(parts, passage_shift):
        indptr = np.asarray(p.entity_passage_indptr, dtype=np.int64)
        r = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
        g = np.asarray(p.entity_passage, np.int64) + shift
        s = np.asarray(p.entity_passage_score, np.float32)
        if p is index:
            linked_then = np.bincount(np.asarray(p.mentions[:, 0]), minlength=len(indptr) - 1) > 0
        else:
            linked_then = np.asarray(load_array(p.path, "entity_linked"), dtype=bool)
        keep = passage_alive[g]
        r, g, s = r[keep], g[keep], s[keep]
        if w != 1:  # the scores of a part follow where the entity is linked now
            s = np.where(~linked_then[r] & linked_now[r], s * w, s)
            if w > 0:
                s = np.where(linked_then[r] & ~linked_now[r], s / w, s).astype(np.float32)
        keep = s > index.config.epsilon
        rows.append(r[keep])
        passages.append(new_passage[g[keep]])
        scores.append(s[keep].astype(np.float32))
    r, g, s = np.concatenate(rows), np.concatenate(passages), np.concatenate(scores)
    order = np.lexsort((g, -s, r))  # per entity, best score first, then the lower passage id
    r, g, s = r[order], g[order], s[order]
    first = np.searchsorted(r, r, side="left")
    keep = np.arange(len(r)) - first < index.config.mu
    r, g, s = r[keep], g[keep], s[keep]
    order = np.lexsort((g, r))
    r, g, s = r[order], g[order], s[order]
    ep_indptr = np.zeros(n_entities + 1, dtype=np.int64)
    np.cumsum(np.bincount(r, minlength=n_entities), out=ep_indptr[1:])

    piece_parts, piece_lengths, text_parts, text_lengths, articles = [], [], [], [], []
    for k, (p, shift) in enumerate(zip(parts, passage_shift)):
        live = np.flatnonzero(passage_alive[shift : shift + p.n_passages])
        po = np.asarray(p.piece_offsets, np.int64)
        piece_parts.append(np.asarray(p.pieces)[concat_ranges(po[live], po[live + 1] - po[live])])
        piece_lengths.append(po[live + 1] - po[live])
        to = np.asarray(p._text_offsets, np.int64)
        text_parts.append(np.asarray(p._text)[concat_ranges(to[live], to[live + 1] - to[live])])
        text_lengths.append(to[live + 1] - to[live])
        articles += [a for a, ok in zip(p._articles, alive[article_shift[k] : article_shift[k + 1]]) if ok]
    offsets = lambda lengths: np.concatenate(([0], np.cumsum(np.concatenate(lengths)))).astype(np.int64)  # noqa: E731

    index.entities = EntityTable.concat(tables)
    index.mentions = mentions
    index.entity_passage_indptr = ep_indptr
    index.entity_passage = g.astype(np.int32)
    index.entity_passage_score = s.astype(np.float32)
    index.passage_article = new_article[passage_global_article[passage_alive]].astype(np.int32)
    index.pieces = np.concatenate(piece_parts).astype(np.int32)
    index.piece_offsets = offsets(piece_lengths)
    index._text = np.concatenate(text_parts).astype(np.uint8)
    index._text_offsets = offsets(text_lengths)
    for name in ("article_keys", "article_titles", "article_entity", "passage_entity", "entity_pages", "_entity_link",
                 "_entity_mentions", "passage_mention_indptr", "mention_incidence"):
        index.__dict__.pop(name, None)  # made from the base's arrays if used above
    index.__dict__["_articles"] = articles
    index.article_global = np.flatnonzero(alive)
    index.live = LiveInfo(state["version"], list(state["segments"]), int((~alive).sum()),
                          [p.path for p in parts], kept_mentions)
    index.manifest = {**index.manifest, "live": {"version": state["version"], "segments": len(state["segments"]),
                                                  "removed_articles": int((~alive).sum())}}
