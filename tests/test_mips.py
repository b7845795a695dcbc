"""MIPS against a full matrix product and top-k."""

import numpy as np
import pytest
import torch

from drkit.dense.mips import ExactMIPS, FaissMIPS, recall_at_k


def reference(vectors, queries, k):
    scores = queries.astype(np.float64) @ vectors.astype(np.float64).T
    ids = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, ids, axis=1), ids


@pytest.mark.parametrize("block_size", [7, 64, 1000])
def test_exact_mips_matches_full_topk_in_float32(block_size):
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((500, 16)).astype(np.float32)
    queries = rng.standard_normal((9, 16)).astype(np.float32)
    index = ExactMIPS(vectors, block_size=block_size, compute_dtype=torch.float32)
    scores, ids = index.search(queries, 20)
    ref_scores, ref_ids = reference(vectors, queries, 20)
    assert np.array_equal(ids, ref_ids)
    assert np.allclose(scores, ref_scores, atol=1e-4)
    cached_scores, cached_ids = index.cache().search(queries, 20)
    assert np.array_equal(cached_ids, ids)


def test_exact_mips_bf16_on_memory_map_finds_nearly_the_same(tmp_path):
    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((2000, 32)).astype(np.float16)
    np.save(tmp_path / "v.npy", vectors)
    mapped = np.load(tmp_path / "v.npy", mmap_mode="r")
    queries = rng.standard_normal((16, 32)).astype(np.float32)
    _, ids = ExactMIPS(mapped, block_size=300).search(queries, 10)
    _, ref_ids = reference(vectors.astype(np.float32), queries, 10)
    overlap = np.mean([len(np.intersect1d(a, b)) / 10 for a, b in zip(ids, ref_ids)])
    assert overlap >= 0.9
    assert np.array_equal(ids[:, 0], ref_ids[:, 0])


def test_k_larger_than_the_index_is_padded():
    vectors = np.eye(3, dtype=np.float32)
    scores, ids = ExactMIPS(vectors, compute_dtype=torch.float32).search(np.array([[0.0, 2.0, 1.0]]), 5)
    assert ids.tolist() == [[1, 2, 0, -1, -1]]
    assert scores[0, :3].tolist() == [2.0, 1.0, 0.0] and np.all(np.isneginf(scores[0, 3:]))


def test_query_shape_is_checked():
    with pytest.raises(ValueError, match="shape"):
        ExactMIPS(np.zeros((4, 8), np.float32)).search(np.zeros((2, 7), np.float32), 1)


def test_faiss_recall_on_clustered_data():
    pytest.importorskip("faiss")
    rng = np.random.default_rng(2)
    centers = rng.standard_normal((20, 32)).astype(np.float32) * 3
    vectors = (centers[rng.integers(0, 20, 5000)] + rng.standard_normal((5000, 32))).astype(np.float32)
    queries = (centers[rng.integers(0, 20, 50)] + rng.standard_normal((50, 32))).astype(np.float32)
    exact = ExactMIPS(vectors, compute_dtype=torch.float32)
    full = FaissMIPS(vectors, nlist=20, nprobe=20)  # visits every list: must equal exact search
    assert recall_at_k(full, exact, queries, 10) == 1.0
    approx = FaissMIPS(vectors, nlist=50, nprobe=8)
    recall = recall_at_k(approx, exact, queries, 10)
    assert 0.5 < recall <= 1.0
