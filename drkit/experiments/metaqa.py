"""The whole MetaQA pipeline in one command (``drkit reproduce-metaqa``).

Steps, each skipped when its output is complete and resumed when it was interrupted (the index,
mention index and evaluations are written atomically; pretraining and training resume from their
checkpoints):

    index -> pretrain -> embed -> train 1/2/3 hops (curriculum: 2 from 1, 3 from 2) -> evaluate on dev
    -> K sweep (Figure 3)
    [--ablations: no curriculum, sum over mentions, lambda = 1, no TF-IDF constraint, no pretraining,
     the paper's 0/1 A; scored on a seeded dev sample]

Outputs in OUT: one directory per step, ``timings.json`` (wall seconds of each step, summed over
sessions), ``results.json`` and ``results.md`` (the table), and ``figure3.png`` (Hits@1 against
questions/s for several K).
"""

from __future__ import annotations

import dataclasses
import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from drkit.dense.pretrain import PRETRAIN_STEPS
from drkit.errors import ConfigError
from drkit.reason.follow import FollowConfig
from drkit.reason.model import ModelConfig
from drkit.reason.train import TrainConfig
from drkit.util.runs import settings_diff
from drkit.util.sampling import sample_rows

HOPS = (1, 2, 3)
K_SWEEP = (1000, 3000, 10000, 30000)
ABLATIONS = {  # name: (what, follow settings, model settings, curriculum)
    "no_curriculum": ("no curriculum: each hop count trained from the pretrained encoder (the paper)", {}, {}, False),
    "sum": ("sum over the mentions of an entity instead of max", {"aggregate": "sum"}, {}, True),
    "lambda1": ("lambda = 1 (no softmax temperature)", {"temperature": 1.0}, {}, True),
    "no_tfidf": ("without the TF-IDF constraint (no Z^T A filter)", {"tfidf": False}, {}, True),
    "no_pretraining": ("without pretraining (index of the untrained encoder)", {}, {}, True),
    "binary_A": ("the paper's 0/1 A (no TF-IDF weighting)", {"tfidf_power": 0.0}, {"learn_tfidf_power": False}, True),
}


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

    def __post_init__(self):
        object.__setattr__(self, "hops", tuple(self.hops))  # argparse gives lists
        object.__setattr__(self, "k_sweep", tuple(self.k_sweep))
        if not self.hops or any(h not in HOPS for h in self.hops) or len(set(self.hops)) != len(self.hops):
            raise ConfigError(f"hops must be distinct hop counts among {HOPS}, got {self.hops}")
        if min(self.steps, self.pretrain_steps, self.sweep_questions, self.ablation_questions,
               self.ablation_steps or 0) < 0 or not self.k_sweep or min(self.k_sweep) < 1:
            raise ConfigError("steps, pretrain_steps, sweep_questions, ablation_steps and ablation_questions must be "
                              ">= 0 and every K of k_sweep >= 1")
        FollowConfig(min_weight=self.min_weight)  # checks it


class Timings:
    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def run(self, name: str, fn, log):
        t = time.perf_counter()
        log(f"== {name}")
        result = fn()
        self.data[name] = round(self.data.get(name, 0.0) + time.perf_counter() - t, 1)
        self.path.write_text(json.dumps(self.data, indent=2) + "\n")
        return result


