"""Read advice (`drkit.util.pages.will_need`) on and off, with a cold and a warm page cache, side by side.

    .venv/bin/python benchmarks/bench_pages.py --build runs/scale/1000000     # a build bench_scale --keep left

One process loads the index and vectors of a `bench_scale.py --keep` build (restricted retrieval, an untrained
2-hop model on the base encoder, top-K 1,000) and, `--repeats` times, for each mode in turn:

* ``off``: no advice (a plain gather, one page fault at a time);
* ``sample``: drkit's default, advice unless the sampled rows' pages are all in memory;
* ``always``: advice for every gather, without looking first;

drops every page of the index's and vectors' files from the page cache (its own mappings too:
``madvise(MADV_DONTNEED)``, then ``posix_fadvise(DONTNEED)``), times the same `--questions` questions at
batch 1 (cold), then again (warm). The modes alternate, so the machine's drift touches each alike; the
first repeat also pays for reclaiming whatever else the page cache held. Writes
``OUT/bench_pages_<entities>.json`` and a markdown table.
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np

MODES = ("off", "sample", "always")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--build", type=Path, required=True, help="a size folder of bench_scale --keep (index/, mentions/)")
    p.add_argument("--encoder", type=Path, default=Path("runs/scale/encoder-base/encoder"))
    p.add_argument("--questions", type=int, default=60, help="questions a pass (batch 1)")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    p.add_argument("--out", type=Path, default=Path("benchmarks/results/pages"))
    args = p.parse_args(argv)
    import torch

    torch.set_num_threads(2)
    import drkit.dense.mips as mips_module
    import drkit.reason.graph as graph_module
    from drkit.dense.encoder import DualEncoder
    from drkit.reason.follow import FollowConfig
    from drkit.reason.model import ModelConfig, MultiHopModel
    from drkit.reason.vkb import VirtualKB
    from drkit.util import pages

    index_dir, mentions_dir = args.build / "index", args.build / "mentions"
    t = time.perf_counter()
    vkb = VirtualKB.load(index_dir, mentions_dir, "exact")
    model = MultiHopModel.from_encoder(DualEncoder.load(args.encoder), ModelConfig(hops=2)).eval()
    model.set_entities(vkb.entity_names)
    load_s = time.perf_counter() - t
    graph = vkb.graph
    maps = {id(m): m for m in (pages.mapping_of(a) for a in (graph.vectors, graph.entity_passage, graph._scores)) if m}

    def evict():
        for m in maps.values():
            m.madvise(mmap.MADV_DONTNEED)  # this process's own mappings let go of the pages
        pages.drop_from_page_cache(index_dir, mentions_dir)

    real_will_need, real_resident = pages.will_need, pages.resident

    def set_mode(mode: str) -> None:
        advice = (lambda array, rows: 0) if mode == "off" else real_will_need
        graph_module.will_need = mips_module.will_need = advice
        pages.resident = real_resident if mode == "sample" else (lambda addresses: None)  # None: always advise

    fc = FollowConfig(retrieval="restricted", top_k=1000)
    rng = np.random.default_rng(7)
    degree = np.bincount(np.asarray(vkb.index.mention_entity), minlength=vkb.index.n_entities)
    topics = rng.choice(len(degree), args.questions + 2, p=degree / degree.sum())
    texts = [f"which entities are linked from the page of {vkb.entity_names[e]}" for e in topics]

    def run(i: int) -> None:
        with torch.no_grad():
            model(texts[i : i + 1], topics[i : i + 1], vkb, follow_config=fc)

    run(0)  # warm-up (the model's first call)
    rows = []
    for repeat in range(args.repeats):
        for mode in args.modes:
            set_mode(mode)
            evict()
            row = {"repeat": repeat, "mode": mode}
            for key in ("cold_qps", "warm_qps"):
                t = time.perf_counter()
                for i in range(2, args.questions + 2):
                    run(i)
                row[key] = round(args.questions / (time.perf_counter() - t), 2)
            rows.append(row)
            print(row, flush=True)
    set_mode("sample")
    summary = {mode: {key: round(statistics.median(r[key] for r in rows if r["mode"] == mode and r["repeat"] > 0), 2)
                      for key in ("cold_qps", "warm_qps")} for mode in args.modes} if args.repeats > 1 else {}
    result = {"machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
              "parameters": json.loads(json.dumps(vars(args), default=str)),
              "entities": vkb.index.n_entities, "mentions": vkb.index.n_mentions, "load_s": round(load_s, 1),
              "runs": rows, "median_of_repeats_after_the_first": summary}
    args.out.mkdir(parents=True, exist_ok=True)
    name = f"bench_pages_{vkb.index.n_entities}"
    (args.out / f"{name}.json").write_text(json.dumps(result, indent=2) + "\n")
    lines = [f"Read advice on {vkb.index.n_entities:,} entities / {vkb.index.n_mentions:,} mentions "
             f"({args.build}), restricted retrieval, batch 1, {args.questions} questions a pass, "
             f"{os.cpu_count()} cores; questions/s", "", "| repeat | mode | cold | warm |", "|---|---|---|---|"]
    lines += [f"| {r['repeat']} | {r['mode']} | {r['cold_qps']} | {r['warm_qps']} |" for r in rows]
    if summary:
        lines += ["", "Median over the repeats after the first (which also reclaims the rest of the page cache):", "",
                  "| mode | cold | warm |", "|---|---|---|"]
        lines += [f"| {m} | {v['cold_qps']} | {v['warm_qps']} |" for m, v in summary.items()]
    (args.out / f"{name}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
