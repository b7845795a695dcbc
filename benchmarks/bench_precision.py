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
dtype mention vectors are scored in (bf16 or fp32). `--device cuda` runs every row on the GPU (the follow's
integer bookkeeping stays on the CPU; the question rows then also say how much of the time the follows
took, and how much of that the scores on the GPU); `--random-init` starts from a randomly initialised
transformer of the base's shape (same config and tokenizer, seed 0: the same computation, for a machine the
weights cannot be copied to). Writes OUT/precision[-DEVICE].json and .md.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import io
import json
import platform
import pstats
import shutil
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
from drkit.reason import graph as graph_module  # noqa: E402
from drkit.reason import model as model_module  # noqa: E402
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


def random_base(source: Path, out: Path) -> Path:
    """A transformer folder with the config and tokenizer of `source` and random weights (seed 0)."""
    from transformers import AutoConfig, AutoModel

    if not (out / "model.safetensors").exists():
        out.mkdir(parents=True, exist_ok=True)
        for f in source.iterdir():
            if f.is_file() and (f.suffix in (".json", ".txt")):
                shutil.copy(f, out / f.name)
        torch.manual_seed(0)
        AutoModel.from_config(AutoConfig.from_pretrained(str(source), local_files_only=True)).save_pretrained(str(out))
    return out


