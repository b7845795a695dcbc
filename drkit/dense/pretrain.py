"""Pretraining the mention encoder on slot-filling queries from a KB (paper, 2.3).

One step takes `anchor_passages` passages in a seeded order (an epoch visits every passage that is a
positive of some training query), up to `queries_per_passage` of each one's training queries, and
one hard negative passage per query (the kinds in turn, `drkit.dense.distant.NEGATIVE_KINDS`) until the
step holds `max_passages` passages. Each passage is encoded once and every query of the step is
scored against every passage of the step, each pair labelled by `DistantSupervision.label`; so the
other queries' passages act as further negatives. The loss is the mean span NLL of the positive pairs
plus `negative_weight` times that of the negative pairs (`drkit.dense.spans`).

A run directory holds ``checkpoints/`` (resumed automatically), ``train_log.jsonl``, ``heldout.jsonl``
(the held-out queries), ``run.json`` and, when done, ``encoder/`` (a `drkit.dense.encoder` artifact).
Without a KB there is nothing to pretrain on: the run is ``encoder/`` untrained (steps 0), which
``drkit embed`` takes as it takes a pretrained one.

Question-answer pairs (``qa``: JSONL questions with their gold ``supporting`` passages, over a
title-entity corpus) are a second source of slot-filling queries (`drkit.dense.qa_supervision`: the
question is the query, the supporting passages' title entities its answers, BM25-retrieved passages its
hard negatives). With both a KB and QA pairs, steps alternate between them (even steps KB, odd steps QA).
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

from drkit.data.kb import read_kb
from drkit.dense.distant import IGNORED, NEGATIVE, POSITIVE, DistantConfig, DistantSupervision
from drkit.dense.dropout import cheap_dropout
from drkit.dense.encoder import DualEncoder, EncoderConfig
from drkit.dense.spans import log_probs_with_null, span_logits, span_nll
from drkit.errors import ConfigError
from drkit.index.sparse import SparseIndex
from drkit.util.hardware import choose, device_field, precision_field
from drkit.util.progress import progress
from drkit.util.runs import (
    adamw,
    checkpoints,
    optimizer_step,
    prepare_run,
    resume,
    save_checkpoint,
    upgrade_run_settings,
)
from drkit.util.sampling import generator, step_position, step_rows
from drkit.util.warnlog import WarningLog

PRETRAIN_STEPS = 2600  # the default with a KB


ATTENTION_DROPOUT_HELP = ("dropout on the attention probabilities (the base's own rate); --no-attention-dropout: none, "
                          "as the reader trains, so torch's fused CPU attention runs (about a fifth less time a step on "
                          "2 AVX2 cores); the encoder written carries the setting in its config, so the models trained "
                          "from it (train, train-mixing) train without it too")


@dataclass(frozen=True)
class PretrainConfig:
    """The pretraining recipe. The defaults take 45 minutes on the full MetaQA corpus on 2 CPU cores."""

    steps: int | None = field(default=None, metadata={
        "help": "optimiser steps (0 saves the encoder untrained, the only choice without a KB)", "type": int,
        "default_help": f"{PRETRAIN_STEPS} with --kb, 0 without"})
    anchor_passages: int = field(default=8, metadata={"help": "positive passages per step"})
    queries_per_passage: int = field(default=6, metadata={"help": "training queries drawn per positive passage"})
    max_passages: int = field(default=20, metadata={"help": "passages per step, positives and hard negatives"})
    lr: float = field(default=5e-5, metadata={"help": "peak learning rate of the transformers"})
    head_lr: float = field(default=1e-3, metadata={"help": "peak learning rate of the projections and null logits"})
    warmup: float = field(default=0.06, metadata={"help": "fraction of the steps with a linear warm-up"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    negative_weight: float = field(default=1.0, metadata={"help": "weight of the negative pairs' loss"})
    precision: str = precision_field("the transformers")
    device: str = device_field("pretraining")
    checkpoint_every: int = field(default=100, metadata={"help": "steps between checkpoints"})
    seed: int = field(default=0, metadata={"help": "seed of the sampling"})
    attention_dropout: bool = field(default=True, metadata={"help": ATTENTION_DROPOUT_HELP})

    def __post_init__(self):
        if (self.steps is not None and self.steps < 0) or self.anchor_passages < 1 or self.queries_per_passage < 1:
            raise ConfigError("steps must be >= 0, anchor_passages and queries_per_passage >= 1")
        if self.max_passages < self.anchor_passages:
            raise ConfigError("max_passages must be at least anchor_passages")
        if self.checkpoint_every < 1:
            raise ConfigError("checkpoint_every must be at least 1")


@dataclass
class Batch:
    queries: np.ndarray  # (Q,) query ids
    passages: np.ndarray  # (P,) passage ids
    negative_kinds: dict  # kind -> number of negatives of that kind added


def sample_batch(ds: DistantSupervision, config: PretrainConfig, step: int) -> Batch:
    """The step's queries and passages; a function of (seed, step) only, so a resumed run draws the same."""
    n = len(ds.anchors)
    if n == 0:
        raise ConfigError("no passage states any training fact: nothing to pretrain on")
    anchors = ds.anchors[step_rows(n, config.anchor_passages, step, config.seed)]
    rng = generator(config.seed, *step_position(n, config.anchor_passages, step), 1)
    queries = []
    for p in anchors:
        qs = ds.training_queries(int(p))
        queries.extend(rng.choice(qs, size=min(len(qs), config.queries_per_passage), replace=False).tolist())
    queries = list(dict.fromkeys(queries))
    passages = list(dict.fromkeys(int(p) for p in anchors))
    kind_names = ds.negative_kinds
    kinds = {k: 0 for k in kind_names}
    for i, q in enumerate(rng.permutation(queries)):
        if len(passages) >= config.max_passages:
            break
        for j in range(len(kind_names)):
            kind = kind_names[(i + j) % len(kind_names)]
            p = ds.negative(int(q), kind, rng)
            if p is not None and p not in passages:
                passages.append(p)
                kinds[kind] += 1
                break
    return Batch(np.array(queries, dtype=np.int64), np.array(passages, dtype=np.int64), kinds)


