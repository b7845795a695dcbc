"""Artifact directories: atomic writes, overwrite refusal, manifest checks, and a build_index round trip."""

from __future__ import annotations

import json
import os
import shutil
import stat

import numpy as np
import pytest

import drkit
from drkit.data.corpus import read_wikimovies
from drkit.data.kb import entities_from_kb, read_kb
from drkit.errors import ArtifactError, ConfigError
from drkit.index.build import build_index
from drkit.index.linking import EntityLinker, LinkConfig, link_corpus
from drkit.index.sparse import FORMAT, FORMAT_VERSION, SparseConfig, SparseIndex, build_sparse_matrices
from drkit.util.artifact import MANIFEST, ArtifactWriter, file_checksum, load_array, read_jsonl, read_manifest
from drkit.util.warnlog import WarningLog


def listing(path):
    return sorted(p.name for p in path.iterdir())


# ---------------------------------------------------------------------------------------------
# ArtifactWriter


def test_writer_writes_everything_and_a_manifest(tmp_path):
    out = tmp_path / "sub" / "art"
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    with ArtifactWriter(out, "test.format", 3) as w:
        assert not out.exists()  # nothing under the final name while writing
        w.save_array("a", a, note="an array")
        w.write_json("extra.json", {"x": [1, 2]})
        w.write_jsonl("rows.jsonl", ({"i": i, "name": f"é{i}"} for i in range(5)), note="rows")
        w.manifest.update(config={"k": 1})
    assert listing(out) == sorted(["a.npy", MANIFEST, "extra.json", "rows.jsonl"])
    assert listing(out.parent) == ["art"]  # no temporary directory left
    manifest = read_manifest(out, "test.format", 3)
    assert manifest["format"] == "test.format" and manifest["format_version"] == 3
    assert manifest["drkit_version"] == drkit.__version__
    assert manifest["config"] == {"k": 1}
    assert manifest["files"]["a.npy"] == {"dtype": "int32", "shape": [3, 4], "note": "an array"}
    assert manifest["files"]["rows.jsonl"] == {"rows": 5, "note": "rows"}
    loaded = load_array(out, "a")
    assert np.array_equal(loaded, a) and loaded.dtype == np.int32
    assert np.array_equal(load_array(out, "a", mmap=False), a)
    assert read_jsonl(out, "rows.jsonl") == [{"i": i, "name": f"é{i}"} for i in range(5)]
    assert json.loads((out / "extra.json").read_text()) == {"x": [1, 2]}


def test_writer_leaves_nothing_when_the_block_raises(tmp_path):
    out = tmp_path / "art"
    with pytest.raises(RuntimeError, match="boom"):
        with ArtifactWriter(out, "test.format", 1) as w:
            w.save_array("a", np.zeros(3))
            w.write_json("x.json", {})
            raise RuntimeError("boom")
    assert not out.exists()
    assert listing(tmp_path) == []  # the temporary directory is gone too


def test_writer_failure_keeps_the_previous_artifact(tmp_path):
    out = tmp_path / "art"
    with ArtifactWriter(out, "test.format", 1) as w:
        w.save_array("old", np.ones(2))
    with pytest.raises(KeyError):
        with ArtifactWriter(out, "test.format", 1, overwrite=True) as w:
            w.save_array("new", np.zeros(2))
            raise KeyError("x")
    assert listing(out) == [MANIFEST, "old.npy"]
    assert listing(tmp_path) == ["art"]


def test_writer_refuses_to_overwrite(tmp_path):
    out = tmp_path / "art"
    out.mkdir()
    (out / "keep.txt").write_text("precious")
    with pytest.raises(ArtifactError, match="already exists"):
        ArtifactWriter(out, "test.format", 1)
    assert (out / "keep.txt").read_text() == "precious"
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArtifactError, match="already exists"):
        ArtifactWriter(tmp_path / "file", "test.format", 1)


