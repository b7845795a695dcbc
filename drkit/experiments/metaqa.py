"""The whole MetaQA pipeline in one command (``drkit reproduce-metaqa``).

Steps, each skipped when its output is complete and resumed when it was interrupted (the index,
mention index and evaluations are written atomically; pretraining and training resume from their
checkpoints). Nothing stale is reused: pretraining and training are always called, and refuse a run
made with other settings, naming the setting (``train.steps: 500 in the run, 1500 asked``); a mention
index of another encoder is embedded again; an evaluation, a K sweep or a dev sample records what it
was made from (the model's weights checksum and settings, the question file's checksum, the sample
size) in ``made_with`` and is made again when that differs:

    index -> pretrain -> embed -> train 1/2/3 hops (curriculum: 2 from 1, 3 from 2) -> evaluate on dev
    -> K sweep (Figure 3)
    [--ablations: no curriculum, sum over mentions, lambda = 1, no TF-IDF constraint, no pretraining,
     the paper's 0/1 A, and the paper's ways where drkit differs (question entity removed at the last
     hop or never, [CLS] pooling, the paper's start/end query heads, the paper's Z^T E or none, trained
     word embeddings, the linked question entity); scored on a seeded dev sample; --ablation-rows NAME
     ... runs only those rows (and the DrKIT row they are compared with)]

Outputs in OUT: one directory per step, ``timings.json`` (wall seconds of each step, summed over
sessions), ``results.json`` and ``results.md`` (the table), and ``figure3.png`` (Hits@1 against
questions/s for several K).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from drkit.dense.pretrain import PRETRAIN_STEPS
from drkit.errors import ArtifactError, ConfigError
from drkit.experiments.metaqa_report import DENOMINATOR, DENOMINATOR_CAPTION, plot_k_sweep, results_markdown  # noqa: F401
from drkit.experiments.steps import Timings, made_again, write_json
from drkit.reason.follow import FollowConfig
from drkit.reason.model import ModelConfig
from drkit.reason.train import TrainConfig
from drkit.util.artifact import file_checksum
from drkit.util.runs import settings_diff
from drkit.util.sampling import sample_rows

HOPS = (1, 2, 3)
K_SWEEP = (1000, 3000, 10000, 30000)


@dataclass(frozen=True)
class Ablation:
    """One row of the ablation table: what it is, and the settings it changes from DrKIT's."""

    what: str
    follow: dict = field(default_factory=dict)  # FollowConfig fields
    model: dict = field(default_factory=dict)  # ModelConfig fields
    train: dict = field(default_factory=dict)  # TrainConfig fields
    curriculum: bool = True  # with --curriculum, the h-hop model starts from the (h-1)-hop one of the row


ABLATIONS = {
    "no_curriculum": Ablation("no curriculum: each hop count trained from the pretrained encoder (the paper)",
                              curriculum=False),
    "sum": Ablation("sum over the mentions of an entity instead of max", follow={"aggregate": "sum"}),
    "lambda1": Ablation("lambda = 1 (no softmax temperature)", follow={"temperature": 1.0}),
    "no_tfidf": Ablation("without the TF-IDF constraint (no Z^T A filter)", follow={"tfidf": False}),
    "no_pretraining": Ablation("without pretraining (index of the untrained encoder)"),
    "binary_A": Ablation("the paper's 0/1 A (no TF-IDF weighting)", follow={"tfidf_power": 0.0},
                         model={"learn_tfidf_power": False}),
    # the paper's ways where drkit differs (issue 12)
    "remove_topic_last": Ablation("question entity removed at the last hop only (the paper: once, if at all)",
                                  follow={"remove_topic": "last"}),
    "remove_topic_never": Ablation("question entity never removed", follow={"remove_topic": "never"}),
    "cls_pool": Ablation("[CLS] pooling of each hop's layers (the paper's) instead of the mean", model={"pool": "cls"}),
    "paper_query_heads": Ablation("the paper's query heads: [CLS] after a hop's first layer -> start query, after "
                                  "its second -> end query", model={"query_heads": "paper", "pool": "cls"}),
    "paper_entity_condition": Ablation("the paper's g_t = g~_t + Z^T E (E fixed) instead of a learned U_t^T Z^T E",
                                       model={"entity_condition": "paper"}),
    "no_entity_condition": Ablation("no Z_{t-1} term in the query", model={"entity_condition": "none"}),
    "train_word_embeddings": Ablation("word embeddings trained (and E with them) instead of frozen",
                                      model={"train_word_embeddings": True}),
    "linked_question_entity": Ablation("Z_0 the least frequent entity linked by exact match, brackets ignored "
                                       "(the paper, Appendix A)", train={"question_entity": "linked"}),
}
DRKIT = Ablation("DrKIT")  # the reference row: every setting at its default