class Timer:
    """Seconds spent in a function of a module, summed (the GPU synchronised at each end)."""

    def __init__(self, module, name: str, device: torch.device):
        self.module, self.name, self.inner, self.device, self.s = module, name, getattr(module, name), device, 0.0

    def __enter__(self):
        def timed(*a, **kw):
            self.sync()
            t = time.perf_counter()
            try:
                return self.inner(*a, **kw)
            finally:
                self.sync()
                self.s += time.perf_counter() - t
        setattr(self.module, self.name, timed)
        return self

    def sync(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize()

    def __exit__(self, *exc):
        setattr(self.module, self.name, self.inner)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=ROOT / "data" / "sample")
    p.add_argument("--work", type=Path, default=ROOT / "runs" / "bench-precision")
    p.add_argument("--steps", type=int, default=4, help="timed steps of pretraining and of training, per precision")
    p.add_argument("--embed-passages", type=int, default=200)
    p.add_argument("--questions", type=int, default=128, help="questions timed at batch 1 and at batch 64 (on a GPU "
                   "128 is two batches of 64, a noisy figure: give more, e.g. 448, where time allows)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "precision")
    p.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where every row computes")
    p.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    p.add_argument("--base", type=Path, default=None, help="the transformer folder (default: the packaged all-MiniLM-L6-v2)")
    p.add_argument("--random-init", action="store_true", help="random weights of the base's shape instead of its own")
    p.add_argument("--tf32", action="store_true", help="CUDA: fp32 matrix products on TF32 tensor cores")
    p.add_argument("--cudnn-attention", choices=("on", "off"), default="on",
                   help="CUDA: off turns cuDNN's attention off from the start (it builds a plan for each new shape); "
                        "drkit itself turns it off when it computes in bf16 or fp16 on a GPU, and each row records "
                        "what it ran with")
    p.add_argument("--tag", default="", help="added to the result files' names")
    p.add_argument("--profile", action="store_true", help="also profile a batch-64 pass of its own after the timed one "
                   "(cProfile, the GPU synchronised at its end) and write the 40 functions of most cumulative time to "
                   "OUT/STEM-profile-PRECISION.txt (before 2026-11-28's review, the timed pass itself was profiled)")
    args = p.parse_args()
    if args.tf32:
        torch.backends.cuda.matmul.allow_tf32 = True
    if args.cudnn_attention == "off":
        torch.backends.cuda.enable_cudnn_sdp(False)

    threads = hardware.configure_threads()
    auto = hardware.choose("auto", args.device)
    device = auto.device
    native, why = hardware.cpu_native_bf16()
    result = {"machine": {"processor": platform.processor() or platform.machine(),
                          "cpu_capability": hardware.cpu_capability(), "native_bf16_report": why,
                          "bf16_probe_speedup": round(hardware.probe_bf16_speedup(), 3), "torch_threads": threads,
                          "torch": torch.__version__},
               "auto": {"precision": auto.precision, "device": auto.device.type, "reason": auto.reason},
               "device": args.device, "random_init": args.random_init, "tf32": args.tf32,
               "cudnn_attention": args.cudnn_attention, "data": str(args.data), "rows": {}}
    if device.type == "cuda":
        result["machine"]["gpu"] = torch.cuda.get_device_name(device)
    base_dir = args.base
    if args.random_init:
        from drkit.data.tokenizer import encoder_path

        base_dir = random_base(args.base or encoder_path(), args.work / "random-base")
    enc_config = EncoderConfig() if base_dir is None else EncoderConfig(base=str(base_dir))

    index_dir = args.work / "index"
    if not (index_dir / "manifest.json").exists():
        build_index(args.data / "wiki.txt", index_dir, kb=args.data / "kb.txt", overwrite=True, log=quiet)
    index = SparseIndex.load(index_dir)
    enc_run = args.work / "encoder"
    if not (enc_run / "encoder" / "manifest.json").exists():
        pretrain(index_dir, None, enc_run, PretrainConfig(steps=0, device="cpu"), enc_config, overwrite=True, log=quiet)
    base = DualEncoder.load(enc_run / "encoder")
    ds = DistantSupervision(index, read_kb(args.data / "kb.txt"), DistantConfig())
    mentions_dir = args.work / "mentions-fp32"
    if not (mentions_dir / "manifest.json").exists():
        build_mention_index(index_dir, enc_run, mentions_dir, EmbedConfig(precision="fp32", device=args.device),
                            overwrite=True, log=quiet)
    mentions = MentionIndex.load(mentions_dir)
    questions = [q for q in (args.data / "2-hop" / "qa_train.txt").read_text(encoding="utf-8").splitlines() if q.strip()]

    vectors, answers, profiles = {}, {}, {}
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for precision in args.precisions:
        row = result["rows"][precision] = {}
        print(f"--- {precision} on {device.type}", flush=True)
        # pretraining step
        torch.manual_seed(0)
        model = copy.deepcopy(base).to(device).train()
        config = PretrainConfig(precision=precision, steps=args.steps + 1, device=args.device)
        opt, _ = optimizer_for(model, config)

        def pretrain_step(i: int, model=model, opt=opt, config=config) -> None:
            optimizer_step(opt, batch_loss(model, ds, sample_batch(ds, config, i), config)["loss"])
            sync()

        row["pretrain_step_s"] = round(timed_steps(pretrain_step, args.steps), 3)
        print(f"pretraining step: {row['pretrain_step_s']:.2f} s", flush=True)
        del opt, model
        # embedding
        part = _Slice(index, args.embed_passages)
        v, timing = embed_mentions(part, base.to(device), EmbedConfig(precision=precision, device=args.device))
        base.cpu()
        vectors[precision] = v.astype(np.float32)
        row["embed_mentions_per_s"] = timing["mentions_per_s"]
        row["embed_mentions"] = int(len(v))
        print(f"embedding: {timing['mentions_per_s']:.0f} mentions/s", flush=True)
        # a training step of a 2-hop model
        vkb = VirtualKB(index, mentions, precision=precision, device=args.device)
        torch.manual_seed(0)
        net = MultiHopModel.from_encoder(base, ModelConfig(hops=2), FollowConfig())
        net.set_entities(vkb.entity_names)
        net.to(device)
        items = [it for it in load_questions(args.data / "2-hop" / "qa_train.txt", vkb.index.entities)
                 if it.problem is None and len(it.answer_ids)]
        opt, _ = adamw([{"params": [q for q in net.parameters() if q.requires_grad], "lr": 1e-5}], 0.01, 100, 0.1)
        net.train()

        def train_step(i: int) -> None:
            batch = [items[(32 * i + j) % len(items)] for j in range(32)]
            outs = net([it.text for it in batch], np.array([it.topic for it in batch]), vkb, precision=precision)
            loss, _ = answer_set_loss(outs[-1].z, [it.answer_ids for it in batch], vkb.graph.n_entities)
            optimizer_step(opt, loss)
            sync()

        row["train_step_s"] = round(timed_steps(train_step, args.steps), 3)
        print(f"training step (batch 32): {row['train_step_s']:.2f} s", flush=True)
        # question throughput through the front door
        torch.manual_seed(0)
        net = MultiHopModel.from_encoder(base, ModelConfig(hops=2), FollowConfig())
        kit = DrKIT(net, vkb)
        qs = questions[: args.questions]
        for batch in (1, 64):
            kit.answer_batch(qs[:batch], top=1, chain_top=0)  # warm-up
            with Timer(model_module, "follow", device) as follows, \
                    Timer(graph_module.FollowGraph, "pair_scores", device) as scores:
                t = time.perf_counter()
                got = []
                for s in range(0, len(qs), batch):
                    got += kit.answer_batch(qs[s:s + batch], top=1, chain_top=0)
                sync()
                total = time.perf_counter() - t
            if args.profile and batch == 64:  # a pass of its own, after the timed one: cProfile slows what it watches
                profiler = cProfile.Profile()
                profiler.enable()
                for s in range(0, len(qs), batch):
                    kit.answer_batch(qs[s:s + batch], top=1, chain_top=0)
                sync()
                profiler.disable()
                text = io.StringIO()
                pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(40)
                profiles[precision] = text.getvalue()
            row[f"questions_per_s_b{batch}"] = round(len(qs) / total, 1)
            row[f"follow_share_b{batch}"] = round(follows.s / total, 3)
            row[f"pair_scores_share_b{batch}"] = round(scores.s / total, 3)
            answers[precision] = [r.answers[0].entity_id if r.answers else -1 for r in got]
        print(f"questions/s: batch 1 {row['questions_per_s_b1']}, batch 64 {row['questions_per_s_b64']}", flush=True)
        if device.type == "cuda":  # as it was, not as asked: drkit turns cuDNN attention off for bf16 on a GPU
            row["cudnn_attention"] = torch.backends.cuda.cudnn_sdp_enabled()

    if {"bf16", "fp32"} <= set(vectors):
        a, b = vectors["bf16"], vectors["fp32"]
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)
        result["bf16_vs_fp32"] = {"vector_cosine_mean": round(float(cos.mean()), 5),
                                  "vector_cosine_min": round(float(cos.min()), 5),
                                  "top1_answers_agree": round(float(np.mean(np.equal(answers["bf16"], answers["fp32"]))), 4)}
    stem = "precision" + ("" if args.device == "cpu" else f"-{args.device}") + ("-random-init" if args.random_init else "") + (f"-{args.tag.lstrip('-')}" if args.tag else "")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stem}.json").write_text(json.dumps(result, indent=1) + "\n")
    (args.out / f"{stem}.md").write_text(report(result, threads, args))
    for precision, text in profiles.items():
        (args.out / f"{stem}-profile-{precision}.txt").write_text(
            f"batch-64 pass of {len(qs)} questions, {precision} on {args.device}, cProfile (cumulative)\n{text}")
    print(report(result, threads, args))