def test_writer_overwrite_replaces_the_old_artifact(tmp_path):
    out = tmp_path / "art"
    with ArtifactWriter(out, "test.format", 1) as w:
        w.save_array("old", np.ones(2))
    with ArtifactWriter(out, "test.format", 1, overwrite=True) as w:
        w.save_array("new", np.zeros(2))
    assert listing(out) == [MANIFEST, "new.npy"]
    assert listing(tmp_path) == ["art"]
    assert list(read_manifest(out, "test.format", 1)["files"]) == ["new.npy"]


def test_writer_never_pickles(tmp_path):
    with pytest.raises(ValueError):
        with ArtifactWriter(tmp_path / "art", "test.format", 1) as w:
            w.save_array("objects", np.array([{"a": 1}], dtype=object))
    assert listing(tmp_path) == []


def test_artifact_directory_has_ordinary_permissions(tmp_path):
    old = os.umask(0o022)
    try:
        with ArtifactWriter(tmp_path / "art", "test.format", 1) as w:
            w.save_array("a", np.zeros(2))
        (tmp_path / "plain").mkdir()
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "art" / "a.npy").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "art").stat().st_mode) == stat.S_IMODE((tmp_path / "plain").stat().st_mode) == 0o755


def test_file_checksum(tmp_path):
    import hashlib

    path = tmp_path / "f.bin"
    data = bytes(range(256)) * 5000
    path.write_bytes(data)
    assert file_checksum(path) == {"path": str(path), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


# ---------------------------------------------------------------------------------------------
# read_manifest


def write_manifest(path, obj):
    path.mkdir(parents=True, exist_ok=True)
    (path / MANIFEST).write_text(json.dumps(obj) if not isinstance(obj, str) else obj)
    return path


def test_read_manifest_refuses_another_format(tmp_path):
    path = write_manifest(tmp_path / "a", {"format": "drkit.dense_index", "format_version": 1})
    with pytest.raises(ArtifactError) as info:
        read_manifest(path, "drkit.sparse_index", 1)
    assert "'drkit.dense_index'" in str(info.value) and "'drkit.sparse_index'" in str(info.value)
    path = write_manifest(tmp_path / "b", {"format_version": 1})
    with pytest.raises(ArtifactError, match="None"):
        read_manifest(path, "drkit.sparse_index", 1)


def test_read_manifest_refuses_a_newer_version(tmp_path):
    path = write_manifest(tmp_path / "a", {"format": "drkit.sparse_index", "format_version": 3, "drkit_version": "9.0.0"})
    with pytest.raises(ArtifactError) as info:
        read_manifest(path, "drkit.sparse_index", 2)
    message = str(info.value)
    assert "version 3" in message and "up to version 2" in message and "9.0.0" in message
    assert "Upgrade drkit or rebuild" in message
    # older and equal versions are read
    for version in (1, 2):
        write_manifest(path, {"format": "drkit.sparse_index", "format_version": version})
        assert read_manifest(path, "drkit.sparse_index", 2)["format_version"] == version


@pytest.mark.parametrize("version", [0, -1, "1", 1.0, None])
def test_read_manifest_refuses_an_invalid_version(tmp_path, version):
    path = write_manifest(tmp_path / "a", {"format": "f", "format_version": version})
    with pytest.raises(ArtifactError, match="invalid format_version"):
        read_manifest(path, "f", 1)


def test_a_folder_without_a_manifest_names_the_artifacts_below_it(tmp_path):
    run = tmp_path / "run"
    write_manifest(run / "model", {"format": "want", "format_version": 1})
    write_manifest(run / "steps" / "index", {"format": "other", "format_version": 1})
    with pytest.raises(ArtifactError, match=f"the 'want' artifact it holds is {run / 'model'}: pass that"):
        read_manifest(run, "want", 1)
    with pytest.raises(ArtifactError, match=r"it holds .*steps/index \(a 'other'\), not a 'third' artifact"):
        read_manifest(run / "steps", "third", 1)


def test_read_manifest_missing_manifest_or_directory(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ArtifactError, match="has no manifest.json"):
        read_manifest(tmp_path / "empty", "f", 1)
    with pytest.raises(ArtifactError, match="is not a directory"):
        read_manifest(tmp_path / "missing", "f", 1)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ArtifactError, match="is not a directory"):
        read_manifest(tmp_path / "file", "f", 1)
    path = write_manifest(tmp_path / "bad", "{not json")
    with pytest.raises(ArtifactError, match="not valid JSON"):
        read_manifest(path, "f", 1)