def batch_targets(ds: DistantSupervision, batch: Batch, length: int):
    """Labels (Q, P) and gold start/end masks (Q, P, L) for a batch whose passages are padded to `length`
    positions (word piece k of a passage at position k + 1)."""
    Q, P = len(batch.queries), len(batch.passages)
    labels = np.zeros((Q, P), dtype=np.int64)
    gold_start = np.zeros((Q, P, length), dtype=bool)
    gold_end = np.zeros((Q, P, length), dtype=bool)
    mentions = ds.index.mentions
    for a, q in enumerate(batch.queries):
        for b, p in enumerate(batch.passages):
            labels[a, b] = ds.label(int(q), int(p))
            if labels[a, b] == POSITIVE:
                rows = ds.gold_mentions(int(q), int(p))
                gold_start[a, b, np.asarray(mentions[rows, 2]) + 1] = True
                gold_end[a, b, np.asarray(mentions[rows, 3]) + 1] = True
    return labels, gold_start, gold_end


def batch_loss(model: DualEncoder, ds: DistantSupervision, batch: Batch, config: PretrainConfig) -> dict:
    pieces = [ds.index.passage_pieces(int(p)) for p in batch.passages]
    ids, mask = model.passage_batch(pieces)
    labels, gold_start, gold_end = batch_targets(ds, batch, ids.shape[1])
    valid = mask.bool() & (ids != model.tokenizer.cls_token_id) & (ids != model.tokenizer.sep_token_id)
    qbatch = model.query_batch([ds.queries.texts[int(q)] for q in batch.queries])
    with choose(config.precision, config.device, training=True).autocast():
        fs, fe = model.encode_passages_grouped(ids, mask)  # each group padded to its own longest passage
        qs, qe = model.encode_queries(qbatch["input_ids"], qbatch["attention_mask"])
    dev = model.device
    s_logit, e_logit = span_logits(fs.float(), fe.float(), qs.float(), qe.float())
    s_logp = log_probs_with_null(s_logit, valid.to(dev), model.null_start)
    e_logp = log_probs_with_null(e_logit, valid.to(dev), model.null_end)
    labels_t = torch.from_numpy(labels).to(dev)
    positive = labels_t == POSITIVE
    nll = span_nll(s_logp, e_logp, torch.from_numpy(gold_start).to(dev), torch.from_numpy(gold_end).to(dev), positive)
    negative = labels_t == NEGATIVE
    pos_loss = nll[positive].mean() if positive.any() else torch.zeros((), device=dev)
    neg_loss = nll[negative].mean() if negative.any() else torch.zeros((), device=dev)
    return {"loss": pos_loss + config.negative_weight * neg_loss, "pos_loss": pos_loss, "neg_loss": neg_loss,
            "pairs_pos": int(positive.sum()), "pairs_neg": int(negative.sum()),
            "pairs_ignored": int((labels_t == IGNORED).sum()), "tokens": int(mask.sum())}