_FOLLOW = {f.name: f for f in dataclasses.fields(FollowConfig)}


@dataclass(frozen=True)
class ReproduceConfig:
    """Settings of the MetaQA experiment (``drkit reproduce-metaqa``)."""

    hops: tuple[int, ...] = field(default=HOPS, metadata={"help": "hop counts to train", "type": int, "nargs": "+",
                                                          "default_help": " ".join(map(str, HOPS))})
    steps: int = field(default=TrainConfig.steps, metadata={"help": "training steps of each model"})
    pretrain_steps: int = field(default=PRETRAIN_STEPS, metadata={"help": "pretraining steps of the mention encoder"})
    curriculum: bool = field(default=True, metadata={
        "help": "train the 2-hop model from the 1-hop one and the 3-hop model from the 2-hop one (--no-curriculum: "
        "each from the pretrained encoder, as the paper)"})
    min_weight: float = field(default=_FOLLOW["min_weight"].default, metadata={
        "help": _FOLLOW["min_weight"].metadata["help"] + "; for every model trained"})
    k_sweep: tuple[int, ...] = field(default=K_SWEEP, metadata={
        "help": "K of the K sweep (Figure 3)", "type": int, "nargs": "+", "default_help": " ".join(map(str, K_SWEEP))})
    sweep_questions: int = field(default=2000, metadata={"help": "seeded sample of dev lines per hop count of the K sweep"})
    ablations: bool = field(default=False, metadata={"help": "also train and score the ablations of the paper's table"})
    ablation_steps: int | None = field(default=None, metadata={"help": "training steps of each ablation model",
                                                               "type": int, "default_help": "--steps"})
    ablation_questions: int = field(default=3000, metadata={
        "help": "score the ablations on a seeded sample of this many dev lines per hop count (0: all)"})
    ablation_rows: tuple[str, ...] = field(default=(), metadata={
        "help": "run only these ablation rows, beside the DrKIT row they are compared with (implies --ablations)",
        "type": str, "nargs": "+", "choices": tuple(ABLATIONS), "default_help": "all"})

    def __post_init__(self):
        object.__setattr__(self, "hops", tuple(self.hops))  # argparse gives lists
        object.__setattr__(self, "k_sweep", tuple(self.k_sweep))
        object.__setattr__(self, "ablation_rows", tuple(self.ablation_rows))
        unknown = [r for r in self.ablation_rows if r not in ABLATIONS]
        if unknown or len(set(self.ablation_rows)) != len(self.ablation_rows):
            raise ConfigError(f"ablation_rows must be distinct rows among {', '.join(ABLATIONS)}; got "
                              f"{' '.join(self.ablation_rows)}")
        if not self.hops or any(h not in HOPS for h in self.hops) or len(set(self.hops)) != len(self.hops):
            raise ConfigError(f"hops must be distinct hop counts among {HOPS}, got {self.hops}")
        if min(self.steps, self.pretrain_steps, self.sweep_questions, self.ablation_questions,
               self.ablation_steps or 0) < 0 or not self.k_sweep or min(self.k_sweep) < 1:
            raise ConfigError("steps, pretrain_steps, sweep_questions, ablation_steps and ablation_questions must be "
                              ">= 0 and every K of k_sweep >= 1")
        FollowConfig(min_weight=self.min_weight)  # checks it


