#!/usr/bin/env python
"""fp32 against bf16 autocast, side by side in one run on this machine, with the choice `auto` makes.

On the MetaQA sample that ships in data/sample (or `--data`, a folder with wiki.txt, kb.txt and
2-hop/qa_train.txt) and the real all-MiniLM-L6-v2, for each precision:

* a pretraining step (`drkit.dense.pretrain.batch_loss` + the optimiser step: 8 anchor passages, 20
  passages a step, the default recipe), median of `--steps` steps after one warm-up step;
* embedding throughput (mentions/s) on the first `--embed-passages` passages, and the cosine between
  the bf16 and fp32 vectors;
* an end-to-end training step of a 2-hop model (batch 32, forward through both follows, backward,
  optimiser), median of `--steps` after one warm-up;
* question throughput of the trained-shape model through the front door (`DrKIT.answer_batch`, no
  chain) at batch 1 and batch 64 over `--questions` questions, and how many top-1 answers agree.

The question-time vectors are embedded once in fp32; a precision sets the question encoder and the
dtype mention vectors are scored in (bf16 or fp32). Writes OUT/precision.json and OUT/precision.md.
"""

from __future__ import annotations

import argparse
import copy
import json
import platform
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dense import _Slice  # noqa: E402  (this script's folder is on sys.path)

from drkit.data.kb import read_kb  # noqa: E402
from drkit.data.questions import load_questions  # noqa: E402
from drkit.dense.distant import DistantConfig, DistantSupervision  # noqa: E402
from drkit.dense.encoder import DualEncoder, EncoderConfig  # noqa: E402
from drkit.dense.mentions import EmbedConfig, MentionIndex, build_mention_index, embed_mentions  # noqa: E402
from drkit.dense.pretrain import PretrainConfig, batch_loss, optimizer_for, pretrain, sample_batch  # noqa: E402
from drkit.index.build import build_index  # noqa: E402
from drkit.index.sparse import SparseIndex  # noqa: E402
from drkit.qa.pipeline import DrKIT  # noqa: E402
from drkit.reason.follow import FollowConfig  # noqa: E402
from drkit.reason.model import ModelConfig, MultiHopModel  # noqa: E402
from drkit.reason.train import answer_set_loss  # noqa: E402
from drkit.reason.vkb import VirtualKB  # noqa: E402
from drkit.util import hardware  # noqa: E402
from drkit.util.runs import adamw, optimizer_step  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PRECISIONS = ("fp32", "bf16")


def quiet(*_):
    pass