def test_missing_array_or_jsonl_is_an_artifact_error(tmp_path):
    with pytest.raises(ArtifactError, match="missing"):
        load_array(tmp_path, "nothing")
    with pytest.raises(ArtifactError, match="missing"):
        read_jsonl(tmp_path, "nothing.jsonl")


# ---------------------------------------------------------------------------------------------
# build_index round trip

WIKI = (
    "1 Kismet\n"
    "2 Kismet is a 1944 film directed by William Dieterle.\n"
    "3 It stars Marlene Dietrich, Ronald Colman and Edward Arnold. The film was shot in Technicolor in Hollywood.\n"
    "\n"
    "1 The Mark of Zorro\n"
    "2 The Mark of Zorro is a 1940 film directed by Rouben Mamoulian.\n"
    "3 It stars Tyrone Power, Linda Darnell and Basil Rathbone.\n"
    "\n"
    "1 Blood and Sand\n"
    "2 Blood and Sand is a 1941 film by Rouben Mamoulian starring Tyrone Power and Rita Hayworth.\n"
    "\n"
    "1 Untitled\n"
)
KB = (
    "Kismet|directed_by|William Dieterle\n"
    "Kismet|starred_actors|Marlene Dietrich\n"
    "Kismet|starred_actors|Ronald Colman\n"
    "Kismet|release_year|1944\n"
    "The Mark of Zorro|directed_by|Rouben Mamoulian\n"
    "The Mark of Zorro|starred_actors|Tyrone Power\n"
    "Blood and Sand|directed_by|Rouben Mamoulian\n"
    "Blood and Sand|starred_actors|RITA HAYWORTH\n"
    "Blood and Sand|has_tags|Nowhere Mentioned\n"
)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("roundtrip")
    (tmp / "wiki.txt").write_text(WIKI, encoding="utf-8")
    (tmp / "kb.txt").write_text(KB, encoding="utf-8")
    (tmp / "qa").mkdir()
    (tmp / "qa" / "1-hop").mkdir()
    (tmp / "qa" / "1-hop" / "qa_dev.txt").write_text("who directed [Kismet]\tWilliam Dieterle\n", encoding="utf-8")
    link_config = LinkConfig(max_passage_pieces=16)
    sparse_config = SparseConfig(mu=2, hash_buckets=1 << 12)
    lines = []
    index = build_index(tmp / "wiki.txt", tmp / "index", kb=tmp / "kb.txt", link_config=link_config,
                        sparse_config=sparse_config, questions=[str(tmp / "qa" / "1-hop" / "qa_dev.txt")],
                        log=lines.append)
    return tmp, index, link_config, sparse_config, lines