def optimizer_for(model: DualEncoder, config: PretrainConfig):
    for m in (model.passage_model, model.query_model):  # word embeddings stay as pretrained
        m.embeddings.word_embeddings.weight.requires_grad_(False)
    heads = [p for n, p in model.named_parameters() if not n.startswith(("passage_model.", "query_model.")) and p.requires_grad]
    body = [p for n, p in model.named_parameters() if n.startswith(("passage_model.", "query_model.")) and p.requires_grad]
    return adamw([{"params": body, "lr": config.lr}, {"params": heads, "lr": config.head_lr}],
                 config.weight_decay, config.steps, config.warmup)


def _distant_data(index: SparseIndex, kb: str | Path, distant_config: DistantConfig, run: Path, log):
    """The slot-filling queries of `kb` over `index`; writes ``heldout.jsonl`` and ``data.json`` to `run`."""
    warnings = WarningLog()
    ds = DistantSupervision(index, read_kb(kb), distant_config, warnings)
    summary = ds.summary()
    log(f"pretraining data: {summary['queries']:,} slot-filling queries ({summary['with_passage']:,} stated in some "
        f"passage), {summary['positive_pairs']:,} positive (query, passage) pairs; {summary['heldout']:,} queries held out "
        f"with their {summary['heldout_facts']:,} facts")
    for line in warnings.lines():
        log(line)
    with open(run / "heldout.jsonl", "w", encoding="utf-8") as f:
        for q in ds.heldout:
            f.write(json.dumps(ds.query_record(int(q)), ensure_ascii=False) + "\n")
    (run / "data.json").write_text(json.dumps({"summary": summary, "warnings": warnings.to_dict()}, indent=2) + "\n")
    return ds, summary