def reproduce_metaqa(data: str | Path, out: str | Path, config: ReproduceConfig = ReproduceConfig(), log=print) -> dict:
    """The MetaQA pipeline in `out`: index, pretrain, embed, train and evaluate each hop count, K sweep,
    and with `config.ablations` the ablation table (each ablation trained for `ablation_steps`, every row
    including a DrKIT row trained as long, scored on a seeded sample of `ablation_questions` dev lines).

    With `curriculum`, the h-hop model starts from the (h-1)-hop model of the same recipe where that one
    is trained here (a 2-hop model from the 1-hop one, a 3-hop model from the 2-hop one).

    `config.ablation_rows` runs only those rows of `ABLATIONS` (and the DrKIT row they are compared with);
    each row's runs and evaluations are its own directories, found done when made with the same settings."""
    from drkit.dense.mentions import MentionIndex, build_mention_index, partial_dir
    from drkit.dense.pretrain import PretrainConfig, pretrain
    from drkit.index.build import build_index
    from drkit.index.sparse import SparseIndex
    from drkit.qa.evaluate import evaluate
    from drkit.qa.pipeline import DrKIT
    from drkit.reason.train import train

    data, out = Path(data), Path(out)
    hops, curriculum = config.hops, config.curriculum
    ablation_steps = config.steps if config.ablation_steps is None else config.ablation_steps
    for f in ["wiki.txt", "kb.txt"] + [f"{h}-hop/vanilla/qa_{s}.txt" for h in hops for s in ("train", "dev")]:
        if not (data / f).exists():
            raise ConfigError(f"{data / f} is missing; --data must be a MetaQA folder (see ../shared/data/metaqa/README.md)")
    out.mkdir(parents=True, exist_ok=True)
    timings = Timings(out / "timings.json")

    def step(name: str, done: bool, fn, resumes: Path):
        """Run `fn`: timed (the time of an interrupted run in `resumes` kept), or only to check its settings and
        find it done when its output exists."""
        return fn() if done else timings.run(name, fn, log, resumes=resumes)

    def embed(encoder_run: Path, mentions: Path, name: str) -> None:
        """The mention index of `encoder_run`, embedded again if the one in `mentions` is of another encoder or index."""
        if (mentions / "manifest.json").exists():
            try:
                MentionIndex.load(mentions).check_compatible(SparseIndex.load(out / "index"), encoder_run)
                return
            except ArtifactError as exc:
                log(f"{exc}; embedding again")
        timings.run(name, lambda: build_mention_index(out / "index", encoder_run, mentions, overwrite=True, log=log), log,
                    resumes=partial_dir(mentions))

    if not (out / "index" / "manifest.json").exists():
        timings.run("index", lambda: build_index(data / "wiki.txt", out / "index", kb=data / "kb.txt", overwrite=True,
                                                 log=log), log)
    step("pretrain", (out / "pretrain" / "encoder" / "manifest.json").exists(), lambda: pretrain(
        out / "index", data / "kb.txt", out / "pretrain", PretrainConfig(steps=config.pretrain_steps), log=log),
        out / "pretrain")
    embed(out / "pretrain", out / "mentions", "embed")

    def dev_file(h: int) -> Path:
        return data / f"{h}-hop/vanilla/qa_dev.txt"

    def train_and_eval(tag: str, h: int, mentions: Path, row: Ablation, steps: int, chain: bool,
                       questions: Path | None = None):
        run = out / f"train-{tag}-{h}hop"
        init = out / f"train-{tag}-{h - 1}hop" if chain and h - 1 in hops else None
        train_config = TrainConfig(**{"steps": steps, **row.train})
        step(run.name, (run / "done.json").exists(), lambda: train(  # refuses a run with other settings
            out / "index", mentions, data / f"{h}-hop/vanilla/qa_train.txt", dev_file(h), run,
            model_config=ModelConfig(hops=h, **row.model), follow_config=FollowConfig(**{"min_weight": config.min_weight,
                                                                                         **row.follow}),
            config=train_config, init=init, log=log), run)
        ev = out / (f"eval-{tag}-{h}hop" if questions is None else f"eval-sample-{tag}-{h}hop")
        questions = questions or dev_file(h)
        qtypes = data / f"{h}-hop/qa_dev_qtype.txt"
        qtypes = qtypes if questions == dev_file(h) and qtypes.exists() else None
        made_with = {"model": model_identity(run / "model"), "questions_sha256": file_checksum(questions)["sha256"],
                     "qtypes_sha256": qtypes and file_checksum(qtypes)["sha256"]}
        if train_config.question_entity != "bracketed":  # absent: bracketed (evaluations made before the option)
            made_with["question_entity"] = train_config.question_entity
        if made_again(ev / "metrics.json", made_with, log):
            def run_eval():
                metrics = evaluate(DrKIT.load(out / "index", run / "model"), questions, ev, qtypes, log=log,
                                   question_entity=train_config.question_entity)
                write_json(ev / "metrics.json", {**metrics, "made_with": made_with})
            timings.run(ev.name.replace("eval-", "evaluate-", 1), run_eval, log)
        return json.loads((ev / "metrics.json").read_text())

    results: dict = {"corpus": str(data), "settings": dataclasses.asdict(config), "curriculum": curriculum,
                     "min_weight": config.min_weight, "denominator": DENOMINATOR, "main": {}, "ablations": {},
                     "k_sweep": {}}
    for h in hops:
        results["main"][h] = _summary(train_and_eval("drkit", h, out / "mentions", DRKIT, config.steps, curriculum))
    for h in hops:
        sweep, model = out / f"ksweep-{h}hop.json", out / f"train-drkit-{h}hop" / "model"
        made_with = {"model": model_identity(model), "questions_sha256": file_checksum(dev_file(h))["sha256"],
                     "k": list(config.k_sweep), "sample": config.sweep_questions, "denominator": "all lines"}
        if made_again(sweep, made_with, log):
            timings.run(f"k-sweep-{h}hop", lambda: write_json(sweep, {"made_with": made_with, "points": k_sweep_points(
                out / "index", model, dev_file(h), config.k_sweep, config.sweep_questions)}), log)
        results["k_sweep"][h] = json.loads(sweep.read_text())["points"]
    if config.ablations or config.ablation_rows:
        short = ablation_steps != config.steps
        suffix = f"-{ablation_steps}steps" if short else ""
        samples = {h: dev_sample(dev_file(h), out / f"dev-sample-{h}hop.txt", config.ablation_questions, log=log)
                   for h in hops}
        results["ablation_setup"] = {"steps": ablation_steps, "questions": {
            h: sum(1 for line in samples[h].read_text(encoding="utf-8").splitlines() if line.strip()) for h in hops}}
        results["ablations"]["drkit"] = {"what": "DrKIT" + (f", {ablation_steps} steps like the ablations" if short else ""),
                                         **{h: _summary(train_and_eval("drkit" + suffix, h, out / "mentions", DRKIT,
                                                                       ablation_steps, curriculum, samples[h]))
                                            for h in hops}}
        untrained = out / "pretrain-untrained"
        for name in config.ablation_rows or ABLATIONS:
            row = ABLATIONS[name]
            mentions = out / "mentions"
            if name == "no_pretraining":
                step("pretrain-untrained", (untrained / "encoder" / "manifest.json").exists(), lambda: pretrain(
                    out / "index", data / "kb.txt", untrained, PretrainConfig(steps=0), log=log), untrained)
                mentions = out / "mentions-untrained"
                embed(untrained, mentions, "embed-untrained")
            results["ablations"][name] = {"what": row.what, **{h: _summary(train_and_eval(
                name + suffix, h, mentions, row, ablation_steps, row.curriculum and curriculum, samples[h]))
                for h in hops}}
            (out / "results-partial.json").write_text(json.dumps(results, indent=2) + "\n")
    results["timings_s"] = timings.data
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text("\n".join(results_markdown(results)) + "\n")
    plot_k_sweep(results["k_sweep"], out / "figure3.png")
    for line in results_markdown(results):
        log(line)
    return results


