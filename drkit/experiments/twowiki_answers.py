"""The bracketed 2-hop entity-answer comparison of ``drkit reproduce-2wiki --answers`` (opt-in): the hop-mixing
model's entity answers against a fixed 2-hop model given the bracketed question entity."""

from __future__ import annotations

import json
from pathlib import Path

from drkit.experiments.steps import made_again, write_json
from drkit.util.artifact import file_checksum


def answers_step(out: Path, mentions: Path, split: Path, steps: int, timings, log) -> dict:
    """Entity answers of the compositional and inference dev questions: the hop-mixing model's last hop
    (plain question) against a fixed 2-hop DrKIT model trained `steps` steps and asked with the bracketed entity."""
    from drkit.experiments.twowiki_data import bracketed_questions
    from drkit.qa.evaluate import evaluate
    from drkit.qa.pipeline import DrKIT
    from drkit.reason.model import ModelConfig
    from drkit.reason.train import TrainConfig, train

    counts = {part: bracketed_questions(split / f"{part}.jsonl", out / f"bracketed-{part}.txt") for part in ("train", "dev")}
    run = out / "train-bracketed-2hop"
    cfg = TrainConfig(steps=steps, batch_size=16, eval_every=steps, dev_sample=0,
                      checkpoint_every=steps)
    call = lambda: train(out / "index", mentions, out / "bracketed-train.txt", out / "bracketed-dev.txt", run,  # noqa: E731
                         model_config=ModelConfig(hops=2), config=cfg, log=log)
    call() if (run / "done.json").exists() else timings.run("train-bracketed-2hop", call, log, resumes=run)
    ev = out / "eval-bracketed-2hop"
    made_with = {"weights_sha256": file_checksum(run / "model" / "model.safetensors")["sha256"],
                 "questions_sha256": file_checksum(out / "bracketed-dev.txt")["sha256"]}
    if made_again(ev / "metrics.json", made_with, log):
        def run_eval():
            metrics = evaluate(DrKIT.load(out / "index", run / "model"), out / "bracketed-dev.txt", ev, log=log)
            write_json(ev / "metrics.json", {**metrics, "made_with": made_with})
        timings.run("evaluate-bracketed-2hop", run_eval, log)
    fixed = json.loads((ev / "metrics.json").read_text())
    drkit = json.loads((out / "retrieve-drkit" / "metrics.json").read_text()).get("answers", {})
    types = ("compositional", "inference")
    n = sum(drkit.get(t, {}).get("questions", 0) for t in types)
    hits = sum(drkit[t]["hits@1"] * drkit[t]["questions"] for t in types if t in drkit)
    return {"questions": n, "drkit_mixing_hits@1": round(hits / n, 4) if n else None, "drkit_by_type": drkit,
            "fixed_2hop_bracketed_hits@1": round(fixed["hits@1"], 4), "fixed_2hop_bracketed_lines": fixed.get("lines"),
            "bracketed_counts": {p: {k: v for k, v in c.items() if k != "ids"} for p, c in counts.items()}}