def timed_steps(step, n: int) -> float:
    """Median seconds of `n` calls of `step(i)` after one warm-up call."""
    times = []
    for i in range(n + 1):
        t = time.perf_counter()
        step(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times[1:])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=ROOT / "data" / "sample")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench-precision")
    p.add_argument("--steps", type=int, default=4, help="timed steps of pretraining and of training, per precision")
    p.add_argument("--embed-passages", type=int, default=200)
    p.add_argument("--questions", type=int, default=128, help="questions timed at batch 1 and at batch 64")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "precision")
    args = p.parse_args()

    threads = hardware.configure_threads()
    auto = hardware.choose("auto", "cpu")
    native, why = hardware.cpu_native_bf16()
    result = {"machine": {"processor": platform.processor() or platform.machine(),
                          "cpu_capability": hardware.cpu_capability(), "native_bf16_report": why,
                          "bf16_probe_speedup": round(hardware.probe_bf16_speedup(), 3), "torch_threads": threads,
                          "torch": torch.__version__},
               "auto": {"precision": auto.precision, "device": auto.device.type, "reason": auto.reason},
               "data": str(args.data), "rows": {}}

    index_dir = args.work / "index"
    if not (index_dir / "manifest.json").exists():
        build_index(args.data / "wiki.txt", index_dir, kb=args.data / "kb.txt", overwrite=True, log=quiet)
    index = SparseIndex.load(index_dir)
    enc_run = args.work / "encoder"
    if not (enc_run / "encoder" / "manifest.json").exists():
        pretrain(index_dir, None, enc_run, PretrainConfig(steps=0), EncoderConfig(), overwrite=True, log=quiet)
    base = DualEncoder.load(enc_run / "encoder")
    ds = DistantSupervision(index, read_kb(args.data / "kb.txt"), DistantConfig())
    mentions_dir = args.work / "mentions-fp32"
    if not (mentions_dir / "manifest.json").exists():
        build_mention_index(index_dir, enc_run, mentions_dir, EmbedConfig(precision="fp32"), overwrite=True, log=quiet)
    mentions = MentionIndex.load(mentions_dir)
    questions = [q for q in (args.data / "2-hop" / "qa_train.txt").read_text(encoding="utf-8").splitlines() if q.strip()]

    vectors, answers = {}, {}
    for precision in PRECISIONS:
        row = result["rows"][precision] = {}
        print(f"--- {precision}", flush=True)
        # pretraining step
        torch.manual_seed(0)
        model = copy.deepcopy(base).train()
        config = PretrainConfig(precision=precision, steps=args.steps + 1)
        opt, _ = optimizer_for(model, config)

        def pretrain_step(i: int, model=model, opt=opt, config=config) -> None:
            optimizer_step(opt, batch_loss(model, ds, sample_batch(ds, config, i), config)["loss"])

        row["pretrain_step_s"] = round(timed_steps(pretrain_step, args.steps), 3)
        print(f"pretraining step: {row['pretrain_step_s']:.2f} s", flush=True)
        del opt
        # embedding
        part = _Slice(index, args.embed_passages)
        v, timing = embed_mentions(part, base, EmbedConfig(precision=precision))
        vectors[precision] = v.astype(np.float32)
        row["embed_mentions_per_s"] = timing["mentions_per_s"]
        row["embed_mentions"] = int(len(v))
        print(f"embedding: {timing['mentions_per_s']:.0f} mentions/s", flush=True)
        # a training step of a 2-hop model
        vkb = VirtualKB(index, mentions, precision=precision)
        torch.manual_seed(0)
        net = MultiHopModel.from_encoder(base, ModelConfig(hops=2), FollowConfig())
        net.set_entities(vkb.entity_names)
        items = [it for it in load_questions(args.data / "2-hop" / "qa_train.txt", vkb.index.entities)
                 if it.problem is None and len(it.answer_ids)]
        opt, _ = adamw([{"params": [q for q in net.parameters() if q.requires_grad], "lr": 1e-5}], 0.01, 100, 0.1)
        net.train()

        def train_step(i: int) -> None:
            batch = [items[(32 * i + j) % len(items)] for j in range(32)]
            outs = net([it.text for it in batch], np.array([it.topic for it in batch]), vkb, precision=precision)
            loss, _ = answer_set_loss(outs[-1].z, [it.answer_ids for it in batch], vkb.graph.n_entities)
            optimizer_step(opt, loss)

        row["train_step_s"] = round(timed_steps(train_step, args.steps), 3)
        print(f"training step (batch 32): {row['train_step_s']:.2f} s", flush=True)
        # question throughput through the front door
        torch.manual_seed(0)
        net = MultiHopModel.from_encoder(base, ModelConfig(hops=2), FollowConfig())
        kit = DrKIT(net, vkb)
        qs = questions[: args.questions]
        for batch in (1, 64):
            kit.answer_batch(qs[:batch], top=1, chain_top=0)  # warm-up
            t = time.perf_counter()
            got = []
            for s in range(0, len(qs), batch):
                got += kit.answer_batch(qs[s:s + batch], top=1, chain_top=0)
            row[f"questions_per_s_b{batch}"] = round(len(qs) / (time.perf_counter() - t), 1)
            answers[precision] = [r.answers[0].entity_id if r.answers else -1 for r in got]
        print(f"questions/s: batch 1 {row['questions_per_s_b1']}, batch 64 {row['questions_per_s_b64']}", flush=True)

    a, b = vectors["bf16"], vectors["fp32"]
    cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
    result["bf16_vs_fp32"] = {"vector_cosine_mean": round(float(cos.mean()), 5), "vector_cosine_min": round(float(cos.min()), 5),
                              "top1_answers_agree": round(float(np.mean(np.equal(answers["bf16"], answers["fp32"]))), 4)}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "precision.json").write_text(json.dumps(result, indent=1) + "\n")
    r = result["rows"]
    lines = [f"# fp32 and bf16 side by side ({result['machine']['processor']}, {result['machine']['cpu_capability']}, "
             f"{threads} torch threads, torch {torch.__version__})", "",
             f"`auto` chooses **{auto.precision}** on {auto.device.type}: {auto.reason}. A probe timed bf16 autocast at "
             f"{result['machine']['bf16_probe_speedup']}x fp32's speed on a linear layer.", "",
             "| | fp32 | bf16 | bf16 time / fp32 time |", "|---|---|---|---|"]
    for key, label, higher in (("pretrain_step_s", "pretraining step (s)", False),
                               ("embed_mentions_per_s", "embedding (mentions/s)", True),
                               ("train_step_s", "training step, 2-hop, batch 32 (s)", False),
                               ("questions_per_s_b1", "questions/s, batch 1", True),
                               ("questions_per_s_b64", "questions/s, batch 64", True)):
        ratio = (r["bf16"][key] / r["fp32"][key]) if higher else (r["fp32"][key] / r["bf16"][key])
        lines.append(f"| {label} | {r['fp32'][key]} | {r['bf16'][key]} | {1 / ratio:.2f} |")
    c = result["bf16_vs_fp32"]
    lines += ["", f"bf16 against fp32 vectors: cosine mean {c['vector_cosine_mean']}, min {c['vector_cosine_min']}; "
              f"top-1 answers of the untrained model agree on {c['top1_answers_agree']:.1%} of {len(answers['fp32'])} "
              "questions.", ""]
    (args.out / "precision.md").write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
