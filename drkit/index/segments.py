"""A grown index: the base that `build_index` wrote, plus segments of added articles and marks of removed ones.

    INDEX/CURRENT              {"version": n, "segments": ["000001", ...], "removed": [global article ids]}
    INDEX/segments/000001/     one segment: the files `build_index` writes, for the added articles only
                               (entities.jsonl holds the entities it adds; mention entity ids are global,
                               passage and article ids its own), plus entity_linked.npy (which entities
                               were linked anywhere when it was scored), corpus.jsonl|txt (a copy of the
                               added file, which `drkit compact` reads again) and vectors-KEY.npy, the
                               f(m) of its mentions for each mention index (`drkit.dense.update`)
    INDEX/.lock                held while an update runs (a second one is refused, not queued)

Global article ids number the base's articles, then each segment's, in order; a removed article keeps
its id. An update writes its segment first (a temporary folder renamed when complete) and then replaces
CURRENT (a temporary file, then ``os.replace``; `drkit.index.live`): a reader, or a crash at any point, sees the old version
or the new one, never a mix. A segment folder that CURRENT does not name (left by a crash) is deleted
by the next update.

`SparseIndex.load` of a grown index gives its *live view*: the same arrays as an index built at once,
made in memory from the base and the segments, with removed articles' passages and mentions left out
and the ids renumbered. What it holds before `drkit compact` (the policy, measured in
`benchmarks/bench_update.py`):

* **IDF frozen at build.** Added passages are vectorised with the base's document frequencies
  (``df_buckets``, ``df_counts``) and passage count, so no stored score changes.
* **Top-mu passages.** Each entity keeps the best mu of its base list and its segments' lists (ties:
  the lower passage id), so the live view keeps what a build with the frozen IDF would, except that
  (a) a removed passage leaves a hole that is not refilled and (b) an entity a segment adds is scored
  against that segment's passages and later ones only. ``unlinked_weight`` follows where an entity is
  linked now (an entity first linked by a segment has its older scores multiplied by it).
* **Linking.** Added passages are linked over every entity, new ones included; passages indexed before
  are not linked again, so they gain no mentions of the entities added after them.
* **Entities** are never removed before compaction; one a segment adds gets the next free id.

`drkit compact` rebuilds the sparse part from the live articles (IDF recomputed, every passage linked
again), which equals `build_index` of those articles, and reuses the vectors of unchanged passages.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import os
import shutil
from pathlib import Path

import numpy as np

from drkit.data.corpus import guess_corpus_format
from drkit.data.kb import EntityTable, name_key, read_entity_list
from drkit.errors import ArtifactError, ConfigError
from drkit.index.build import read_articles, with_title_aliases, write_arrays
from drkit.index.linking import EntityLinker, LinkConfig, link_corpus
from drkit.index.live import CURRENT, SEGMENTS, read_state
from drkit.index.sources import key_prefix as source_key_prefix
from drkit.index.sources import segment_corpus_name
from drkit.index.sparse import FORMAT, FORMAT_VERSION, SparseIndex, sparse_from_counts
from drkit.index.tfidf import NgramHasher, idf_weights
from drkit.util.artifact import ArtifactWriter, file_checksum, load_array
from drkit.util.runs import as_saved
from drkit.util.warnlog import WarningLog

LOCK = ".lock"

@contextlib.contextmanager
def update_lock(path: str | Path):
    """Hold the index's update lock; an `ArtifactError` at once when another update holds it. The lock is
    the kernel's (flock): a killed updater releases it."""
    path = Path(path)
    with open(path / LOCK, "a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ArtifactError(f"{path} is being updated by another process (it holds {path / LOCK}); "
                                "run this again when that one has finished") from None
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def collect_garbage(path: str | Path, state: dict) -> list[str]:
    """Delete the segment folders (and temporary files) that `state` does not name: what a crashed update left.
    Call it holding the update lock. Returns the names deleted."""
    path = Path(path)
    gone = []
    folder = path / SEGMENTS
    if folder.exists():
        for child in folder.iterdir():
            if child.name not in state["segments"]:
                shutil.rmtree(child, ignore_errors=True) if child.is_dir() else child.unlink(missing_ok=True)
                gone.append(child.name)
    for tmp in path.glob(f".{CURRENT}.tmp-*"):
        tmp.unlink(missing_ok=True)
        gone.append(tmp.name)
    return gone