def test_build_index_round_trip(built):
    tmp, index, link_config, sparse_config, lines = built
    # recompute everything directly from the modules
    triples = list(read_kb(tmp / "kb.txt"))
    table = entities_from_kb(triples)
    articles = list(read_wikimovies(tmp / "wiki.txt", WarningLog()))
    linked = link_corpus(articles, EntityLinker(table.keys, link_config.min_name_length), link_config)
    m = build_sparse_matrices(linked, table, sparse_config)
    assert linked.n_passages > len(articles) - 1  # max_passage_pieces=16 splits the articles

    loaded = SparseIndex.load(tmp / "index")
    for idx in (index, loaded):
        assert idx.entities.names == table.names and idx.entities.aliases == table.aliases
        assert idx.config == sparse_config
        assert idx.n_entities == len(table) and idx.n_passages == linked.n_passages
        assert idx.n_mentions == len(linked.mentions) > 10
        pairs = [("A_indptr", m.A_indptr), ("A_indices", m.A_indices), ("A_data", m.A_data),
                 ("mentions", linked.mentions), ("entity_passage_indptr", m.entity_passage_indptr),
                 ("entity_passage", m.entity_passage), ("passage_article", linked.passage_article),
                 ("piece_offsets", linked.piece_offsets), ("pieces", linked.pieces)]
        for name, want in pairs:
            got = getattr(idx, name)
            assert got.dtype == want.dtype and np.array_equal(got, want), name
        assert np.array_equal(idx.mention_entity, linked.mentions[:, 0])
        for p in range(linked.n_passages):
            assert idx.passage_text(p) == linked.passage_texts[p]
            assert np.array_equal(idx.passage_pieces(p), linked.pieces[linked.piece_offsets[p] : linked.piece_offsets[p + 1]])
        assert np.array_equal(idx.A().toarray(), m_dense(m, len(table), len(linked.mentions)))
        for e in range(idx.n_entities):  # one row, from EP alone, equals the whole matrix's row
            row, scores = idx.A_row(e)
            assert row.tolist() == idx.A_indices[idx.A_indptr[e] : idx.A_indptr[e + 1]].tolist()
            assert scores.tolist() == idx.A_data[idx.A_indptr[e] : idx.A_indptr[e + 1]].tolist()
    path = tmp / "index"
    for name, want in [("passage_char_start", linked.passage_char_start), ("entity_passage_score", m.entity_passage_score),
                       ("df_buckets", m.df_buckets), ("df_counts", m.df_counts)]:
        assert np.array_equal(load_array(path, name), want), name
    assert read_jsonl(path, "articles.jsonl") == [{"key": k, "title": t} for k, t in zip(linked.article_keys, linked.article_titles)]
    # UTF-8 offsets of the passage texts
    offsets = load_array(path, "passage_text_offsets")
    assert offsets[-1] == (path / "passage_text.bin").stat().st_size
    assert offsets.tolist() == np.cumsum([0] + [len(t.encode()) for t in linked.passage_texts]).tolist()


def m_dense(m, n_entities, n_mentions):
    out = np.zeros((n_entities, n_mentions), dtype=np.float32)
    for e in range(n_entities):
        for k in range(m.A_indptr[e], m.A_indptr[e + 1]):
            out[e, m.A_indices[k]] = m.A_data[k]
    return out


def test_build_index_manifest_and_report(built):
    tmp, index, link_config, sparse_config, lines = built
    path = tmp / "index"
    manifest = read_manifest(path, FORMAT, FORMAT_VERSION)
    assert manifest["config"]["sparse"] == {"mu": 2, "epsilon": 0.0, "hash_buckets": 1 << 12, "ngram": 2,
                                            "unlinked_weight": 0.5}
    assert manifest["config"]["link"]["max_passage_pieces"] == 16
    assert manifest["config"]["corpus_format"] == "wikimovies"
    assert manifest["inputs"]["corpus"] == file_checksum(tmp / "wiki.txt")
    assert manifest["inputs"]["kb"] == file_checksum(tmp / "kb.txt")
    assert manifest["tokenizer"]["name"] == "all-MiniLM-L6-v2" and manifest["tokenizer"]["lowercase"] is True
    for name in ("entity_passage.npy", "mentions.npy", "pieces.npy", "entities.jsonl", "passage_text.bin"):
        assert name in manifest["files"], name
    # A_{E->M} is derived from EP, never written (tens of millions of entries the follow does not read)
    assert not [name for name in manifest["files"] if name.startswith("A_")] and not list(path.glob("A_*"))
    assert manifest["files"]["mentions.npy"]["shape"] == [index.n_mentions, 6]
    report = json.loads((path / "report.json").read_text())
    counts = report["counts"]
    assert counts == manifest["counts"]
    assert counts["entities"] == index.n_entities and counts["mentions"] == index.n_mentions
    assert counts["passages"] == index.n_passages and counts["articles"] == 4
    assert counts["A_nnz"] == int(index.A_indptr[-1])
    warnings = report["warnings"]
    assert warnings["article_without_text"]["count"] == 1  # "Untitled"
    assert warnings["entity_never_mentioned"]["count"] >= 1  # "Nowhere Mentioned"
    assert report["kb_coverage"]["triples"] == 9
    assert list(report["reachability"].values())[0]["questions"] == 1
    assert any(line.startswith("KB coverage:") for line in lines)
    assert all(not p.name.startswith(".index.tmp") for p in tmp.iterdir())