def pretrain(index_dir: str | Path, kb: str | Path | None, out: str | Path, config: PretrainConfig = PretrainConfig(),
             encoder_config: EncoderConfig = EncoderConfig(), distant_config: DistantConfig = DistantConfig(),
             overwrite: bool = False, log=print, qa: str | Path | None = None) -> Path:
    """Pretrain (or resume pretraining) and write ``out/encoder``. Returns that path. `kb` and/or `qa`
    (module docstring) are the data.

    Without a `kb` there is nothing to pretrain on: ``out/encoder`` is the untrained encoder (steps 0,
    the default then), ready for `drkit.dense.mentions.build_mention_index`."""
    run = Path(out)
    has_data = kb is not None or qa is not None
    if config.steps is None:
        config = dataclasses.replace(config, steps=PRETRAIN_STEPS if has_data else 0)
    if not has_data and config.steps:
        raise ConfigError(f"pretraining needs a KB (--kb) or question-answer pairs (--qa): their facts or questions are "
                          f"the slot-filling queries; without either only --steps 0 (the untrained encoder) is possible, "
                          f"not --steps {config.steps}")
    settings = {"pretrain": dataclasses.asdict(config), "encoder": dataclasses.asdict(encoder_config),
                "distant": dataclasses.asdict(distant_config), "index": str(index_dir),
                "kb": None if kb is None else str(kb)}
    if qa is not None:  # absent from the settings of a run without QA pairs (and of runs made before them)
        settings["qa"] = str(qa)
    if not overwrite:
        upgrade_run_settings(run, {"pretrain": PretrainConfig})  # a run made when precision was a bf16 flag
    prepare_run(run, settings, overwrite, "pretraining", paths=("index", "kb", "qa"))
    if (run / "encoder" / "manifest.json").exists():
        log(f"{run} is already pretrained ({run / 'encoder'}); pass --overwrite to pretrain again")
        return run / "encoder"
    torch.manual_seed(config.seed)

    t0 = time.perf_counter()
    index = SparseIndex.load(index_dir)
    sources, summary = [], None
    if kb is not None:
        ds, summary = _distant_data(index, kb, distant_config, run, log)
        sources.append(ds)
    if qa is not None:
        from drkit.dense.qa_supervision import QASupervision

        qa_ds = QASupervision(index, qa)
        qa_summary = qa_ds.summary()
        log(f"pretraining data from {qa}: {qa_summary['queries']:,} questions, {qa_summary['positive_pairs']:,} positive "
            f"(question, passage) pairs, BM25 negatives for {qa_summary['with_tfidf_negatives']:,}")
        summary = qa_summary if summary is None else {"kb": summary, "qa": qa_summary}
        sources.append(qa_ds)

    compute = choose(config.precision, config.device, training=True)
    model = DualEncoder.from_base(encoder_config, **({} if config.attention_dropout else
                                                     {"attention_probs_dropout_prob": 0.0})).to(compute.device)
    opt, sched = optimizer_for(model, config)
    start = 0
    state = resume(run, model, opt, sched, log)  # dropout draws continue as if never interrupted
    if state is not None:
        start = state["step"]
        log(f"resuming from {checkpoints(run)[-1]} (step {start} of {config.steps})")
    prep_s = time.perf_counter() - t0

    model.train()
    t_train = time.perf_counter()
    with open(run / "train_log.jsonl", "a", encoding="utf-8") as logf, cheap_dropout(model, compute.device), \
            progress(total=config.steps, initial=start, desc="pretrain", unit="step") as bar:
        for step in range(start, config.steps):
            t = time.perf_counter()
            ds = sources[step % len(sources)]  # KB and QA pairs in turn when both are given
            batch = sample_batch(ds, config, step)
            out_ = batch_loss(model, ds, batch, config)
            grad_norm = optimizer_step(opt, out_["loss"])
            sched.step()
            record = {"step": step + 1, "loss": round(out_["loss"].item(), 5), "pos_loss": round(out_["pos_loss"].item(), 5),
                      "neg_loss": round(out_["neg_loss"].item(), 5), "grad_norm": round(float(grad_norm), 4),
                      "lr": sched.get_last_lr()[0], "queries": len(batch.queries), "passages": len(batch.passages),
                      "pairs_pos": out_["pairs_pos"], "pairs_neg": out_["pairs_neg"],
                      "pairs_ignored": out_["pairs_ignored"], "negatives": batch.negative_kinds,
                      "tokens": out_["tokens"], "step_s": round(time.perf_counter() - t, 3)}
            if not math.isfinite(record["loss"]):
                raise FloatingPointError(f"pretraining loss is {record['loss']} at step {step + 1}")
            logf.write(json.dumps(record) + "\n")
            logf.flush()
            bar.set_postfix(loss=f"{record['loss']:.3f}", pos=f"{record['pos_loss']:.3f}", neg=f"{record['neg_loss']:.3f}")
            bar.update(1)
            if (step + 1) % config.checkpoint_every == 0 or step + 1 == config.steps:
                save_checkpoint(run, step + 1, model, opt, sched, {})
    train_s = time.perf_counter() - t_train
    model.eval().cpu()
    model.save(run / "encoder", overwrite=True, extra_manifest={
        "pretraining": {"steps": config.steps, "settings": settings, "data": summary,
                        "computed_in": {"precision": compute.precision, "device": compute.device.type},
                        "this_session_s": {"prepare": round(prep_s, 1), "train": round(train_s, 1)}}})
    log(f"wrote {run / 'encoder'} ({config.steps} steps; this session: {prep_s:.0f} s preparing, {train_s:.0f} s training)")
    return run / "encoder"
