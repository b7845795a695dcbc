"""End-to-end training of a hop-mixing model from gold passages (the paper's HotpotQA setting).

Questions are JSONL lines ``{"id", "question", "supporting": [corpus ids], "answers": [...]}`` (2WikiMultiHopQA's
format; other fields are ignored). The gold entities of a question are the title entities of its
supporting passages (their pages), and, with `answers`, its answers that are entities of the index (the
paper trains "from the answers where these are entities"). Z_0 is the question linker's
(`drkit.index.question_linking`); the loss is `drkit.reason.mixing.mixture_loss` on Z* for the page
entities (``objective="pages"``: Z* ranks passages, so only entities with a page are its targets), plus
(``answer_weight``) the same loss for the answer entities alone on the answer's last hop (the model's answer
head, `MixConfig.answer_head`; Z_T for a model without one), so that its best entity is the answer
(``objective="pages+answers"``, the earlier objective: answers are Z*'s targets too).
Every `eval_every` steps the passage R@5 on dev is logged: the share of the gold passages in the top 5
passages the model reaches, ranked as `drkit retrieve` ranks them (`drkit.reason.passages.rank_passages`;
without the linker's unreached passages after them, which `drkit retrieve` lists when a question has
fewer than its --top reached ones).

The run directory holds ``run.json`` (settings: a rerun with the same ones finds the run done, with
others it is refused, naming the setting), ``train_log.jsonl``, ``dev_log.jsonl``, ``model/`` and
``done.json``. The model kept is the last step's (``keep="last"``, default: dev only draws the learning
curve) or the best on dev (``keep="best"``). Runs are short (minutes), so an interrupted one starts again from its first step.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from drkit.dense.dropout import cheap_dropout
from drkit.dense.encoder import DualEncoder
from drkit.dense.mentions import MentionIndex
from drkit.errors import ConfigError, InputFormatError
from drkit.index.question_linking import QuestionLinkConfig, QuestionLinker
from drkit.index.sparse import SparseIndex
from drkit.reason.entity_set import EntitySet
from drkit.reason.follow import FollowConfig
from drkit.reason.mixing import HopMixingModel, MixConfig, mixture_loss
from drkit.reason.model import ModelConfig
from drkit.reason.vkb import VirtualKB, has_page
from drkit.util.artifact import file_checksum, path_record
from drkit.util.hardware import device_field, precision_field
from drkit.util.progress import progress
from drkit.util.runs import adamw, append_log, optimizer_step, prepare_run, upgrade_run_settings
from drkit.util.sampling import step_rows


@dataclass(frozen=True)
class MixTrainConfig:
    """Settings of hop-mixing training."""

    steps: int = field(default=150, metadata={"help": "optimizer steps (300 until 2026-12-05: the same 2Wiki "
                                                     "figures on both folds at twice the time)"})
    batch_size: int = field(default=16, metadata={"help": "questions per step"})
    lr: float = field(default=2e-5, metadata={"help": "peak learning rate of the transformer layers"})
    head_lr: float = field(default=1e-3, metadata={"help": "peak learning rate of the projections and the pi classifier"})
    power_lr: float = field(default=0.02, metadata={"help": "peak learning rate of the per-hop TF-IDF powers"})
    named_lr: float = field(default=0.1, metadata={"help": "peak learning rate of the weight w of the entities a "
                                                    "question names verbatim in Z_0 (a log-scale scalar)"})
    warmup: float = field(default=0.1, metadata={"help": "fraction of steps of linear warm-up"})
    weight_decay: float = field(default=0.01, metadata={"help": "AdamW weight decay"})
    eval_every: int = field(default=50, metadata={"help": "steps between dev evaluations (the learning curve)"})
    keep: str = field(default="last", metadata={"help": "the model kept: 'last' (the final step's; dev only draws the "
                                                       "curve) or 'best' (the best on dev: model selection on dev)"})
    answers: bool = field(default=True, metadata={"help": "train on the answers that are entities of the index"})
    answer_weight: float = field(default=1.0, metadata={"help": "weight of the loss -log Z_T[answer] that makes the last "
                                                                 "hop's best entity the answer (0: Z* only)"})
    objective: str = field(default="pages", metadata={
        "help": "Z*'s targets: pages (the gold passages' title entities only; answers have their own loss on Z_T) "
                "or pages+answers (answers that are entities too: the earlier objective)",
        "choices": ("pages", "pages+answers")})
    more_kb_chains: int = field(default=1000, metadata={
        "help": "with --more-kb: at most this many two-hop questions of its chained facts, \"What is the r2 of the r1 "
                "of s?\" (drkit.reason.kb_chains), trained on beside --train's"})
    precision: str = precision_field("the question encoder")
    device: str = device_field("training (the question encoder and the mention scores)")
    seed: int = field(default=0, metadata={"help": "seed of the question order and dropout"})

    def __post_init__(self):
        if self.steps < 0 or self.batch_size < 1 or self.eval_every < 1 or self.more_kb_chains < 0:
            raise ConfigError("steps and more_kb_chains must be >= 0, batch_size and eval_every >= 1")
        if self.keep not in ("last", "best"):
            raise ConfigError(f"keep must be 'last' or 'best', got {self.keep!r}")
        if self.objective not in ("pages", "pages+answers"):
            raise ConfigError(f"objective must be 'pages' or 'pages+answers', got {self.objective!r}")

    # what a field absent from a run made before it existed meant (`drkit.util.runs.upgrade_run_settings`)
    ABSENT_MEANT = {"objective": "pages+answers"}


def linked_entity_set(linked) -> EntitySet:
    """A `drkit.index.question_linking.LinkedQuestions` as Z_0."""
    return EntitySet(torch.from_numpy(linked.rows.astype(np.int64)), torch.from_numpy(linked.ids.astype(np.int64)),
                     torch.from_numpy(linked.weights.astype(np.float32)), linked.batch_size)


def named_entity_set(linked) -> EntitySet:
    """Z_0 of the entities each question names verbatim, weighted equally (what a bracketed question entity
    is to a MetaQA question); a question that names none keeps its linked Z_0."""
    named = linked.named()
    rows, ids, weights = [], [], []
    for b in range(linked.batch_size):
        mine = np.unique(named[b][named[b] >= 0])
        if len(mine):
            rows.append(np.full(len(mine), b)), ids.append(mine), weights.append(np.full(len(mine), 1.0 / len(mine)))
        else:
            e, w = linked.row(b)
            order = np.argsort(e, kind="stable")
            rows.append(np.full(len(e), b)), ids.append(e[order]), weights.append(w[order])
    cat = lambda parts, dtype: torch.from_numpy(np.concatenate(parts).astype(dtype)) if parts else torch.zeros(0, dtype=getattr(torch, dtype))  # noqa: E731
    return EntitySet(cat(rows, "int64"), cat(ids, "int64"), cat(weights, "float32"), linked.batch_size)


def _article_of(index: SparseIndex) -> dict[str, int]:
    return {k: i for i, k in enumerate(index.article_keys)}


def gold_questions(path: str | Path, index: SparseIndex, answers: bool = True) -> tuple[list[dict], dict]:
    """Questions with their gold entity ids (``gold``: title entities of the supporting passages, then, with
    `answers`, the answers that are entities; ``pages``: the former only). A supporting id not in the corpus,
    or a passage whose title is not an entity, is counted in the returned counts, not fatal; a line that is
    not a JSON object with a "question" string is an `InputFormatError` naming file and line."""
    from drkit.data.corpus import iter_json_objects

    article = _article_of(index)
    items, counts = [], {"lines": 0, "supporting_not_in_corpus": 0, "supporting_without_entity": 0,
                         "answer_entities": 0, "without_gold": 0}
    for line, obj in iter_json_objects(path, "question file"):
        counts["lines"] += 1
        if not isinstance(obj.get("question"), str) or not obj["question"].strip():
            raise InputFormatError(path, line, "'question' must be a non-empty string", field="question")
        supporting = obj.get("supporting") or []
        if not isinstance(supporting, list):
            raise InputFormatError(path, line, "'supporting' must be a list of corpus ids", field="supporting")
        gold = []
        for key in supporting:
            a = article.get(str(key))
            if a is None:
                counts["supporting_not_in_corpus"] += 1
            elif index.article_entity[a] < 0:
                counts["supporting_without_entity"] += 1
            else:
                gold.append(int(index.article_entity[a]))
        n_pages = len(gold)
        if answers:
            for ans in obj.get("answers") or []:
                e = index.entities.lookup(ans) if isinstance(ans, str) else None
                if e is not None and e not in gold:
                    gold.append(int(e))
                    counts["answer_entities"] += 1
        if not gold:
            counts["without_gold"] += 1
        items.append({"id": obj.get("id", str(line)), "question": obj["question"].strip(), "gold": np.array(gold, np.int64),
                      "pages": np.array(gold[:n_pages], np.int64), "answers": np.array(gold[n_pages:], np.int64),
                      "supporting": [str(k) for k in supporting], "type": obj.get("type"), "line": line})
    return items, counts


def passage_recall(model: HopMixingModel, vkb: VirtualKB, linker: QuestionLinker, items: list[dict], k: int = 5,
                   batch_size: int = 32) -> float:
    """R@k: the mean over questions with gold passages of the share of them in the top `k` passages the
    model reaches, ranked as `drkit retrieve` ranks them (`drkit.reason.passages.rank_passages`)."""
    from drkit.reason.passages import PageRanker, rank_passages

    pages, keys = PageRanker.from_index(vkb.index), vkb.index.article_keys
    shares = []
    with torch.no_grad():
        for s in range(0, len(items), batch_size):
            batch = items[s:s + batch_size]
            texts = [it["question"] for it in batch]
            linked = linker.link(texts)
            out = model(texts, linked_entity_set(linked), vkb, precision=vkb.precision, named=linked.named())
            for it, ranked in zip(batch, rank_passages(out, vkb, pages, k, model.follow_config.temperature)):
                gold = set(it["supporting"])
                if gold:
                    shares.append(len(gold & {keys[p.article] for p in ranked}) / len(gold))
    return float(np.mean(shares)) if shares else 0.0


def train_mixing(index_dir: str | Path, mentions_dir: str | Path, train_file: str | Path, dev_file: str | Path,
                 out: str | Path, mix_config: MixConfig = MixConfig(), model_config: ModelConfig = ModelConfig(),
                 follow_config: FollowConfig = FollowConfig(), config: MixTrainConfig = MixTrainConfig(),
                 link_config: QuestionLinkConfig = QuestionLinkConfig(), overwrite: bool = False, log=print,
                 more_kb: str | Path | None = None) -> Path:
    """Train a hop-mixing model, written to ``out/model`` (the last step's, or with ``keep="best"`` the best on
    dev by entity R@5 of Z*). With `more_kb` (a KB, e.g. one `drkit bootstrap-kb` grew), up to
    ``config.more_kb_chains`` two-hop questions of its chained facts (`drkit.reason.kb_chains`, written to
    ``out/kb-chains.jsonl``) are trained on beside the questions of `train_file`."""
    run = Path(out)
    if more_kb is not None and not Path(more_kb).is_file():
        raise ConfigError(f"the KB of chained facts (--more-kb) {more_kb} is not a file")
    mentions = MentionIndex.load(mentions_dir)
    encoder_dir = mentions.encoder_dir()
    settings = {"train": dataclasses.asdict(config), "mix": dataclasses.asdict(mix_config),
                "model": dataclasses.asdict(model_config), "follow": dataclasses.asdict(follow_config),
                "link": dataclasses.asdict(link_config), "index": str(index_dir), "mentions": str(mentions_dir),
                "encoder": str(encoder_dir), "train_file": str(train_file), "dev_file": str(dev_file),
                **({"more_kb": file_checksum(more_kb)} if more_kb else {})}  # a run made before it resumes
    index = SparseIndex.load(index_dir)
    every_entity_a_page = bool(has_page(index).all())  # then page_mix changes nothing
    if not overwrite:  # a run made before a settings field existed: its run.json as the settings it meant
        upgrade_run_settings(run, {"train": MixTrainConfig, "mix": MixConfig, "model": ModelConfig,
                                   "follow": FollowConfig, "link": QuestionLinkConfig},
                             # made before page_mix on such an index, the run meant either value
                             absent={"mix": {"page_mix": mix_config.page_mix}} if every_entity_a_page else None)
    if mix_config.page_mix and config.objective == "pages+answers" and config.answers and not every_entity_a_page:
        raise ConfigError("objective pages+answers with page_mix: an answer entity without a page (a name or date "
                          "found in the text) could not be in Z*; use --objective pages (answers keep their own loss "
                          "on the last hop) or --no-page-mix")
    prepare_run(run, settings, overwrite, "training", paths=("index", "mentions", "encoder", "train_file", "dev_file"))
    if (run / "done.json").exists():
        log(f"{run} is already trained ({run / 'model'}); pass --overwrite to train again")
        return run / "model"
    for name in ("train_log.jsonl", "dev_log.jsonl"):  # an interrupted run starts again
        (run / name).unlink(missing_ok=True)
    torch.manual_seed(config.seed)
    vkb = VirtualKB(index, mentions, precision=config.precision, device=config.device)
    linker = QuestionLinker.from_index(index, link_config)
    train_items, train_counts = gold_questions(train_file, index, config.answers)
    if more_kb and config.more_kb_chains:
        from drkit.data.kb import read_kb
        from drkit.reason.kb_chains import chain_questions, write_questions

        chains = write_questions(run / "kb-chains.jsonl", chain_questions(
            read_kb(more_kb), index.article_titles, index.article_keys, config.more_kb_chains, config.seed))
        chain_items, chain_counts = gold_questions(chains, index, config.answers)
        log(f"{len(chain_items):,} two-hop questions of {more_kb}'s chained facts ({chains}; {chain_counts})")
        train_items += chain_items
    dev_items, dev_counts = gold_questions(dev_file, index, False)
    usable = [it for it in train_items if len(it["gold"])]
    log(f"training questions: {len(usable)} of {len(train_items)} with a gold entity ({train_counts}); "
        f"dev: {len(dev_items)} ({dev_counts})")
    if not usable:
        raise ConfigError(f"no training question of {train_file} has a gold entity in the index {index_dir}")
    model = HopMixingModel.from_encoder(DualEncoder.load(encoder_dir), mix_config, model_config, follow_config)
    model.base.set_entities(vkb.entity_names)
    model.to(vkb.compute.device)
    heads = [p for n, p in model.named_parameters() if p.requires_grad and n != "named_weight" and (
        not n.startswith("base.") or n.startswith(("base.encoder.start.", "base.encoder.end.", "base.encoder.entity.")))]
    powers = [model.base.tfidf_power] if model.base.tfidf_power.requires_grad else []
    named = [model.named_weight] if mix_config.named_weight else []
    special = {id(p) for p in heads + powers + named}
    body = [p for p in model.parameters() if p.requires_grad and id(p) not in special]
    groups = [{"params": body, "lr": config.lr}, {"params": heads, "lr": config.head_lr},
              {"params": powers, "lr": config.power_lr, "weight_decay": 0.0}]
    if named:  # a group of its own only where the model has w (a run made before it resumes with its three)
        groups.append({"params": named, "lr": config.named_lr, "weight_decay": 0.0})
    opt, sched = adamw(groups, config.weight_decay, config.steps, config.warmup)
    staging = run / ".model-best"
    identity = {"index": str(Path(index_dir).resolve()), "encoder": str(Path(encoder_dir).resolve()),
                "mentions": {**path_record(mentions_dir, run / "model", "from_model"),  # the model is saved in run/model
                             "encoder_sha256": mentions.manifest["encoder"]["sha256"],
                             "index_mentions_sha256": mentions.manifest["index"]["mentions_sha256"]},
                "link": dataclasses.asdict(link_config)}
    best = {"passage_R@5": -1.0, "step": 0}

    def evaluate(step: int) -> None:
        nonlocal best
        model.eval()
        r5 = passage_recall(model, vkb, linker, dev_items)
        model.train()
        append_log(run / "dev_log.jsonl", {"step": step, "passage_R@5": round(r5, 5)})
        if r5 > best["passage_R@5"] if config.keep == "best" else step == config.steps:
            best = {"passage_R@5": r5, "step": step}
            model.save(staging, overwrite=True, extra_manifest={**identity, "training": {"best": best, "settings": settings}})
        log(f"step {step}: dev passage R@5 {r5:.4f}" + (f" (best {best['passage_R@5']:.4f} at step {best['step']})"
                                                         if config.keep == "best" else ""))

    evaluate(0)
    model.train()
    t0 = time.perf_counter()
    with open(run / "train_log.jsonl", "a", encoding="utf-8") as logf, cheap_dropout(model, vkb.compute.device), \
            progress(total=config.steps, desc="train mixing", unit="step") as bar:
        for step in range(config.steps):
            t = time.perf_counter()
            batch = [usable[i] for i in step_rows(len(usable), config.batch_size, step, config.seed)]
            texts = [it["question"] for it in batch]
            linked = linker.link(texts)
            answers = config.answer_weight > 0 and any(len(it["answers"]) for it in batch)
            out = model(texts, linked_entity_set(linked), vkb, precision=config.precision, named=linked.named(),
                        answers=answers)
            targets = "gold" if config.objective == "pages+answers" else "pages"
            loss, found = mixture_loss(out.z_star, [it[targets] for it in batch])
            if answers:
                # the answer entity is the last hop's output (multi-hop slot filling): -log Z_T[answer], on the
                # answer head's hop where the model has one
                answer_loss, _ = mixture_loss(out.answer, [it["answers"] for it in batch])
                if answer_loss is not None:
                    loss = answer_loss * config.answer_weight if loss is None else loss + config.answer_weight * answer_loss
            record = {"step": step + 1, "gold": int(sum(len(it[targets]) for it in batch)), "gold_in_support": int(found.sum()),
                      "pi": [round(float(x), 3) for x in out.pi.detach().mean(0)]}
            if loss is not None:
                record.update(loss=round(loss.item(), 5), grad_norm=round(optimizer_step(opt, loss), 4))
                if not math.isfinite(record["loss"]):
                    raise FloatingPointError(f"training loss is {record['loss']} at step {step + 1}")
            sched.step()
            record["step_s"] = round(time.perf_counter() - t, 3)
            logf.write(json.dumps(record) + "\n")
            logf.flush()
            bar.set_postfix(loss=record.get("loss", "-"), best=round(best["passage_R@5"], 3))
            bar.update(1)
            if (step + 1) % config.eval_every == 0 or step + 1 == config.steps:
                evaluate(step + 1)
    if (run / "model").exists():
        shutil.rmtree(run / "model")
    staging.rename(run / "model")
    train_s = time.perf_counter() - t0
    (run / "done.json").write_text(json.dumps({"best": best, "train_s": round(train_s, 1)}, indent=2) + "\n")
    log(f"wrote {run / 'model'} (step {best['step']}, dev passage R@5 {best['passage_R@5']:.4f}; {train_s:.0f} s)")
    return run / "model"


