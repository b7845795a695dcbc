"""Train the reader (``drkit train-reader``): distant supervision from training questions and KB triples
(`drkit.reader.examples`), AdamW with a linear schedule, checkpoints every `checkpoint_every` steps;
rerunning the same command resumes. Writes OUT/run.json, OUT/train_log.jsonl, OUT/curve.png,
OUT/done.json and the reader in OUT/reader (format ``drkit.reader``).

No dev set is read: with a few hundred training questions, a fixed number of epochs is chosen beforehand,
so the questions a reader is scored on never steer its training.
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

from drkit.data.tokenizer import encoder_name
from drkit.dense.dropout import cheap_dropout
from drkit.errors import ConfigError
from drkit.reader.distill import soft_loss, student_of
from drkit.reader.examples import (
    Distractors,
    OrderConfig,
    balanced_facts,
    composed_sources,
    epoch_examples,
    kb_sources,
    own_page_sources,
    question_sources,
    read_passages,
    read_questions,
)
from drkit.reader.model import Reader, ReaderConfig, layer_stack
from drkit.util.artifact import file_checksum
from drkit.util.hardware import choose, device_field, precision_field, say
from drkit.util.progress import progress
from drkit.util.runs import adamw, append_log, optimizer_step, prepare_run, resume, save_checkpoint, upgrade_run_settings
from drkit.util.sampling import bucketed_step_rows, group_batches, grouped_step_rows, step_rows


@dataclass(frozen=True)
class ReaderTrainConfig:
    """Settings of reader training."""

    epochs: int = field(default=2, metadata={"help": "passes over the training examples (each draws its passages again)"})
    batch_size: int = field(default=8, metadata={"help": "examples per step"})
    lr: float = field(default=1e-4, metadata={"help": "peak learning rate of the transformer"})
    head_lr: float = field(default=1e-3, metadata={"help": "peak learning rate of the heads"})
    warmup: float = field(default=0.1, metadata={"help": "share of the steps with a rising learning rate"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    compose: bool = field(default=True, metadata={"help": "with --kb, also questions composed from pairs and chains of "
                                                          "triples: same object (yes/no), earlier/later date, two hops"})
    hops: bool = field(default=True, metadata={
        "help": "also train on the two one-hop questions each training question that the parser splits is read as "
                "(drkit.reader.decompose.hop_sources: the inner one answered by the bridge on the named entity's "
                "passage, the outer one by the answer on the bridge's), each on its gold passages alone; needs "
                "spaCy's English pipeline (without it: said, and none)"})
    more_kb_questions: int = field(default=1000, metadata={
        "help": "with --more-kb: at most this many single-hop questions of its facts that --kb does not hold, taken "
                "in turn from each relation (not composed)"})
    distractors: int = field(default=8, metadata={"help": "BM25 distractors kept per training question"})
    bucket: int = field(default=16, metadata={
        "help": "batches sorted by length together: each pass takes its drawn examples in pools of this many "
                "batches and sorts each pool by word pieces before cutting it into batches, so a batch pads little "
                "(same examples, same steps; 0: batches as drawn, padded to their longest, as runs made before this "
                "setting were trained: resume one with --bucket 0; with --own-page the two groups are batched apart "
                "instead)"})
    frozen_layers: int = field(default=0, metadata={
        "help": "keep the transformer's embeddings and its first N layers as the base's (not trained): a step costs "
                "less (a quarter less with 2 on AVX2 code) and answers were lost: on 2Wiki's two folds EM 0.667 -> 0.651 "
                "with 2, most inference questions lost (docs/reader.md, Frozen lower layers); 0: every weight trained"})
    teacher: str = field(default="", metadata={
        "help": "a trained reader (its directory or its train-reader run) this one learns from beside the labels "
                "(knowledge distillation, drkit.reader.distill): the reader starts as the teacher with --layers of its "
                "layers (the last of each of that many equal groups: 4 of 6 keeps the 2nd, 3rd, 5th and 6th) and its "
                "heads, and its loss adds the teacher's outputs as soft targets; empty: none (the reader starts from "
                "--base)"})
    distill_weight: float = field(default=0.5, metadata={"help": "with --teacher: the share of the loss that matches "
                                                                 "the teacher's outputs (the rest is the labels')"})
    temperature: float = field(default=2.0, metadata={"help": "with --teacher: the temperature of its soft targets"})
    seed: int = field(default=0, metadata={"help": "seed of the heads, the passage draws and the batches"})
    checkpoint_every: int = field(default=50, metadata={"help": "steps between checkpoints"})
    log_every: int = field(default=10, metadata={"help": "steps between lines of train_log.jsonl"})
    precision: str = precision_field("the reader's transformer")
    device: str = device_field("training")

    # a run made before a setting existed: batched as drawn, no hop questions
    ABSENT_MEANT = {"bucket": 0, "hops": False}  # (a run made before --more-kb has no "more_kb" input)

    def __post_init__(self):
        if self.bucket < 0 or self.more_kb_questions < 0 or self.frozen_layers < 0:
            raise ConfigError(f"bucket, more_kb_questions and frozen_layers must be at least 0, got {self.bucket}, "
                              f"{self.more_kb_questions}, {self.frozen_layers}")
        for name in ("epochs", "batch_size", "checkpoint_every", "log_every"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be at least 1, got {getattr(self, name)}")
        if not 0 <= self.distill_weight <= 1 or self.temperature <= 0:
            raise ConfigError(f"distill_weight must be in [0, 1] and temperature positive, got {self.distill_weight}, "
                              f"{self.temperature}")
        if self.lr <= 0 or self.head_lr <= 0 or not 0 <= self.warmup < 1:
            raise ConfigError("lr and head_lr must be positive and warmup in [0, 1)")


def training_sources(corpus: str | Path, questions: str | Path, kb: str | Path | None, order: OrderConfig,
                     config: ReaderTrainConfig, more_kb: str | Path | None = None) -> tuple[list, list, list, int, frozenset]:
    """What `train_reader` trains on: the training questions, the corpus's passages, every example's source
    (the questions', then with `kb` the triples' and, with ``config.compose``, the composed ones', the hop
    questions, and with `more_kb` up to ``config.more_kb_questions`` of its facts' single-hop questions), how many
    came from `kb` and `more_kb`, and the numbers of those read on their own page (`own_page_sources`)."""
    from drkit.data.kb import read_kb

    passages = read_passages(corpus)
    records = read_questions(questions, need_gold=True)
    distractors = Distractors(passages)
    sources = question_sources(records, passages, distractors, config.distractors, str(questions))
    hops = []
    if config.hops:
        from drkit.reader.decompose import Decomposer, hop_sources

        decomposer = Decomposer.shared()
        if decomposer is None:
            say("reader training: no hop questions: --hops needs spaCy's English pipeline (pip install 'drkit[ner]')")
        hops = hop_sources(sources, decomposer) if decomposer is not None else []
    kb_count = 0
    triples = list(read_kb(kb)) if kb else []
    if kb:
        extra = kb_sources(triples, passages, distractors, config.distractors)
        if config.compose:
            extra += composed_sources(extra, config.seed, config.distractors)
        kb_count = len(extra)
        sources += extra
    sources += hops  # after the others: their draws stay what they were without hops
    if more_kb and config.more_kb_questions:
        known = frozenset((t.subject, t.relation, t.object) for t in triples)
        picked = balanced_facts(read_kb(more_kb), config.more_kb_questions, config.seed, known)
        extra = kb_sources(picked, passages, distractors, config.distractors, prefix="more")
        kb_count += len(extra)
        sources += extra  # last: the draws of the others stay what they were without them
    return records, passages, sources, kb_count, own_page_sources(sources, order.own_page, config.seed)


def train_reader(corpus: str | Path, questions: str | Path, out: str | Path, kb: str | Path | None = None,
                 reader_config: ReaderConfig = ReaderConfig(), order: OrderConfig = OrderConfig(),
                 config: ReaderTrainConfig = ReaderTrainConfig(), overwrite: bool = False, log=print,
                 more_kb: str | Path | None = None) -> Path:
    """Train a reader on `questions` (with ``answers`` and ``supporting`` corpus ids of `corpus`) and, with
    `kb`, the triples' templated questions (with `more_kb`, those of some of its facts too: a KB that `drkit
    bootstrap-kb` wrote); return the reader's directory (OUT/reader)."""
    out = Path(out)
    try:  # one spelling for one base folder, so that a resume given another relative path to it is the same run
        reader_config = dataclasses.replace(reader_config, base=encoder_name(reader_config.base))
    except ConfigError as e:
        raise ConfigError(f"base (--base): {e}") from None
    teacher_dir = Reader.directory(config.teacher) if config.teacher else None  # loaded only to train
    inputs = {"corpus": file_checksum(corpus), "questions": file_checksum(questions),
              "kb": file_checksum(kb) if kb else None, **({"more_kb": file_checksum(more_kb)} if more_kb else {}),
              **({"teacher": file_checksum(teacher_dir / "model.safetensors")} if teacher_dir else {})}
    settings = {"reader": dataclasses.asdict(reader_config), "order": dataclasses.asdict(order),
                "train": dataclasses.asdict(config), "inputs": inputs}
    upgrade_run_settings(out, {"reader": ReaderConfig, "order": OrderConfig, "train": ReaderTrainConfig})
    prepare_run(out, settings, overwrite, "reader training",
                paths=("reader.base", "inputs.corpus.path", "inputs.questions.path", "inputs.kb.path",
                       "inputs.more_kb.path", "inputs.teacher.path"))
    if (out / "done.json").exists() and (out / "reader" / "manifest.json").exists():
        log(f"{out}: already trained")
        return out / "reader"
    compute = choose(config.precision, config.device, training=True)
    records, passages, sources, kb_count, alone = training_sources(corpus, questions, kb, order, config, more_kb)
    hops = sum(s.alone for s in sources)
    more = sum(s.id.startswith("more-") for s in sources)
    log(f"reader training: {len(records):,} questions, {hops:,} one-hop questions read from them in two steps and "
        f"{kb_count:,} KB questions ({more:,} of them of --more-kb's facts; {len(alone):,} read on their subject's passage "
        f"alone), {len(passages):,} passages")
    # the questions read on one passage are batched apart from the others: short batches
    groups = [np.array(sorted(alone)), np.array([i for i in range(len(sources)) if i not in alone])] if alone else None
    per_epoch = max(1, sum(group_batches(groups, config.batch_size)) if groups else len(sources) // config.batch_size)
    steps = per_epoch * config.epochs

    teacher = Reader.load(teacher_dir).to(compute.device) if teacher_dir else None
    if teacher is not None:
        for p in teacher.parameters():
            p.requires_grad_(False)
        reader = student_of(teacher, reader_config)
        log(f"reader training: taught by {teacher.path} ({teacher.transformer.config.num_hidden_layers} layers), "
            f"starting from {reader.transformer.config.num_hidden_layers} of its layers; soft targets weigh "
            f"{config.distill_weight} at temperature {config.temperature}")
    else:
        reader = Reader.from_base(reader_config, config.seed).to(compute.device)
    freeze(reader.transformer, config.frozen_layers)
    heads = [p for n, p in reader.named_parameters() if not n.startswith("transformer.")]
    opt, sched = adamw([{"params": [p for p in reader.transformer.parameters() if p.requires_grad], "lr": config.lr},
                        {"params": heads, "lr": config.head_lr}], config.weight_decay, steps, config.warmup)
    state = resume(out, reader, opt, sched, log)
    start = state["step"] if state else 0
    if start:
        log(f"{out}: resuming at step {start} of {steps}")
    reader.train()
    epoch_cache: dict[int, tuple] = {}
    bucketed = config.bucket > 0 and not groups
    t0, seen, pieces, padded = time.perf_counter(), 0, 0, 0
    with cheap_dropout(reader, compute.device):  # dropout masks cheap on a CPU (drkit.dense.dropout)
        for step in progress(range(start, steps), desc="reader", initial=start, total=steps):
            epoch = step // per_epoch
            if epoch not in epoch_cache:
                examples = epoch_examples(sources, order, config.seed, epoch, alone)
                # bucketed: the pass's word pieces are needed to batch it, so it is featurized at once
                featurized = [reader.featurize(e, labels=True) for e in examples] if bucketed else None
                epoch_cache = {epoch: (examples, featurized, [len(f.ids) for f in featurized] if bucketed else None)}
            examples, featurized, lengths = epoch_cache[epoch]
            if groups:
                rows = grouped_step_rows(groups, config.batch_size, step, config.seed)
            elif bucketed:
                rows = bucketed_step_rows(lengths, config.batch_size, step, config.seed, config.bucket)
            else:
                rows = step_rows(len(sources), config.batch_size, step, config.seed)
            batch = [examples[i] for i in rows]
            features = [featurized[i] for i in rows] if bucketed else [reader.featurize(e, labels=True) for e in batch]
            inputs = reader.batch(features)
            with compute.autocast():
                logits = reader(**inputs)
            loss, parts = reader.loss(logits, features)
            if teacher is not None:
                with torch.no_grad(), compute.autocast():
                    taught = teacher(**inputs)
                soft, parts["distill"] = soft_loss(logits, taught, inputs["content"], features, config.temperature)
                loss = (1 - config.distill_weight) * loss + config.distill_weight * soft
            if not math.isfinite(float(loss.detach())):
                raise ConfigError(f"the reader's loss is {float(loss.detach())} at step {step}; try a lower --lr")
            norm = optimizer_step(opt, loss)
            sched.step()
            seen += len(batch)
            pieces += sum(len(f.ids) for f in features)
            padded += len(features) * max(len(f.ids) for f in features)
            if (step + 1) % config.log_every == 0 or step + 1 == steps:
                append_log(out / "train_log.jsonl", {"step": step + 1, "loss": round(float(loss.detach()), 4),
                                                     **{k: round(v, 4) for k, v in parts.items()},
                                                     "grad_norm": round(norm, 3), "lr": sched.get_last_lr()[0]})
            if (step + 1) % config.checkpoint_every == 0 and step + 1 < steps:
                save_checkpoint(out, step + 1, reader, opt, sched, {})
    seconds = time.perf_counter() - t0
    record = {"steps": steps, "questions": len(records), "hop_questions": hops, "kb_questions": kb_count,
              "more_kb_questions": more,
              "examples_per_epoch": len(sources),
              "read_alone": len(alone),
              "seconds_this_session": round(seconds, 1), "examples_per_s": round(seen / seconds, 2) if seconds else None,
              "padding_share_this_session": round(1 - pieces / padded, 3) if padded else None,
              "compute": compute.describe()}
    if teacher is not None:
        record["teacher"] = str(teacher.path)
    reader.save(out / "reader", overwrite=True, extra_manifest={"training": record, "settings": settings})
    save_checkpoint(out, steps, reader, opt, sched, {})
    _plot(out)
    (out / "done.json").write_text(json.dumps(record, indent=2) + "\n")
    log(f"reader trained: {steps} steps in {seconds:.0f} s this session; wrote {out / 'reader'}")
    return out / "reader"


def freeze(transformer: torch.nn.Module, layers: int) -> None:
    """Keep a BERT-style `transformer`'s embeddings and its first `layers` layers as they are (no gradient), in place;
    0 leaves every weight trained. More layers than it has is a `ConfigError`."""
    if not layers:
        return
    refusal = f"frozen_layers {layers}: the transformer has no embeddings and encoder.layer stack"
    stack = layer_stack(transformer, refusal)
    if not hasattr(transformer, "embeddings"):
        raise ConfigError(refusal)
    if layers > len(stack):
        raise ConfigError(f"frozen_layers {layers}: the transformer has {len(stack)} layers")
    for module in (transformer.embeddings, *stack[:layers]):
        for p in module.parameters():
            p.requires_grad_(False)


def _plot(out: Path) -> None:
    """OUT/curve.png: the loss and its parts against the step."""
    from drkit.util.runs import read_log

    rows = read_log(out / "train_log.jsonl")
    if not rows:
        return
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key in ("loss", "type", "support", "start", "end", "distill"):
        if key not in rows[0]:
            continue
        ax.plot([r["step"] for r in rows], [r[key] for r in rows], label=key, lw=2 if key == "loss" else 1)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.set_title("reader training")
    ax.legend()
    fig.tight_layout()
    fig.savefig(out / "curve.png", dpi=120)
    plt.close(fig)