def reproduce_metaqa(data: str | Path, out: str | Path, config: ReproduceConfig = ReproduceConfig(), log=print) -> dict:
    """The MetaQA pipeline in `out`: index, pretrain, embed, train and evaluate each hop count, K sweep,
    and with `config.ablations` the ablation table (each ablation trained for `ablation_steps`, every row
    including a DrKIT row trained as long, scored on a seeded sample of `ablation_questions` dev lines).

    With `curriculum`, the h-hop model starts from the (h-1)-hop model of the same recipe where that one
    is trained here (a 2-hop model from the 1-hop one, a 3-hop model from the 2-hop one)."""
    from drkit.dense.mentions import build_mention_index
    from drkit.dense.pretrain import PretrainConfig, pretrain
    from drkit.index.build import build_index
    from drkit.qa.evaluate import evaluate
    from drkit.qa.pipeline import DrKIT
    from drkit.reason.train import train

    data, out = Path(data), Path(out)
    hops, curriculum, ablation_steps = config.hops, config.curriculum, config.ablation_steps
    for f in ["wiki.txt", "kb.txt"] + [f"{h}-hop/vanilla/qa_{s}.txt" for h in hops for s in ("train", "dev")]:
        if not (data / f).exists():
            raise ConfigError(f"{data / f} is missing; --data must be a MetaQA folder (see ../shared/data/metaqa/README.md)")
    out.mkdir(parents=True, exist_ok=True)
    timings = Timings(out / "timings.json")

    if not (out / "index" / "manifest.json").exists():
        timings.run("index", lambda: build_index(data / "wiki.txt", out / "index", kb=data / "kb.txt", overwrite=True,
                                                 log=log), log)
    pcfg = PretrainConfig(steps=config.pretrain_steps)
    if not (out / "pretrain" / "encoder" / "manifest.json").exists():
        timings.run("pretrain", lambda: pretrain(out / "index", data / "kb.txt", out / "pretrain", pcfg, log=log), log)
    if not (out / "mentions" / "manifest.json").exists():
        timings.run("embed", lambda: build_mention_index(out / "index", out / "pretrain", out / "mentions",
                                                         overwrite=True, log=log), log)

    def dev_file(h: int) -> Path:
        return data / f"{h}-hop/vanilla/qa_dev.txt"

    def train_and_eval(tag: str, h: int, mentions: Path, follow_kw: dict, model_kw: dict, steps: int | None,
                       chain: bool, questions: Path | None = None):
        run = out / f"train-{tag}-{h}hop"
        init = out / f"train-{tag}-{h - 1}hop" if chain and h - 1 in hops else None
        tcfg = TrainConfig(steps=steps)
        follow_config = FollowConfig(**{"min_weight": config.min_weight, **follow_kw})
        if (run / "done.json").exists():
            changed = settings_diff(json.loads((run / "run.json").read_text()).get("follow") or {},
                                    dataclasses.asdict(follow_config))
            if changed:  # only the follow settings: the paths may be spelt differently from the run's
                raise ConfigError(f"{run} was trained with other follow settings ({'; '.join(changed)}); "
                                  "pass the same settings or use another --out")
        else:
            timings.run(f"train-{tag}-{h}hop", lambda: train(
                out / "index", mentions, data / f"{h}-hop/vanilla/qa_train.txt", dev_file(h), run,
                model_config=ModelConfig(hops=h, **model_kw), follow_config=follow_config, config=tcfg,
                init=init, log=log), log)
        ev = out / (f"eval-{tag}-{h}hop" if questions is None else f"eval-sample-{tag}-{h}hop")
        if not (ev / "metrics.json").exists():
            def run_eval():
                kit = DrKIT.load(out / "index", run / "model")
                qtypes = data / f"{h}-hop/qa_dev_qtype.txt"
                evaluate(kit, questions or dev_file(h), ev,
                         qtypes if questions is None and qtypes.exists() else None, log=log)
            timings.run(ev.name.replace("eval-", "evaluate-", 1), run_eval, log)
        return json.loads((ev / "metrics.json").read_text())

    results: dict = {"corpus": str(data), "settings": dataclasses.asdict(config), "curriculum": curriculum,
                     "min_weight": config.min_weight, "main": {}, "ablations": {}, "k_sweep": {}}
    for h in hops:
        results["main"][h] = _summary(train_and_eval("drkit", h, out / "mentions", {}, {}, config.steps, curriculum))
    for h in hops:
        sweep = out / f"ksweep-{h}hop.json"
        if not sweep.exists():
            timings.run(f"k-sweep-{h}hop", lambda: sweep.write_text(json.dumps(
                k_sweep_points(out / "index", out / f"train-drkit-{h}hop" / "model", dev_file(h),
                               config.k_sweep, config.sweep_questions), indent=2) + "\n"), log)
        results["k_sweep"][h] = json.loads(sweep.read_text())
    if config.ablations:
        short = ablation_steps is not None and ablation_steps != config.steps
        suffix = f"-{ablation_steps}steps" if short else ""
        samples = {h: dev_sample(dev_file(h), out / f"dev-sample-{h}hop.txt", config.ablation_questions or None)
                   for h in hops}
        results["ablation_setup"] = {"steps": config.steps if ablation_steps is None else ablation_steps, "questions": {
            h: sum(1 for line in samples[h].read_text(encoding="utf-8").splitlines() if line.strip()) for h in hops}}
        results["ablations"]["drkit"] = {"what": "DrKIT" + (f", {ablation_steps} steps like the ablations" if short else ""),
                                         **{h: _summary(train_and_eval("drkit" + suffix, h, out / "mentions", {}, {},
                                                                       config.steps if ablation_steps is None else ablation_steps, curriculum,
                                                                       samples[h])) for h in hops}}
        untrained = out / "pretrain-untrained"
        for name, (what, follow_kw, model_kw, chain) in ABLATIONS.items():
            mentions = out / "mentions"
            if name == "no_pretraining":
                if not (untrained / "encoder" / "manifest.json").exists():
                    timings.run("pretrain-untrained", lambda: pretrain(out / "index", data / "kb.txt", untrained,
                                                                        PretrainConfig(steps=0), log=log), log)
                mentions = out / "mentions-untrained"
                if not (mentions / "manifest.json").exists():
                    timings.run("embed-untrained", lambda: build_mention_index(out / "index", untrained, mentions,
                                                                               overwrite=True, log=log), log)
            results["ablations"][name] = {"what": what, **{h: _summary(train_and_eval(
                name + suffix, h, mentions, follow_kw, model_kw, config.steps if ablation_steps is None else ablation_steps,
                chain and curriculum, samples[h])) for h in hops}}
            (out / "results-partial.json").write_text(json.dumps(results, indent=2) + "\n")
    results["timings_s"] = timings.data
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    (out / "results.md").write_text("\n".join(results_markdown(results)) + "\n")
    plot_k_sweep(results["k_sweep"], out / "figure3.png")
    for line in results_markdown(results):
        log(line)
    return results