# -- add and remove -------------------------------------------------------------------------------------------
def next_segment_number(manifest: dict, state: dict) -> int:
    """The number of the next segment: above every segment of this index and of the indexes it was compacted
    from (``next_segment`` in a compacted index's manifest), so that no segment's id prefix is used twice."""
    taken = [int(s) for s in state["segments"] if s.isdigit()]
    return max(taken + [int(manifest.get("next_segment", 1)) - 1]) + 1


def sync_tree(path: str | Path) -> None:
    """fsync every file and folder under `path` and `path` itself (before a version names them)."""
    path = Path(path)
    for root, dirs, files in os.walk(path):
        for name in files:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
    for folder in [p for p in path.rglob("*") if p.is_dir()] + [path, path.parent]:
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def entity_specs(manifest: dict) -> list:
    """What the index's entities were made from (``--entities``: "titles", "ner", "found", list checksums)."""
    spec = manifest.get("inputs", {}).get("entities")
    return spec if isinstance(spec, list) else [spec]


def titles_are_entities(manifest: dict) -> bool:
    """Whether the index was built with ``--entities titles`` (alone or with lists)."""
    return "titles" in entity_specs(manifest)


def write_segment(index_path: str | Path, corpus: str | Path, corpus_format: str | None = None,
                  entity_lists=(), replace: bool = False, log=print) -> tuple[Path, dict, dict]:
    """Link, split and score the articles of `corpus` as a new segment of the index at `index_path` (call it
    holding `update_lock`). Returns the segment's folder, the state that adds it (not written yet: the
    caller writes CURRENT once the segment's vectors are in), and a report.

    New entities: the titles of the added articles when the index's entities are its titles, the names and
    dates the recogniser finds in them when the index was built with ``--entities ner``, and the names of
    `entity_lists`, where the index does not have them. An added article whose id (key) is live
    in the index already is refused, or with `replace` replaces it (the old one is marked removed)."""
    index_path = Path(index_path)
    state = read_state(index_path)
    live = SparseIndex.load(index_path)
    if "segment" in live.manifest:
        raise ConfigError(f"{index_path} is a segment of an index; add to the index itself")
    corpus_format = corpus_format or guess_corpus_format(corpus)
    warnings = WarningLog()
    articles = read_articles(corpus, corpus_format, warnings)
    seg_id = f"{next_segment_number(live.manifest, state):06d}"
    key_prefix = source_key_prefix(seg_id, corpus_format)
    articles = [dataclasses.replace(a, key=key_prefix + a.key) for a in articles]
    live_ids = {k: i for i, k in enumerate(live.article_keys)}
    repeated = [a.key for a in articles if a.key in live_ids]
    if repeated and not replace:
        raise ConfigError(f"{len(repeated)} articles of {corpus} are in the index already (ids {repeated[:5]}); "
                          "pass --replace to replace them, or remove them first (drkit remove)")
    replaced_live = np.array(sorted({live_ids[k] for k in repeated}), dtype=np.int64)
    removed = sorted(set(state["removed"]) | set(int(g) for g in live.article_global[replaced_live]))

    candidates = [a.title for a in articles if a.title.strip()] if titles_are_entities(live.manifest) else []
    for f in entity_lists:
        candidates += list(read_entity_list(f))
    aliases, kinds_of, inputs = {}, {}, {"corpus": file_checksum(corpus)}
    if "ner" in entity_specs(live.manifest):  # the recogniser finds the new articles' names and dates too
        from drkit.index.ner import load_pipeline, ner_entities, pipeline_version

        nlp = load_pipeline()
        inputs["recogniser"] = pipeline_version(nlp)
        built = live.manifest.get("inputs", {}).get("recogniser")
        if built and built != inputs["recogniser"]:
            warnings.add("recogniser_differs", f"the index was built with the recogniser {built}, the added articles "
                                               f"are read by {inputs['recogniser']}: names and dates may be found in "
                                               f"them otherwise than in the rest")
        recognised = ner_entities([a.text for a in articles], nlp, log=log)
        candidates += recognised.names
        aliases, kinds_of = recognised.aliases, recognised.kinds
    link_config = as_saved(LinkConfig, live.manifest["config"]["link"])
    if titles_are_entities(live.manifest) and live.manifest.get("inputs", {}).get("title_aliases"):
        # the added titles' aliases (drkit.index.title_aliases), forms one page's among the index's titles and theirs;
        # a form the index has already stays its entity's (an alias given before stays: a build of all may not give it)
        added = {" ".join(a.title.split()) for a in articles if a.title.strip()}
        aliases = with_title_aliases(candidates, aliases, kinds_of, [*live.article_titles, *added],
                                     link_config.min_name_length, only=added)
        aliases = {name: {f for f in forms if live.entities.lookup(f) is None} if name in added else forms
                   for name, forms in aliases.items()}
        taken = [t for t in sorted(added)
                 if (i := live.entities.lookup(t)) is not None and live.entities.keys[i] != name_key(t)]
        if taken:
            warnings.add("title_is_an_alias", f"{len(taken)} added titles are the alias of a page the index has, e.g. "
                         f"{taken[:3]}: their passages are that page's entity's until the index is built again",
                         count=len(taken))
    fresh = EntityTable.from_names(candidates).with_aliases(aliases).with_kinds(kinds_of)
    # an entity the index has already, by its name or another form of it (a date written otherwise), is not new
    new = [i for i, name in enumerate(fresh.names)
           if all(live.entities.lookup(f) is None for f in [name, *fresh.aliases[i]])]
    new_table = fresh.subset(new)
    table = EntityTable.concat([live.entities, new_table])

    config = live.config
    linker = EntityLinker.of_config(table, link_config)
    linked = link_corpus(articles, linker, link_config, warnings, total=len(articles), entity_of=table.lookup)

    # frozen IDF: the base's document frequencies and passage count
    df = np.zeros(config.hash_buckets, dtype=np.int64)
    df[np.asarray(load_array(index_path, "df_buckets"), np.int64)] = np.asarray(load_array(index_path, "df_counts"))
    idf = idf_weights(df, len(load_array(index_path, "passage_article")))
    counts = NgramHasher(config.hash_buckets, config.ngram).count_matrix(linked.passage_texts)
    live_mentions = np.asarray(live.mentions)
    if len(replaced_live):  # a replaced article's links no longer count
        gone = np.isin(np.asarray(live.passage_article)[live_mentions[:, 1]], replaced_live)
        live_mentions = live_mentions[~gone]
    linked_anywhere = (np.bincount(live_mentions[:, 0], minlength=len(table)) > 0) | \
        (np.bincount(linked.mention_entity, minlength=len(table)) > 0)
    # no document frequencies of its own (df 0: none stored), scored with the base's idf
    matrices = sparse_from_counts([counts], np.zeros(config.hash_buckets, np.int64), linked.n_passages,
                                  linked.mentions, table, config, idf=idf, row_linked=linked_anywhere)

    folder = index_path / SEGMENTS
    folder.mkdir(exist_ok=True)
    seg_dir = folder / seg_id
    counts = {"articles": len(articles), "passages": linked.n_passages, "mentions": len(linked.mentions),
              "new_entities": len(new_table), "replaced_articles": len(replaced_live)}
    with ArtifactWriter(seg_dir, FORMAT, FORMAT_VERSION, overwrite=True) as w:
        w.manifest.update(config=live.manifest["config"], tokenizer=live.manifest.get("tokenizer"),
                          inputs=inputs, counts=counts,
                          segment={"id": seg_id, "format": corpus_format, "entities_before": len(live.entities),
                                   "entities": len(table), "replaced": repeated,
                                   "entity_lists": [str(f) for f in entity_lists], "key_prefix": key_prefix},
                          warnings=warnings.to_dict())
        write_arrays(w, new_table, linked, matrices)
        w.save_array("entity_linked", linked_anywhere, note="entities linked anywhere when this segment was scored")
        shutil.copyfile(corpus, w.path(segment_corpus_name(corpus_format)))
    for line in warnings.lines():
        log(line)
    new_state = {"version": state["version"] + 1, "segments": state["segments"] + [seg_id], "removed": removed}
    return seg_dir, new_state, counts


def read_ids(path: str | Path) -> list[str]:
    """Article ids, one per line (blank lines skipped)."""
    from drkit.data.lines import read_lines

    return [line.strip() for _, line in read_lines(path, "id list") if line.strip()]


def removal_state(index_path: str | Path, ids: list[str], source: str = "the ids") -> tuple[dict, int]:
    """The state with the live articles whose ids are `ids` marked removed (call it holding `update_lock`).
    Every id must name a live article: a `ConfigError` lists those that do not, and nothing changes."""
    state = read_state(index_path)
    live = SparseIndex.load(index_path)
    live_ids = {k: i for i, k in enumerate(live.article_keys)}
    unknown = [k for k in ids if k not in live_ids]
    if unknown:
        raise ConfigError(f"{len(unknown)} ids in {source} are not articles of {index_path} (or were removed): "
                          f"{unknown[:5]}; nothing was removed")
    gone = {int(live.article_global[live_ids[k]]) for k in ids}
    return {"version": state["version"] + 1, "segments": state["segments"],
            "removed": sorted(set(state["removed"]) | gone)}, len(gone)