def test_index_built_before_unlinked_weight_loads_as_plain_tfidf(built, tmp_path):
    tmp, index, *_ = built
    old = tmp_path / "old-index"
    shutil.copytree(tmp / "index", old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["config"]["sparse"]["unlinked_weight"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    assert SparseIndex.load(old).config.unlinked_weight == 1.0
    assert index.config.unlinked_weight == 0.5


def test_build_index_refuses_to_overwrite_then_overwrites(built):
    tmp, index, link_config, sparse_config, _ = built
    before = (tmp / "index" / MANIFEST).read_text()
    with pytest.raises(ArtifactError, match="already exists"):
        build_index(tmp / "wiki.txt", tmp / "index", kb=tmp / "kb.txt", link_config=link_config,
                    sparse_config=sparse_config, log=lambda *a: None)
    assert (tmp / "index" / MANIFEST).read_text() == before
    again = build_index(tmp / "wiki.txt", tmp / "index2", kb=tmp / "kb.txt", link_config=link_config,
                        sparse_config=sparse_config, log=lambda *a: None)
    again = build_index(tmp / "wiki.txt", tmp / "index2", kb=tmp / "kb.txt", link_config=link_config,
                        sparse_config=sparse_config, overwrite=True, log=lambda *a: None)
    assert np.array_equal(again.A_indices, index.A_indices)


def index_files(path):
    """Every file of an index, bytes, but the manifest's time and command and the report's timings."""
    out = {}
    for f in sorted(path.iterdir()):
        if f.name == MANIFEST:
            manifest = json.loads(f.read_text())
            out[f.name] = {k: v for k, v in manifest.items() if k not in ("created", "command")}
        elif f.name == "report.json":
            out[f.name] = {k: v for k, v in json.loads(f.read_text()).items() if k != "timings_s"}
        else:
            out[f.name] = f.read_bytes()
    return out


@pytest.mark.parametrize("run_articles", [1, 2, 3])
def test_build_in_runs_writes_the_same_index(built, tmp_path, run_articles):
    """The corpus is read, linked and written in runs of articles (`drkit.index.stream`): any run length gives
    the index of one run (the round trip above checks that one against the modules called directly)."""
    tmp, _, link_config, sparse_config, _ = built
    question = str(tmp / "qa" / "1-hop" / "qa_dev.txt")
    runs = build_index(tmp / "wiki.txt", tmp_path / "runs", kb=tmp / "kb.txt", link_config=link_config,
                       sparse_config=sparse_config, questions=[question], shard_articles=run_articles,
                       log=lambda *a: None)
    assert runs.manifest["counts"]["articles"] > run_articles  # several runs
    assert index_files(tmp_path / "runs") == index_files(tmp / "index")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no work folder left


def test_build_index_needs_exactly_one_entity_source(built, tmp_path):
    tmp = built[0]
    with pytest.raises(ConfigError):
        build_index(tmp / "wiki.txt", tmp_path / "x", log=lambda *a: None)
    with pytest.raises(ConfigError):
        build_index(tmp / "wiki.txt", tmp_path / "x", kb=tmp / "kb.txt", entities=tmp / "kb.txt", log=lambda *a: None)
    assert not (tmp_path / "x").exists()


def test_sparse_index_load_refuses_other_artifacts(tmp_path):
    write_manifest(tmp_path / "a", {"format": FORMAT, "format_version": FORMAT_VERSION + 1})
    with pytest.raises(ArtifactError, match="Upgrade drkit"):
        SparseIndex.load(tmp_path / "a")
    write_manifest(tmp_path / "b", {"format": "something.else", "format_version": 1})
    with pytest.raises(ArtifactError, match="not a 'drkit.sparse_index'"):
        SparseIndex.load(tmp_path / "b")
    with pytest.raises(ArtifactError, match="no manifest.json"):
        (tmp_path / "c").mkdir()
        SparseIndex.load(tmp_path / "c")