def dev_sample(questions: Path, path: Path, n: int | None, seed: int = 0) -> Path:
    """A seeded sample of `n` lines of a question file (all of it when `n` is None or not smaller), in file order."""
    lines = [line for line in questions.read_text(encoding="utf-8").splitlines() if line.strip()]
    if n is None or n >= len(lines):
        return questions
    if not path.exists():
        path.write_text("".join(lines[i] + "\n" for i in sample_rows(len(lines), n, seed)), encoding="utf-8")
    return path


def _summary(metrics: dict) -> dict:
    return {"hits@1": round(metrics["hits@1"], 4), "hits@5": round(metrics["hits@5"], 4), "questions": metrics["lines"],
            "not_scored": sum(metrics["not_scored"].values()), **{k: v for k, v in metrics["throughput"].items()}}


def k_sweep_points(index_dir, model_dir, questions, ks=K_SWEEP, n_questions: int = 2000, seed: int = 0) -> list[dict]:
    """Hits@1 and questions/s (batch 64) of one model for several K, with the model's retrieval and
    with the other one (global retrieval searches by exact MIPS), on a seeded sample of questions."""
    from drkit.data.questions import load_questions
    from drkit.qa.pipeline import DrKIT
    from drkit.reason.follow import RETRIEVALS
    from drkit.reason.predict import answer_batches, hits

    kit = DrKIT.load(index_dir, model_dir)
    model, vkb = kit.model, kit.vkb
    items = [it for it in load_questions(questions, vkb.index.entities) if it.problem is None]
    items = [items[i] for i in sample_rows(len(items), n_questions, seed)]
    texts, topics = [it.text for it in items], np.array([it.topic for it in items])
    points = []
    base = model.follow_config
    for retrieval in sorted(RETRIEVALS, key=lambda r: r != base.retrieval):
        for k in ks:
            model.follow_config = dataclasses.replace(base, top_k=k, retrieval=retrieval)
            ids, _, seconds = answer_batches(model, vkb, texts, topics, 64, top=1)
            points.append({"retrieval": retrieval, "K": k, "hits@1": round(float(hits(ids, items, 1).mean()), 4),
                           "questions_per_s": round(len(items) / seconds, 1), "questions": len(items)})
    model.follow_config = base
    return points


