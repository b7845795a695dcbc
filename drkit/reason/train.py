"""End-to-end training of DrKIT from final answers only (the ``drkit train`` command).

Loss: the cross-entropy between Z_T and the answer set, as the negative log of the probability Z_T
gives to the answer set, ``-log sum_{a in A} Z_T[a]`` (the marginal likelihood of weak supervision:
any answer may be the one the chain reaches). A question none of whose answers is in Z_T's support
gives no gradient and is counted in the log as unreachable.

The run directory holds ``run.json`` (settings; rerunning with the same settings resumes from the
last checkpoint), ``train_log.jsonl`` (one record per step), ``dev_log.jsonl`` (Hits@1 on a fixed,
seeded dev sample every `eval_every` steps), ``checkpoints/`` (safetensors and JSON, see
`drkit.util.runs`), ``model/`` (the model of the best dev Hits@1 so far: model selection on dev;
published with the checkpoint that follows it, so it always goes with the last checkpoint) and
``curve.png`` (the training curve).

Z_0 (``question_entity``): the bracketed entity of each question (default), or, the paper's way, the
least frequent entity linked by exact match, the brackets ignored (`drkit.data.questions`); the
model's manifest records it and `drkit.qa.evaluate` answers with what the model was trained with.
``done.json`` and the log count the lines whose linked entity is another than the bracketed one.

A run directory written before a setting existed (``run.json`` without it, or a bool where there are
now modes) is read as the settings it meant: missing fields take their defaults, old values are
converted by the settings classes, so it resumes and is found done as before.
"""

from __future__ import annotations

import dataclasses
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from drkit.data.questions import QUESTION_ENTITY, load_questions, question_entity_counts
from drkit.dense.dropout import cheap_dropout
from drkit.dense.encoder import DualEncoder
from drkit.dense.mentions import MentionIndex, resolve_encoder_dir
from drkit.errors import ConfigError
from drkit.index.sparse import SparseIndex
from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import FollowConfig
from drkit.reason.model import ModelConfig, MultiHopModel, model_dir_of
from drkit.reason.predict import answer_batches, hits
from drkit.reason.segment import segment_logsumexp
from drkit.reason.vkb import VirtualKB
from drkit.util.artifact import path_record
from drkit.util.hardware import device_field, precision_field
from drkit.util.progress import progress
from drkit.util.runs import (
    adamw,
    append_log,
    best_staging,
    checkpoints,
    optimizer_step,
    prepare_run,
    read_log,
    resume,
    save_checkpoint,
    upgrade_run_settings,
)
from drkit.util.sampling import sample_rows, step_rows