def report(result: dict, threads: int, args) -> str:
    r, m, auto = result["rows"], result["machine"], result["auto"]
    where = m.get("gpu", f"{m['processor']}, {m['cpu_capability']}, {threads} torch threads")
    run = list(r)
    lines = [f"# {' and '.join(run)} on {args.device} ({where}, torch {m['torch']})", "",
             f"`auto` chooses **{auto['precision']}** on {auto['device']}: {auto['reason']}."
             + ("" if args.device != "cpu" else f" A probe timed bf16 autocast at {m['bf16_probe_speedup']}x fp32's "
                "speed on a linear layer."),
             "" if not args.random_init else "\nThe transformer is randomly initialised in the base's shape (same "
             "config and tokenizer): the same computation as the real weights, not their answers.", "",
             "| | " + " | ".join(run) + (" | bf16 time / fp32 time |" if len(run) == 2 else " |"),
             "|---" * (len(run) + 1 + (len(run) == 2)) + "|"]
    for key, label, higher in (("pretrain_step_s", "pretraining step (s)", False),
                               ("embed_mentions_per_s", "embedding (mentions/s)", True),
                               ("train_step_s", "training step, 2-hop, batch 32 (s)", False),
                               ("questions_per_s_b1", "questions/s, batch 1", True),
                               ("questions_per_s_b64", "questions/s, batch 64", True),
                               ("follow_share_b1", "share of batch-1 time in the follows", None),
                               ("follow_share_b64", "share of batch-64 time in the follows", None),
                               ("pair_scores_share_b64", "share of batch-64 time in the pair scores", None)):
        cells = [str(r[p][key]) for p in run]
        if len(run) == 2 and higher is not None:
            a, b = r["fp32"][key], r["bf16"][key]
            cells.append(f"{(a / b) if higher else (b / a):.2f}")
        elif len(run) == 2:
            cells.append("")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    c = result.get("bf16_vs_fp32")
    if c:
        lines += ["", f"bf16 against fp32 vectors: cosine mean {c['vector_cosine_mean']}, min {c['vector_cosine_min']}; "
                  f"top-1 answers of the untrained model agree on {c['top1_answers_agree']:.1%} of {args.questions} "
                  "questions."]
    return "\n".join(lines + [""])


if __name__ == "__main__":
    main()
