#!/usr/bin/env python
"""Figure 2 of the DrKIT paper (Dhingra et al., ICLR 2020), on CPU: the cost of one hop's sparse
expansion ``Z^T A_{E->M}`` as the number of entities |E| grows.

For each |E| a synthetic, seeded A_{E->M} is built as a CSR matrix with exactly ``--nnz-per-row``
non-zeros per row (the paper's mu-like bound on the mentions kept per entity), over
|M| = ``--mentions-per-entity`` * |E| mention columns chosen uniformly at random (sorted within a row,
float32 values in (0, 1]). A sparse input set z with K non-zero entities (distinct, uniform, random
positive float32 weights) is then expanded by

* ``drkit``: `drkit.index.sparse.ragged_expand`, which slices only the K rows of A (the paper's
  ragged representation) and returns sparse coordinates;
* ``scipy CSR(A^T) @ z``: scipy's CSR matrix times a dense |E| vector, with the transpose A^T
  converted to CSR once, outside the timed region (the textbook sparse matrix x dense vector);
* ``scipy A.T @ z``: the same product through scipy's transposed view of A (a CSC matvec; no copy,
  nothing precomputed).

The dense |E| vector z is built once outside the timed region, so the scipy timings are of the
matrix-vector product alone (this favours scipy). Each configuration is checked: the dense |M|
vector rebuilt from drkit's coordinates must match scipy's result (np.allclose), else the script
stops with an error.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import scipy
import scipy.sparse as sp

from drkit.index.csr import ragged_expand

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "bench_expand.json"


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entities", type=int, nargs="+", default=[10**4, 10**5, 10**6], metavar="E",
                   help="sizes |E| to test (default: 1e4 1e5 1e6)")
    p.add_argument("--k", type=int, nargs="+", default=[1000, 10000], metavar="K",
                   help="non-zero entities in the input set (default: 1000 10000); skipped where K > |E|")
    p.add_argument("--nnz-per-row", type=int, default=50, help="non-zeros per row of A, mu-like (default: 50)")
    p.add_argument("--mentions-per-entity", type=int, default=10, help="|M| = this * |E| (default: 10)")
    p.add_argument("--repeats", type=int, default=20, help="timed repeats per method (default: 20)")
    p.add_argument("--warmup", type=int, default=3, help="untimed warm-up calls per method (default: 3)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default: 0)")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"JSON results file (default: {DEFAULT_OUT.relative_to(ROOT)})")
    return p.parse_args(argv)


def synthetic_A(n_entities: int, n_mentions: int, nnz_per_row: int, rng: np.random.Generator) -> sp.csr_matrix:
    """CSR (E, M) float32 with exactly nnz_per_row entries a row, uniform random columns sorted in a row."""
    cols = rng.integers(0, n_mentions, size=(n_entities, nnz_per_row), dtype=np.int32)
    cols.sort(axis=1)
    data = (1.0 - rng.random(n_entities * nnz_per_row, dtype=np.float32))  # (0, 1]
    indptr = np.arange(0, n_entities * nnz_per_row + 1, nnz_per_row, dtype=np.int64)
    return sp.csr_matrix((data, cols.reshape(-1), indptr), shape=(n_entities, n_mentions))


def time_calls(fn, repeats: int, warmup: int) -> np.ndarray:
    for _ in range(warmup):
        fn()
    times = np.empty(repeats)
    for i in range(repeats):
        t = time.perf_counter()
        fn()
        times[i] = time.perf_counter() - t
    return times * 1e3  # ms


def summary(times_ms: np.ndarray) -> dict:
    return {"median_ms": float(np.median(times_ms)), "p90_ms": float(np.percentile(times_ms, 90)),
            "min_ms": float(times_ms.min()), "mean_ms": float(times_ms.mean())}


def machine_info() -> dict:
    return {"nproc": os.cpu_count(), "sched_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
            "platform": platform.platform(), "processor": platform.processor() or platform.machine(),
            "python": sys.version.split()[0], "numpy": np.__version__, "scipy": scipy.__version__}


METHODS = [("drkit", "drkit ragged_expand"), ("scipy_csr_T", "scipy CSR(A^T) @ z"), ("scipy_AT_view", "scipy A.T @ z")]


def main(argv=None) -> int:
    args = parse_args(argv)
    rng = np.random.default_rng(args.seed)
    results = []
    print(f"A_(E->M): {args.nnz_per_row} non-zeros per row, |M| = {args.mentions_per_entity} x |E|, float32 values, "
          f"int32 column indices; {args.warmup} warm-up + {args.repeats} timed calls per method; seed {args.seed}")
    print("scipy: z is a dense |E| float32 vector built outside the timed region; CSR(A^T) is precomputed "
          "outside the timed region; 'A.T @ z' uses scipy's transposed (CSC) view, no copy.")
    print("drkit: ragged_expand(A.indptr, A.indices, A.data, rows=0, entity_ids, weights) -> sparse coordinates.\n")
    for n_entities in args.entities:
        n_mentions = args.mentions_per_entity * n_entities
        t = time.perf_counter()
        A = synthetic_A(n_entities, n_mentions, args.nnz_per_row, rng)
        AT = A.T.tocsr()  # precomputed transpose, outside the timed region
        AT.sort_indices()
        build_s = time.perf_counter() - t
        print(f"|E| = {n_entities:,}  |M| = {n_mentions:,}  nnz = {A.nnz:,}  (built A and CSR(A^T) in {build_s:.1f} s)")
        for k in args.k:
            if k > n_entities:
                print(f"  K = {k:,} > |E|, skipped")
                continue
            entity_ids = np.sort(rng.choice(n_entities, size=k, replace=False)).astype(np.int64)
            weights = (1.0 - rng.random(k, dtype=np.float32))
            rows = np.zeros(k, dtype=np.int64)
            z = np.zeros(n_entities, dtype=np.float32)
            z[entity_ids] = weights

            # Correctness first: drkit's coordinates, densified, against both scipy forms.
            out_rows, mention_ids, values = ragged_expand(A.indptr, A.indices, A.data, rows, entity_ids, weights)
            if len(out_rows) and np.any(out_rows != 0):
                raise SystemExit(f"FAIL: drkit returned rows other than 0 for |E|={n_entities}, K={k}")
            dense_drkit = np.zeros(n_mentions, dtype=np.float64)
            dense_drkit[mention_ids] = values
            dense_csr = AT @ z
            dense_view = A.T @ z
            for name, ref in (("CSR(A^T) @ z", dense_csr), ("A.T @ z", dense_view)):
                if ref.shape != (n_mentions,) or not np.allclose(dense_drkit, ref, rtol=1e-5, atol=1e-6):
                    err = float(np.max(np.abs(dense_drkit - ref))) if ref.shape == (n_mentions,) else float("nan")
                    raise SystemExit(f"FAIL: drkit and scipy {name} disagree for |E|={n_entities}, K={k} "
                                     f"(max abs diff {err})")
            output_nnz = int(len(mention_ids))
            max_abs_diff = float(np.max(np.abs(dense_drkit - dense_csr)))
            del dense_drkit, dense_csr, dense_view

            timings = {
                "drkit": time_calls(lambda: ragged_expand(A.indptr, A.indices, A.data, rows, entity_ids, weights),
                                    args.repeats, args.warmup),
                "scipy_csr_T": time_calls(lambda: AT @ z, args.repeats, args.warmup),
                "scipy_AT_view": time_calls(lambda: A.T @ z, args.repeats, args.warmup),
            }
            row = {"entities": n_entities, "mentions": n_mentions, "nnz": int(A.nnz), "k": k,
                   "output_nnz": output_nnz, "verified": True, "max_abs_diff": max_abs_diff,
                   **{m: summary(timings[m]) for m, _ in METHODS},
                   "times_ms": {m: [round(float(x), 4) for x in timings[m]] for m, _ in METHODS}}
            row["speedup_median_vs_scipy_csr_T"] = row["scipy_csr_T"]["median_ms"] / row["drkit"]["median_ms"]
            results.append(row)
            print(f"  K = {k:>6,}: output nnz {output_nnz:,}; verified; " + "; ".join(
                f"{label} median {row[m]['median_ms']:.3f} ms" for m, label in METHODS))
        del A, AT
        gc.collect()

    print()
    print(format_table(results))
    payload = {
        "benchmark": "bench_expand",
        "description": "Z^T A_(E->M) for one sparse entity set: drkit ragged_expand vs scipy sparse matrix x dense vector",
        "machine": machine_info(),
        "parameters": {"entities": args.entities, "k": args.k, "nnz_per_row": args.nnz_per_row,
                       "mentions_per_entity": args.mentions_per_entity, "repeats": args.repeats,
                       "warmup": args.warmup, "seed": args.seed, "dtype": "float32 values, int32 column indices",
                       "layout": "uniform random mention columns, sorted within each row",
                       "notes": ["dense z built outside the timed region",
                                 "CSR(A^T) precomputed outside the timed region",
                                 "scipy A.T @ z uses the transposed CSC view (no copy)",
                                 "drkit returns sparse (row, mention, weight) coordinates; batch of one set (rows=0)"]},
        "methods": dict(METHODS),
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    print(f"\nwrote {args.out}")
    return 0


def format_table(results: list[dict]) -> str:
    header = ["|E|", "|M|", "K", "out nnz"]
    for _, label in METHODS:
        header += [f"{label} med ms", "p90 ms"]
    header += ["speedup*"]
    lines = [header]
    for r in results:
        line = [f"{r['entities']:,}", f"{r['mentions']:,}", f"{r['k']:,}", f"{r['output_nnz']:,}"]
        for m, _ in METHODS:
            line += [f"{r[m]['median_ms']:.3f}", f"{r[m]['p90_ms']:.3f}"]
        line += [f"{r['speedup_median_vs_scipy_csr_T']:.2f}x"]
        lines.append(line)
    widths = [max(len(l[i]) for l in lines) for i in range(len(header))]
    out = ["  ".join(c.rjust(w) for c, w in zip(l, widths)) for l in lines]
    out.insert(1, "  ".join("-" * w for w in widths))
    out.append("* speedup = scipy CSR(A^T) @ z median / drkit median")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
