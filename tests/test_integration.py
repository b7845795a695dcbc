"""End to end on a slice of MetaQA: the sample shipped in data/sample, and the full data's first
articles when ../shared/data/metaqa is there."""

from pathlib import Path

import numpy as np
import pytest

from drkit.data.kb import read_kb
from drkit.data.text import fold
from drkit.index.build import build_index
from drkit.index.sparse import SparseIndex
from drkit.index.tfidf import NgramHasher

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "data" / "sample"
SHARED = ROOT.parent / "shared" / "data" / "metaqa"


def check_index(index: SparseIndex, kb_path: Path) -> None:
    """Properties that must hold for every index, checked against direct recomputation."""
    mentions = np.asarray(index.mentions)
    # B: every mention's text is its entity's name (case-insensitively).
    for e, p, ps, pe, cs, ce in mentions:
        assert fold(index.passage_text(p)[cs:ce]) == index.entities.keys[e]
        assert 0 <= ps <= pe < len(index.passage_pieces(p))
    # Mentions are sorted by passage and A's columns are sorted within each row.
    assert np.all(np.diff(mentions[:, 1]) >= 0)
    for e in range(0, index.n_entities, 7):
        row = np.asarray(index.A_indices[index.A_indptr[e] : index.A_indptr[e + 1]])
        assert np.all(np.diff(row) > 0)
        # A row holds whole passages: the mentions of exactly the entity's kept passages.
        kept = index.entity_passage[index.entity_passage_indptr[e] : index.entity_passage_indptr[e + 1]]
        assert len(kept) <= index.config.mu
        expected = np.flatnonzero(np.isin(mentions[:, 1], kept))
        assert np.array_equal(row, expected)
        # ... and each kept passage shares at least one hashed n-gram with the entity's name.
        hasher = NgramHasher(index.config.hash_buckets, index.config.ngram)
        name = set(hasher.buckets(index.entities.keys[e]).tolist())
        for p in kept:
            assert name & set(hasher.buckets(index.passage_text(p)).tolist())
    # Every KB entity is in the table.
    for t in read_kb(kb_path):
        assert index.entities.lookup(t.subject) is not None and index.entities.lookup(t.object) is not None


def test_sample_index(tmp_path):
    questions = [str(SAMPLE / f"{h}-hop" / "qa_dev.txt") for h in (1, 2, 3)]
    index = build_index(SAMPLE / "wiki.txt", tmp_path / "idx", kb=SAMPLE / "kb.txt", questions=questions,
                        log=lambda line: None)
    check_index(index, SAMPLE / "kb.txt")
    report = __import__("json").loads((tmp_path / "idx" / "report.json").read_text())
    assert report["counts"]["articles"] == 354
    assert report["kb_coverage"]["fraction"] > 0.95
    for r in report["reachability"].values():
        assert r["fraction"] > 0.95


@pytest.mark.integration
@pytest.mark.skipif(not SHARED.exists(), reason="../shared/data/metaqa is not here")
def test_metaqa_slice(tmp_path):
    articles = (SHARED / "wiki.txt").read_text(encoding="utf-8").split("\n\n")[:300]
    (tmp_path / "wiki.txt").write_text("\n\n".join(articles) + "\n", encoding="utf-8")
    titles = {a.strip().split("\n")[0][2:] for a in articles if a.strip()}
    with open(SHARED / "kb.txt", encoding="utf-8") as f:
        kb = [line for line in f if line.split("|")[0] in titles]
    (tmp_path / "kb.txt").write_text("".join(kb), encoding="utf-8")
    index = build_index(tmp_path / "wiki.txt", tmp_path / "idx", kb=tmp_path / "kb.txt", log=lambda line: None)
    check_index(index, tmp_path / "kb.txt")
    # Every film's article mentions the film.
    titles_linked = {index.entities.names[e] for e in np.asarray(index.mentions[:, 0])}
    missing = [t for t in titles if index.entities.lookup(t) is not None and len(fold(t)) >= 3
               and index.entities.names[index.entities.lookup(t)] not in titles_linked]
    assert not missing