@dataclass(frozen=True)
class TrainConfig:
    """Settings of end-to-end training."""

    steps: int = field(default=1500, metadata={"help": "optimizer steps"})
    batch_size: int = field(default=32, metadata={"help": "questions per step"})
    lr: float = field(default=5e-5, metadata={"help": "peak learning rate of the transformer layers"})
    head_lr: float = field(default=5e-4, metadata={"help": "peak learning rate of the start/end/entity projections"})
    power_lr: float = field(default=0.02, metadata={"help": "peak learning rate of the per-hop TF-IDF powers"})
    warmup: float = field(default=0.06, metadata={"help": "fraction of steps of linear warm-up"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    eval_every: int = field(default=250, metadata={"help": "steps between dev evaluations (model selection)"})
    dev_sample: int = field(default=1000, metadata={"help": "dev questions used for model selection (0: all)"})
    checkpoint_every: int = field(default=250, metadata={"help": "steps between checkpoints"})
    precision: str = precision_field("the question encoder")
    device: str = device_field("training (the question encoder and the mention scores)")
    seed: int = field(default=0, metadata={"help": "seed of the question order, dev sample and dropout"})
    question_entity: str = field(default="bracketed", metadata={
        "help": "Z_0 of a training or dev question: its [bracketed] entity, or linked: the least frequent entity "
                "named in it by exact match, the brackets ignored (the paper, Appendix A)",
        "choices": QUESTION_ENTITY})

    def __post_init__(self):
        if self.steps < 0 or self.batch_size < 1 or self.eval_every < 1 or self.checkpoint_every < 1:
            raise ConfigError("steps must be >= 0; batch_size, eval_every and checkpoint_every >= 1")
        if self.question_entity not in QUESTION_ENTITY:
            raise ConfigError(f"question_entity must be one of {QUESTION_ENTITY}, got {self.question_entity!r}")


def question_entity_of(manifest: dict) -> str:
    """How the model of `manifest` found Z_0 in training: "bracketed" or "linked" ("bracketed" before the option)."""
    return manifest.get("training", {}).get("settings", {}).get("train", {}).get("question_entity", "bracketed")


_SETTINGS_CLASSES = {"train": TrainConfig, "model": ModelConfig, "follow": FollowConfig}


def answer_set_loss(z: EntitySet, answers: list[np.ndarray], n_entities: int) -> tuple[torch.Tensor | None, np.ndarray]:
    """Mean over the reachable rows of ``-log sum_{a in answers[b]} Z[b, a]``; and which rows were reachable."""
    keys = z.rows.numpy() * n_entities + z.ids.numpy()
    answer_keys = np.concatenate([b * n_entities + a for b, a in enumerate(answers)]) if answers else np.zeros(0, np.int64)
    member = np.isin(keys, answer_keys)
    reachable = np.zeros(z.batch_size, dtype=bool)
    reachable[z.rows.numpy()[member]] = True
    if not member.any():
        return None, reachable
    sel = torch.from_numpy(np.flatnonzero(member))
    per_row = segment_logsumexp(z.logits[sel], z.rows[sel], z.batch_size)
    return -per_row[torch.from_numpy(np.flatnonzero(reachable))].mean(), reachable


def _optimizer(model: MultiHopModel, config: TrainConfig):
    heads = [p for n, p in model.named_parameters()
             if n.startswith(("encoder.start.", "encoder.end.", "encoder.entity.")) and p.requires_grad]
    powers = [model.tfidf_power] if model.tfidf_power.requires_grad else []
    special = {id(p) for p in heads + powers}
    body = [p for p in model.parameters() if p.requires_grad and id(p) not in special]
    return adamw([{"params": body, "lr": config.lr}, {"params": heads, "lr": config.head_lr},
                  {"params": powers, "lr": config.power_lr, "weight_decay": 0.0}],
                 config.weight_decay, config.steps, config.warmup)


def train(index_dir: str | Path, mentions_dir: str | Path, train_file: str | Path, dev_file: str | Path,
          out: str | Path, encoder_dir: str | Path | None = None, model_config: ModelConfig = ModelConfig(),
          follow_config: FollowConfig = FollowConfig(), config: TrainConfig = TrainConfig(), overwrite: bool = False,
          init: str | Path | None = None, log=print) -> Path:
    """Train (or resume training) a DrKIT model; the best model on the dev sample is written to ``out/model``.

    `init`: a trained model (or training run) to start from instead of the pretrained encoder alone, with
    the same mention index (see `MultiHopModel.init_from_model`)."""
    run = Path(out)
    mentions = MentionIndex.load(mentions_dir)  # its manifest names the encoder; the vectors stay unread
    encoder_dir = resolve_encoder_dir(encoder_dir) if encoder_dir else mentions.encoder_dir()
    settings = {"train": dataclasses.asdict(config), "model": dataclasses.asdict(model_config),
                "follow": dataclasses.asdict(follow_config), "index": str(index_dir), "mentions": str(mentions_dir),
                "encoder": str(encoder_dir), "train_file": str(train_file), "dev_file": str(dev_file)}
    if init is not None:
        init = model_dir_of(init)
        if not (init / "model.safetensors").exists():
            raise ConfigError(f"--init {init}: not a DrKIT model or training run")
        settings["init"] = str(init)
    if not overwrite:
        upgrade_run_settings(run, _SETTINGS_CLASSES)
    prepare_run(run, settings, overwrite, "training",
                paths=("index", "mentions", "encoder", "train_file", "dev_file", "init"))
    if (run / "done.json").exists():
        trained_over = json.loads((run / "model" / "manifest.json").read_text()).get("mentions", {})
        for key, now in (("encoder_sha256", mentions.manifest["encoder"]["sha256"]),
                         ("index_mentions_sha256", mentions.manifest["index"]["mentions_sha256"])):
            if trained_over.get(key) != now:
                raise ConfigError(f"{run} was trained over another mention index than {mentions_dir} is now "
                                  f"(mentions.{key} differs); pass --overwrite to train again")
        log(f"{run} is already trained ({run / 'model'}); pass --overwrite to train again")
        return run / "model"
    torch.manual_seed(config.seed)
    vkb = VirtualKB(SparseIndex.load(index_dir), mentions, precision=config.precision, device=config.device)

    entities = vkb.index.entities
    mode = config.question_entity
    # a plain question (and with "linked" every question): its entity linked as ask does
    train_items = load_questions(train_file, entities, vkb.parse, mode)
    usable = [it for it in train_items if it.problem is None and len(it.answer_ids)]
    dropped = len(train_items) - len(usable)
    log(f"training questions: {len(usable):,} of {len(train_items):,} lines usable"
        + (f" ({dropped:,} without a known question entity or any answer that is an entity)" if dropped else ""))
    if not usable:
        raise ConfigError(f"no usable training question in {train_file}")
    all_dev = load_questions(dev_file, entities, vkb.parse, mode)
    dev_items = [it for it in all_dev if it.problem is None]
    dev_items = [dev_items[i] for i in sample_rows(len(dev_items), config.dev_sample or None, config.seed)]
    linking = {"train": question_entity_counts(train_items, mode), "dev": question_entity_counts(all_dev, mode)}
    if mode == "linked":
        for split, c in linking.items():
            log(f"{split} question entities linked (the brackets ignored): {c['linked_differs']:,} of "
                f"{c['bracketed_lines']:,} bracketed lines link another entity, {c['not_linked']:,} link none")

    encoder = DualEncoder.load(encoder_dir)
    model = MultiHopModel.from_encoder(encoder, model_config, follow_config)
    del encoder
    if init is not None:
        source = MultiHopModel.load(init)
        theirs = source.manifest.get("mentions", {}).get("encoder_sha256")
        if theirs != vkb.mentions.manifest["encoder"]["sha256"]:
            raise ConfigError(f"--init {init} was trained over a mention index of another encoder than {mentions_dir}")
        log(f"starting from {init}: " + ", ".join(model.init_from_model(source)))
        del source
    model.set_entities(vkb.entity_names)
    model.to(vkb.compute.device)
    opt, sched = _optimizer(model, config)
    start, best = 0, {"hits@1": -1.0, "step": 0}
    state = resume(run, model, opt, sched, log, logs=("train_log.jsonl", "dev_log.jsonl"))
    if state is not None:
        start, best = state["step"], state["best"]
        log(f"resuming from {checkpoints(run)[-1]} (step {start} of {config.steps}; best dev Hits@1 so far "
            f"{_score(best)})")

    identity = {"mentions": {**path_record(mentions_dir, run / "model", "from_model"),  # the model is saved in run/model
                             "encoder_sha256": vkb.mentions.manifest["encoder"]["sha256"],
                             "index_mentions_sha256": vkb.mentions.manifest["index"]["mentions_sha256"]},
                "index": str(Path(index_dir).resolve()), "encoder": str(Path(encoder_dir).resolve())}

    def dev_hits() -> float:
        model.eval()
        ids, _, _ = answer_batches(model, vkb, [it.text for it in dev_items],
                                   np.array([it.topic for it in dev_items]), 64, top=1)
        model.train()
        return float(hits(ids, dev_items, 1).mean())

    def stage_best(hits1: float | None, step: int) -> dict:
        """Save the model as the run's new best; the next checkpoint takes it in and publishes it."""
        best = {"hits@1": hits1, "step": step}
        model.save(best_staging(run), overwrite=True,
                   extra_manifest={**identity, "training": {"best": best, "settings": settings,
                                                            "question_entity": linking}})
        return best

    def checkpoint(step: int) -> None:
        save_checkpoint(run, step, model, opt, sched, {"best": best})

    if state is None and dev_items:
        h = dev_hits()
        append_log(run / "dev_log.jsonl", {"step": 0, "hits@1": round(h, 5)})
        log(f"dev Hits@1 before training: {h:.4f} ({len(dev_items)} questions)")
        best = stage_best(h, 0)

    model.train()
    t_train = time.perf_counter()
    with open(run / "train_log.jsonl", "a", encoding="utf-8") as logf, cheap_dropout(model, vkb.compute.device), \
            progress(total=config.steps, initial=start, desc=f"train {model_config.hops}-hop", unit="step") as bar:
        for step in range(start, config.steps):
            t = time.perf_counter()
            batch = [usable[i] for i in step_rows(len(usable), config.batch_size, step, config.seed)]
            outs = model([it.text for it in batch], np.array([it.topic for it in batch]), vkb, precision=config.precision)
            loss, reachable = answer_set_loss(outs[-1].z, [it.answer_ids for it in batch], vkb.graph.n_entities)
            record = {"step": step + 1, "reachable": int(reachable.sum()), "questions": len(batch),
                      "support": [round(len(o.z) / len(batch), 1) for o in outs]}
            if loss is not None:
                grad_norm = optimizer_step(opt, loss)
                record.update(loss=round(loss.item(), 5), grad_norm=round(grad_norm, 4))
                if not math.isfinite(record["loss"]):
                    raise FloatingPointError(f"training loss is {record['loss']} at step {step + 1}")
            sched.step()
            record.update(lr=sched.get_last_lr()[0], step_s=round(time.perf_counter() - t, 3))
            logf.write(json.dumps(record) + "\n")
            logf.flush()
            bar.set_postfix(loss=record.get("loss", "-"), best=_score(best))
            bar.update(1)
            done = step + 1 == config.steps
            if dev_items and ((step + 1) % config.eval_every == 0 or done):
                h = dev_hits()
                append_log(run / "dev_log.jsonl", {"step": step + 1, "hits@1": round(h, 5)})
                if h > best["hits@1"]:
                    best = stage_best(h, step + 1)
                log(f"step {step + 1}: dev Hits@1 {h:.4f} (best {_score(best)} at step {best['step']})")
            if done and not dev_items:  # no model selection: the last model
                best = stage_best(None, step + 1)
            if (step + 1) % config.checkpoint_every == 0 or done:
                checkpoint(step + 1)
    if config.steps == 0 and state is None:
        if not dev_items:
            best = stage_best(None, 0)
        checkpoint(0)
    train_s = time.perf_counter() - t_train
    plot_training_curve(run)
    (run / "done.json").write_text(json.dumps({"best": best, "this_session_train_s": round(train_s, 1),
                                               "question_entity": linking}, indent=2) + "\n")
    log(f"wrote {run / 'model'} (best dev-sample Hits@1 {_score(best)} at step {best['step']}; "
        f"this session {train_s:.0f} s training)")
    return run / "model"


def _score(best: dict) -> str:
    return "-" if best["hits@1"] is None else f"{best['hits@1']:.4f}"




def plot_training_curve(run: str | Path) -> Path | None:
    """``curve.png``: training loss (mean over 25-step windows) and dev-sample Hits@1 against the step."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = Path(run)
    steps = [r for r in read_log(run / "train_log.jsonl") if "loss" in r]
    dev = read_log(run / "dev_log.jsonl")
    if not steps and not dev:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    if steps:
        s = np.array([r["step"] for r in steps])
        v = np.array([r["loss"] for r in steps])
        w = 25
        edges = np.arange(0, len(s), w)
        ax.plot([s[i : i + w].mean() for i in edges], [v[i : i + w].mean() for i in edges], color="tab:blue")
    ax.set_xlabel("step")
    ax.set_ylabel("training loss", color="tab:blue")
    if dev:
        ax2 = ax.twinx()
        ax2.plot([r["step"] for r in dev], [r["hits@1"] for r in dev], "o-", color="tab:red")
        ax2.set_ylabel("dev-sample Hits@1", color="tab:red")
        ax2.set_ylim(0, 1)
    ax.set_title(run.name)
    fig.tight_layout()
    fig.savefig(run / "curve.png", dpi=100)
    plt.close(fig)
    return run / "curve.png"