def results_markdown(results: dict) -> list[str]:
    hops = sorted(results["main"], key=int)
    head = "| | " + " | ".join(f"{h}-hop" for h in hops) + " |"
    rule = "|---|" + "---|" * len(hops)
    pruning = (f"; restricted retrieval skips passages below {results['min_weight']:g} of a row's best weight"
               if "min_weight" in results else "")
    lines = [f"DrKIT on {results['corpus']} (dev split{pruning}; Hits@1, Hits@5 in brackets)", "", head, rule]
    lines.append("| DrKIT | " + " | ".join(f"{results['main'][h]['hits@1']:.3f} ({results['main'][h]['hits@5']:.3f})"
                                            for h in hops) + " |")
    if results.get("ablations"):
        setup = results.get("ablation_setup", {})
        lines += ["", f"Ablations (training steps: {setup.get('steps', 'as DrKIT')}; scored on a seeded sample of "
                      + ", ".join(f"{n} {h}-hop" for h, n in setup.get("questions", {}).items()) + " dev lines):",
                  "", head, rule]
        for name, row in results["ablations"].items():
            lines.append(f"| {'' if name == 'drkit' else '- '}{row['what']} | " + " | ".join(
                f"{row[h]['hits@1']:.3f} ({row[h]['hits@5']:.3f})" if h in row else "" for h in hops) + " |")
    lines += ["", "Questions/s (exact MIPS, K of the model):", "", head, rule]
    for key in ("batch_64_questions_per_s", "batch_1_questions_per_s"):
        lines.append(f"| {key.replace('_questions_per_s', '').replace('_', ' ')} | "
                     + " | ".join(str(results["main"][h].get(key, "")) for h in hops) + " |")
    if results.get("k_sweep"):
        lines += ["", "K sweep (Hits@1 / questions per s at batch 64):", ""]
        for h in hops:
            pts = results["k_sweep"].get(h, [])
            for retrieval in dict.fromkeys(p.get("retrieval", "") for p in pts):
                lines.append(f"- {h}-hop, {retrieval or 'model'} retrieval: " + ", ".join(
                    f"K={p['K']}: {p['hits@1']:.3f} / {p['questions_per_s']}" for p in pts if p.get("retrieval", "") == retrieval))
    if results.get("timings_s"):
        lines += ["", "Wall time of each step (seconds, summed over sessions):", ""]
        lines += [f"- {k}: {v:,.0f}" for k, v in results["timings_s"].items()]
    return lines


def plot_k_sweep(sweep: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (h, pts) in enumerate(sorted(sweep.items(), key=lambda kv: int(kv[0]))):
        for retrieval, style in (("restricted", "o-"), ("global", "s--"), ("", "o-")):
            sel = [p for p in pts if p.get("retrieval", "") == retrieval]
            if not sel:
                continue
            ax.plot([p["questions_per_s"] for p in sel], [p["hits@1"] for p in sel], style, color=f"C{i}",
                    label=f"{h}-hop" + (f", {retrieval}" if retrieval else ""))
            if retrieval != "restricted":  # restricted points sit on top of each other (K rarely binds)
                for p in sel:
                    ax.annotate(f"K={p['K']}", (p["questions_per_s"], p["hits@1"]), fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("questions/s (batch 64, exact MIPS, 2 CPU cores)")
    ax.set_ylabel("dev Hits@1")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
