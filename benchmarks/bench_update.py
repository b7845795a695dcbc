"""`drkit add` of 1% more documents against a full build, on MetaQA; and what the frozen IDF changes before
`drkit compact`.

Steps, in one process, one at a time (timings are wall seconds on this machine):

1. full build of all articles: `build_index` (KB entities) + `build_mention_index` (the packaged all-MiniLM-L6-v2
   behind drkit's untrained projections, as `pretrain` with 0 steps makes it; the cost of embedding does not depend on
   pretraining);
2. the base: `build_index` of the first 99% of the articles; its mention index is made by the compaction path
   (`recompute_mention_index`: every vector reused from step 1, which equals embedding them, tested in
   tests/test_update.py), so step 1's embedding is not paid twice;
3. `add_documents` of the last 1% (linking, frozen-IDF scoring, embedding of the new mentions, the commit);
4. the live view against the full build: equal arrays, and the overlap of each entity's top-mu passages
   (IDF frozen at the base against recomputed);
5. `compact` (with its mention index) and whether it equals the full build, array for array and vector for vector;
6. `remove_documents` of 1% of the articles, and the load time of the live view.

Writes benchmarks/results/update/bench_update.{json,md}.

    python benchmarks/bench_update.py --data ../shared/data/metaqa
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import numpy as np

from drkit.dense.encoder import DualEncoder, EncoderConfig
from drkit.dense.mentions import EmbedConfig, MentionIndex, build_mention_index
from drkit.dense.update import add_documents, compact, recompute_mention_index, remove_documents
from drkit.index.build import build_index
from drkit.index.sparse import SparseIndex

ARRAYS = ("mentions", "entity_passage_indptr", "entity_passage", "entity_passage_score", "passage_article", "pieces",
          "piece_offsets", "_text_offsets", "_text")


def timed(fn, *args, **kw):
    t = time.perf_counter()
    out = fn(*args, **kw)
    return out, time.perf_counter() - t


def equal_arrays(a: SparseIndex, b: SparseIndex) -> dict:
    return {name: bool(np.array_equal(np.asarray(getattr(a, name)), np.asarray(getattr(b, name)))) for name in ARRAYS}


def ep_overlap(live: SparseIndex, full: SparseIndex) -> dict:
    """Per entity with a non-empty top-mu list in the full build: the share of it the live view keeps."""
    shares, same_order = [], 0
    for e in range(full.n_entities):
        y = full.entity_passage[full.entity_passage_indptr[e]:full.entity_passage_indptr[e + 1]]
        x = live.entity_passage[live.entity_passage_indptr[e]:live.entity_passage_indptr[e + 1]]
        if len(y):
            shares.append(len(np.intersect1d(x, y)) / len(y))
            same_order += int(np.array_equal(x, y))
    shares = np.array(shares)
    score_diff = None
    if np.array_equal(live.entity_passage_indptr, full.entity_passage_indptr) and \
            np.array_equal(live.entity_passage, full.entity_passage):
        a, b = np.asarray(live.entity_passage_score), np.asarray(full.entity_passage_score)
        score_diff = {"max_relative": float(np.max(np.abs(a - b) / np.maximum(b, 1e-9))),
                      "mean_relative": float(np.mean(np.abs(a - b) / np.maximum(b, 1e-9)))}
    return {"entities": int(len(shares)), "mean_share_kept": float(shares.mean()), "min_share_kept": float(shares.min()),
            "entities_all_kept": int((shares == 1).sum()), "same_list": same_order, "score_difference": score_diff}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="../shared/data/metaqa", help="MetaQA folder (wiki.txt, kb.txt)")
    ap.add_argument("--work", default="runs/bench-update", help="scratch folder (deleted first)")
    ap.add_argument("--fraction", type=float, default=0.01, help="share of the articles added (the last ones)")
    ap.add_argument("--out", default="benchmarks/results/update", help="results folder")
    args = ap.parse_args()
    data, work, out = Path(args.data), Path(args.work), Path(args.out)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    out.mkdir(parents=True, exist_ok=True)
    quiet = lambda *a: None  # noqa: E731
    kb = data / "kb.txt"
    articles = [a for a in (data / "wiki.txt").read_text(encoding="utf-8").split("\n\n") if a.strip()]
    cut = len(articles) - max(1, round(args.fraction * len(articles)))
    (work / "base.txt").write_text("\n\n".join(articles[:cut]) + "\n", encoding="utf-8")
    (work / "added.txt").write_text("\n\n".join(articles[cut:]) + "\n", encoding="utf-8")
    (work / "all.txt").write_text("\n\n".join(articles) + "\n", encoding="utf-8")
    r: dict = {"data": str(data), "articles": len(articles), "base_articles": cut, "added_articles": len(articles) - cut}

    print("1. full build", flush=True)
    full, r["full_index_s"] = timed(build_index, work / "all.txt", work / "full", kb=kb, log=quiet)
    DualEncoder.from_base(EncoderConfig()).save(work / "enc")
    full_m, r["full_embed_s"] = timed(build_mention_index, work / "full", work / "enc", work / "full-mentions",
                                      EmbedConfig(), log=quiet)
    r["full_build_s"] = r["full_index_s"] + r["full_embed_s"]
    r["mentions"] = full.n_mentions
    print(f"   {r['full_build_s']:.0f} s", flush=True)

    print("2. base build", flush=True)
    base, r["base_index_s"] = timed(build_index, work / "base.txt", work / "index", kb=kb, log=quiet)
    _, r["base_mentions_reused_s"] = timed(recompute_mention_index, full, full_m, base, work / "mentions", log=quiet)

    print("3. add", flush=True)
    report, r["add_s"] = timed(add_documents, work / "index", work / "added.txt", [work / "mentions"], log=print)
    r["add_report"] = report
    r["add_over_full_build"] = r["add_s"] / r["full_build_s"]

    print("4. live view against the full build", flush=True)
    live, r["live_load_s"] = timed(SparseIndex.load, work / "index")
    r["live_equal_arrays"] = equal_arrays(live, full)
    r["live_vectors_equal"] = bool(np.array_equal(MentionIndex.load(work / "mentions").for_index(live).vectors,
                                                  MentionIndex.load(work / "full-mentions").vectors))
    r["frozen_idf_overlap"] = ep_overlap(live, full)
    _, r["base_load_s"] = timed(SparseIndex.load, work / "full")

    print("5. compact", flush=True)
    compacted, r["compact_s"] = timed(compact, work / "index", work / "compact", [work / "mentions"],
                                      [work / "compact-mentions"], log=quiet)
    r["compact_equal_arrays"] = equal_arrays(compacted, full)
    r["compact_vectors_equal"] = bool(np.array_equal(MentionIndex.load(work / "compact-mentions").vectors,
                                                     MentionIndex.load(work / "full-mentions").vectors))
    r["compact_embedding"] = MentionIndex.load(work / "compact-mentions").manifest["embedding"]

    print("6. remove", flush=True)
    keys = live.article_keys[:: max(1, round(1 / args.fraction))]
    _, r["remove_s"] = timed(remove_documents, work / "index", keys, log=quiet)
    r["removed_articles"] = len(keys)
    _, r["live_load_after_remove_s"] = timed(SparseIndex.load, work / "index")

    (out / "bench_update.json").write_text(json.dumps(r, indent=2) + "\n")
    ov = r["frozen_idf_overlap"]
    md = [
        "# drkit add / compact on MetaQA (`benchmarks/bench_update.py`)", "",
        f"{r['articles']:,} WikiMovies articles, {r['mentions']:,} mentions; the last {r['added_articles']} "
        f"({args.fraction:.0%}) added to an index of the first {r['base_articles']:,}. 2-core CPU, wall seconds.", "",
        "| step | seconds |", "|---|---|",
        f"| full build: index | {r['full_index_s']:.1f} |",
        f"| full build: embed (all-MiniLM-L6-v2, bf16) | {r['full_embed_s']:.1f} |",
        f"| **full build** | **{r['full_build_s']:.1f}** |",
        f"| **drkit add of {r['added_articles']} articles** ({report['mentions']:,} mentions) | **{r['add_s']:.1f}** |",
        f"| load of the live view (base + segment) | {r['live_load_s']:.2f} |",
        f"| load of the full build | {r['base_load_s']:.2f} |",
        f"| drkit compact (sparse rebuild + mention index, vectors reused) | {r['compact_s']:.1f} |",
        f"| drkit remove of {r['removed_articles']} articles | {r['remove_s']:.2f} |", "",
        f"**add / full build = {r['add_over_full_build']:.4f}** (add's steps: {report['timings_s']}).", "",
        "IDF policy (frozen at build, recomputed at compaction): before compaction the live view's arrays equal "
        f"the full build's except the EP scores: {json.dumps(r['live_equal_arrays'])}; vectors equal: "
        f"{r['live_vectors_equal']}. Of the {ov['entities']:,} entities with passages, {ov['entities_all_kept']:,} "
        f"keep all their top-mu passages (mean share kept {ov['mean_share_kept']:.4f}, min {ov['min_share_kept']:.3f}); "
        f"score difference: {ov['score_difference']}.", "",
        f"After compaction, equal to the full build array for array: {all(r['compact_equal_arrays'].values())}; "
        f"vectors bit for bit: {r['compact_vectors_equal']} ({r['compact_embedding']}).",
    ]
    (out / "bench_update.md").write_text("\n".join(md) + "\n")
    print("\n".join(md))


if __name__ == "__main__":
    main()