def model_identity(model_dir: Path) -> dict:
    """What an evaluation was made with: the model's weights (their checksum) and settings."""
    manifest = json.loads((Path(model_dir) / "manifest.json").read_text())
    return {"weights_sha256": file_checksum(Path(model_dir) / "model.safetensors")["sha256"],
            "model": manifest["model"], "follow": manifest["follow"]}


def dev_sample(questions: Path, path: Path, n: int | None, seed: int = 0, log=print) -> Path:
    """A seeded sample of `n` lines of a question file, in file order (the file itself when `n` is 0, None
    or not smaller). ``path.json`` says what the sample in `path` was drawn from; it is drawn again when
    that differs (another `n`, seed or question file)."""
    lines = [line for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not n or n >= len(lines):
        return questions
    meta = path.with_suffix(".json")
    made_with = {"questions_sha256": file_checksum(questions)["sha256"], "lines": n, "seed": seed}
    if path.exists():
        before = json.loads(meta.read_text()) if meta.exists() else {}
        if before == made_with:
            return path
        changed = [line.split(":")[0] for line in settings_diff(before, made_with)]
        log(f"{path} was drawn with another {', '.join(changed)}; drawing it again")
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(lines[i] + "\n" for i in sample_rows(len(lines), n, seed)), encoding="utf-8")
    os.replace(tmp, path)
    write_json(meta, made_with)
    return path


