"""MIPS against a full matrix product and top-k."""

import numpy as np
import pytest
import torch

from drkit.dense.mips import ExactMIPS, FaissMIPS, recall_at_k
from drkit.errors import ConfigError


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


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_exact_mips_shares_the_follows_copy(tmp_path, dtype):
    """cache(shared) searches views of the follow's copy of f(M) in the score dtype (bf16 where native, else
    float32): the same results as its own blocks, and no second copy (the blocks' storage is the shared tensor's)."""
    from drkit.reason.graph import FollowGraph

    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(700, 16)).astype(np.float16)
    np.save(tmp_path / "v.npy", vectors)
    mm = np.load(tmp_path / "v.npy", mmap_mode="r")
    graph = FollowGraph(np.zeros(3, np.int64), np.zeros(0, np.int64), np.zeros(700, np.int64), np.zeros(700, np.int64),
                        2, 1, mm)
    shared = graph.vectors_as(dtype, block=64)  # made 64 rows at a time from the memory map
    assert torch.equal(shared, torch.from_numpy(vectors.astype(np.float32)).to(dtype))
    own = ExactMIPS(mm, block_size=256, compute_dtype=dtype).cache()
    views = ExactMIPS(mm, block_size=256, compute_dtype=dtype).cache(shared)
    assert all(b.untyped_storage().data_ptr() == shared.untyped_storage().data_ptr() for b in views._blocks)
    q = rng.normal(size=(5, 16)).astype(np.float32)
    for a, b in zip(own.search(q, 7), views.search(q, 7)):
        assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="shared vectors"):
        ExactMIPS(mm, compute_dtype=dtype).cache(shared.double())


def test_gather_gradient_reads_only_the_rows_touched(tmp_path):
    """The gradient sum_i grad_i f(m_i) from the fp16 memory map equals the dense product with f(M) in
    float32 (no float32 copy of f(M) is made)."""
    from drkit.reason.graph import FollowGraph

    rng = np.random.default_rng(4)
    vectors = rng.normal(size=(300, 8)).astype(np.float16)
    np.save(tmp_path / "v.npy", vectors)
    graph = FollowGraph(np.zeros(3, np.int64), np.zeros(0, np.int64), np.zeros(300, np.int64), np.zeros(300, np.int64),
                        2, 1, np.load(tmp_path / "v.npy", mmap_mode="r"))
    rows, mentions = rng.integers(0, 4, 50), rng.integers(0, 300, 50)
    grad = torch.from_numpy(rng.normal(size=50).astype(np.float32))
    got = graph.gather_gradient(rows, mentions, grad, 4)
    dense = torch.zeros(4, 300)
    dense.index_put_((torch.from_numpy(rows), torch.from_numpy(mentions)), grad, accumulate=True)
    torch.testing.assert_close(got, dense @ torch.from_numpy(vectors.astype(np.float32)))
    assert torch.float32 not in graph._cast


def test_ivfpq_rescores_its_short_list_exactly_from_the_memory_map(tmp_path):
    """IVF-PQ keeps codes in memory and scores its rerank * k candidates again from the fp16 memory map:
    every returned score is the exact float32 inner product of its id, best first; visiting every list with
    a long short list finds (nearly) the exact top-k, and its recall is above the codes' alone."""
    pytest.importorskip("faiss")
    rng = np.random.default_rng(5)
    centers = rng.standard_normal((20, 32)).astype(np.float32) * 3
    vectors = (centers[rng.integers(0, 20, 6000)] + rng.standard_normal((6000, 32))).astype(np.float16)
    np.save(tmp_path / "v.npy", vectors)
    mm = np.load(tmp_path / "v.npy", mmap_mode="r")
    queries = (centers[rng.integers(0, 20, 40)] + rng.standard_normal((40, 32))).astype(np.float32)
    exact = ExactMIPS(mm, compute_dtype=torch.float32)
    pq = FaissMIPS(mm, nlist=16, nprobe=16, pq_m=8, rerank=20)
    scores, ids = pq.search(queries, 10)
    f32 = vectors.astype(np.float32)
    for b in range(len(queries)):
        np.testing.assert_allclose(scores[b], f32[ids[b]].astype(np.float64) @ queries[b], rtol=1e-5)
        assert np.all(np.diff(scores[b]) <= 0)
    assert recall_at_k(pq, exact, queries, 10) >= 0.97
    codes_only = FaissMIPS(mm, nlist=16, nprobe=16, pq_m=8, rerank=1)
    assert recall_at_k(codes_only, exact, queries, 10) < recall_at_k(pq, exact, queries, 10)
    assert pq.memory_bytes == 6000 * (8 + 8)
    with pytest.raises(ConfigError, match="pq_m"):
        FaissMIPS(mm, pq_m=5)