def _summary(metrics: dict) -> dict:
    return {"hits@1": round(metrics["hits@1"], 4), "hits@5": round(metrics["hits@5"], 4), "questions": metrics["lines"],
            "not_scored": sum(metrics["not_scored"].values()), **{k: v for k, v in metrics["throughput"].items()}}


def k_sweep_points(index_dir, model_dir, questions, ks=K_SWEEP, n_questions: int = 2000, seed: int = 0) -> list[dict]:
    """Hits@1 and questions/s (batch 64) of one model for several K, with the model's retrieval and
    with the other one (global retrieval searches by exact MIPS), on a seeded sample of `n_questions`
    lines of `questions`. Hits@1 is over all the sampled lines, a line that cannot be scored counting as
    a miss (`DENOMINATOR`, as in `drkit.qa.evaluate`); questions/s is over the lines answered."""
    from drkit.data.questions import load_questions
    from drkit.qa.pipeline import DrKIT
    from drkit.reason.follow import RETRIEVALS
    from drkit.reason.predict import answer_batches, hits
    from drkit.reason.train import question_entity_of

    kit = DrKIT.load(index_dir, model_dir)
    model, vkb = kit.model, kit.vkb
    items = load_questions(questions, vkb.index.entities, vkb.parse, question_entity_of(model.manifest))
    items = [items[i] for i in sample_rows(len(items), n_questions, seed)]
    ok = np.array([r for r, it in enumerate(items) if it.problem is None], dtype=np.int64)
    texts, topics = [items[r].text for r in ok], np.array([items[r].topic for r in ok])
    points = []
    base = model.follow_config
    for retrieval in sorted(RETRIEVALS, key=lambda r: r != base.retrieval):
        for k in ks:
            model.follow_config = dataclasses.replace(base, top_k=k, retrieval=retrieval)
            ids = np.full((len(items), 1), -1, dtype=np.int64)  # an unscorable line: no answer, a miss
            ids[ok], _, seconds = answer_batches(model, vkb, texts, topics, 64, top=1)
            points.append({"retrieval": retrieval, "K": k, "hits@1": round(float(hits(ids, items, 1).mean()), 4),
                           "questions_per_s": round(len(ok) / seconds, 1) if seconds else None,
                           "lines": len(items), "scored": len(ok)})
    model.follow_config = base
    return points


