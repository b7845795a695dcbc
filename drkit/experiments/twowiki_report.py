"""The report of ``drkit reproduce-2wiki`` and of ``drkit pool-2wiki``: per-question figures with 95%
bootstrap intervals and paired tests against drkit (`drkit.qa.stats`), the pooling of a fold 0 and a
fold 1 run, ``results.md`` and ``recall_at_k.png``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from drkit.errors import ConfigError
from drkit.experiments.steps import write_json
from drkit.experiments.twowiki_reader import READING_RANKING, write_reading_ranking
from drkit.qa.metrics import KS
from drkit.util.figures import interval, three


def per_question_values(predictions: list[Path], questions: list[Path], ks=(2, 5)) -> dict[str, np.ndarray]:
    """Per scored question (one with gold), R@k and AR@k of the predictions (each file in the order of its
    question file), the files one after another."""
    from drkit.qa.retrieve import read_questions
    from drkit.qa.stats import per_question

    ranked, gold = [], []
    for pred, qs in zip(predictions, questions):
        items, _ = read_questions(qs)
        with open(pred, encoding="utf-8") as f:
            preds = [json.loads(line) for line in f]
        if [p["id"] for p in preds] != [q.id for q in items]:
            raise ConfigError(f"{pred} does not hold the questions of {qs} in their order")
        for p, q in zip(preds, items):
            if q.supporting:
                ranked.append([x["id"] for x in p["passages"]])
                gold.append(q.supporting)
    out = {}
    for k in ks:
        out[f"R@{k}"] = per_question(ranked, gold, k)
        out[f"AR@{k}"] = per_question(ranked, gold, k, all_of=True)
    return out


def intervals(runs: dict[str, Path | list[Path]], questions: list[Path], reference: str = "drkit") -> dict:
    """For each retriever (its retrieval folder(s), each holding predictions.jsonl for the question file of
    the same position), the mean, 95% bootstrap interval and paired test against `reference` (one of `runs`)
    of R@2, R@5, AR@2 and AR@5 (`drkit.qa.stats`); the cells' ``drkit_minus`` is the reference's mean minus
    the retriever's."""
    from drkit.qa.stats import ALPHA, bootstrap_ci, paired_test

    values = {name: per_question_values([Path(d) / "predictions.jsonl" for d in (dirs if isinstance(dirs, list) else [dirs])],
                                        questions) for name, dirs in runs.items()}
    out = {}
    for name, v in values.items():
        out[name] = {}
        for metric, x in v.items():
            lo, hi = bootstrap_ci(x)
            cell = {"mean": round(float(x.mean()), 4), "ci95": [round(lo, 4), round(hi, 4)], "questions": len(x)}
            if name != reference and reference in values:
                test = paired_test(values[reference][metric], x)
                cell.update(drkit_minus=round(test["diff"], 4), p=round(test["p"], 4), differs=test["p"] < ALPHA)
            out[name][metric] = cell
    return out


RETRIEVAL_DIRS = {"drkit": "retrieve-drkit", "bm25": "peer-bm25", "dense": "peer-dense",
                  "single_step": "control-single_step", "ppr": "control-ppr", "drkit_reader": READING_RANKING}


def ranking_metrics(predictions: list[Path], questions: list[Path]) -> dict:
    """R@k and AR@k, overall and by type, and ir_measures' figures (nDCG@10, MRR) of the rankings in `predictions`,
    each file holding the questions of the question file of its position, the files one after another."""
    from drkit.qa.metrics import ir_measures_metrics, recall_metrics
    from drkit.qa.retrieve import read_questions

    items = [q for qs in questions for q in read_questions(qs)[0]]
    ranked = []
    for path in predictions:
        with open(path, encoding="utf-8") as f:
            ranked += [[x["id"] for x in json.loads(line)["passages"]] for line in f]
    if len(ranked) != len(items):
        raise ConfigError(f"{', '.join(map(str, predictions))}: {len(ranked)} rankings for {len(items)} questions")
    gold = [q.supporting or [] for q in items]
    metrics = recall_metrics(ranked, gold, [q.type for q in items])
    metrics["ir_measures"] = ir_measures_metrics({str(i): g for i, g in enumerate(gold) if g},
                                                 {str(i): r for i, r in enumerate(ranked)})
    return metrics


MAY_DIFFER = ("fold", "rows", "peers", "controls", "answers", "transfer", "qps_sample")  # asked for, not what they are


def differing_settings(a: dict, b: dict, absent: dict) -> list[str]:
    """``"name: a / b"`` for each setting two folds' runs differ in that their figures depend on (not `MAY_DIFFER`);
    a setting a run made before it existed lacks is read as `absent` says it meant."""
    a, b = {**absent, **a}, {**absent, **b}  # as `drkit.util.runs.as_saved` reads a saved section
    keys = [k for k in dict.fromkeys([*a, *b]) if k not in MAY_DIFFER]
    return [f"{k}: {a.get(k)} / {b.get(k)}" for k in keys if a.get(k) != b.get(k)]


def pool_folds(runs: list[Path], out: Path, absent: dict | None = None) -> dict:
    """Pool a fold 0 and a fold 1 run of the same split (`drkit pool-2wiki`): every retriever's metrics over
    all the questions, each scored by the model that did not train on it, with intervals and paired tests;
    the entity answers' Hits@1 pooled; each fold's transfer figures side by side. `absent`: what a setting a run
    made before it existed lacks meant (`drkit.experiments.twowiki.TwoWikiConfig.ABSENT_MEANT`)."""
    from drkit.qa.retrieve import read_questions

    found = []
    for r in runs:
        if not (r / "results.json").exists():
            raise ConfigError(f"{r / 'results.json'} is missing: run 'drkit reproduce-2wiki --out {r}' first")
        found.append(json.loads((r / "results.json").read_text()))
    settings = [f["settings"] for f in found]
    if sorted(s["fold"] for s in settings) != [0, 1]:
        raise ConfigError(f"--runs must be a --fold 0 run and a --fold 1 run; got folds {[s['fold'] for s in settings]}")
    differ = differing_settings(settings[0], settings[1], absent or {})
    if differ:
        raise ConfigError(f"--runs were made with other settings ({'; '.join(differ)}); pool two folds of one recipe")
    questions = [r / "split" / "dev.jsonl" for r in runs]
    # the reader's order where each run's last report scored it, made again from the run's current files into
    # OUT (the runs are read, never written)
    reading = None
    if all("drkit_reader" in f.get("retrieval", {}) for f in found):
        made = [write_reading_ranking(r, out / f"reading-ranking-fold{s['fold']}") for r, s in zip(runs, settings)]
        reading = [m.parent for m in made] if all(m is not None for m in made) else None
    names = [n for n, d in RETRIEVAL_DIRS.items() if n != "drkit_reader"
             and all((r / d / "predictions.jsonl").exists() for r in runs)] + (["drkit_reader"] if reading else [])
    names += [f"row:{n}" for n in found[0]["rows"] if all((r / f"retrieve-{n}" / "predictions.jsonl").exists() for r in runs)]
    dirs = {n: [r / (RETRIEVAL_DIRS.get(n) or f"retrieve-{n[4:]}") for r in runs] for n in names}
    if reading:
        dirs["drkit_reader"] = reading
    pooled: dict = {"runs": [str(r) for r in runs], "settings": settings, "retrieval": {}}
    for n, ds in dirs.items():
        pooled["retrieval"][n] = ranking_metrics([d / "predictions.jsonl" for d in ds], questions)
    pooled["intervals"] = intervals(dirs, questions)
    answers: dict[str, list] = {}  # type -> [questions, hits], from the predictions of both folds
    for d, qs in zip(dirs["drkit"], questions):
        with open(d / "predictions.jsonl", encoding="utf-8") as f:
            for line, q in zip(f, read_questions(qs)[0]):
                if q.answers:
                    said = json.loads(line).get("answer")
                    a = answers.setdefault(q.type or "untyped", [0, 0])
                    a[0] += 1
                    a[1] += said is not None and said.strip().casefold() in {x.strip().casefold() for x in q.answers}
    comp = [answers[t] for t in ("compositional", "inference") if t in answers]
    pooled["answers"] = {"by_type": {t: {"questions": n, "hits@1": round(h / n, 4)} for t, (n, h) in answers.items()},
                         "compositional+inference": {"questions": sum(n for n, _ in comp),
                                                     "hits@1": round(sum(h for _, h in comp) / max(1, sum(n for n, _ in comp)), 4)}}
    from drkit.experiments.twowiki_reader import pool_reader

    pooled["reader"] = pool_reader(runs)
    pooled["transfer"] = [{"fold": s["fold"], **{k: f["transfer"][k] for k in ("data", "retrieval", "intervals")}}
                          for s, f in zip(settings, found) if f.get("transfer")]
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "results.json", pooled)
    (out / "results.md").write_text("\n".join(pooled_markdown(pooled)) + "\n", encoding="utf-8")
    return pooled


def transfer_row(name: str) -> str:
    """How a reading row on the transfer corpus is named in results.md."""
    return "gold passages + reader" if name == "gold" else f"{name} top N + reader"


def pooled_markdown(pooled: dict) -> list[str]:
    n = pooled["intervals"]["drkit"]["R@2"]["questions"]
    cols = [f"R@{k}" for k in KS] + [f"AR@{k}" for k in KS]
    lines = [f"# 2WikiMultiHopQA, both folds pooled ({n} questions, each scored by the model that did not train on it)",
             "", f"Runs: {', '.join(pooled['runs'])}.", "", "## Passage retrieval", "",
             "| retriever | " + " | ".join(cols) + " | nDCG@10 | MRR |", "|---|" + "---|" * (len(cols) + 2)]
    for name, m in pooled["retrieval"].items():
        label = "**drkit**" if name == "drkit" else NAMES.get(name, name)
        lines.append(f"| {label} | " + " | ".join(three(m['overall'][c]) for c in cols) + f" | {ranking_cells(m)} |")
    lines += ["", "nDCG@10 and MRR: ir_measures (pytrec_eval) over the same rankings, binary relevance (the gold passages)."]
    lines += [""] + interval_lines(pooled["intervals"], "## Intervals and paired tests")
    a = pooled["answers"]["compositional+inference"]
    lines += ["", "## Entity answers", "", f"drkit, compositional + inference questions: Hits@1 {three(a['hits@1'])} on "
              f"{a['questions']} questions (the last hop's best entity the question does not name)."]
    if pooled.get("reader"):
        from drkit.experiments.twowiki_reader import reader_markdown

        lines += [""] + reader_markdown(pooled["reader"], "## Answers: the reader (answer EM / F1, every question type)")
        for where, rows in pooled["reader"]["transfer"].items():
            lines += ["", f"Transfer ({where}, not trained on): " + "; ".join(
                f"{transfer_row(n)} EM {three(m['em'])} F1 {three(m['f1'])}" for n, m in rows.items() if "em" in m) + "."]
    for t in pooled["transfer"]:
        lines += ["", f"## Transfer: the fold {t['fold']} model, not retrained, on {t['data']}", ""]
        lines += interval_lines(t["intervals"], "")[2:]
    return lines


def ranking_cells(m: dict) -> str:
    """nDCG@10 and MRR of a retriever's metrics as ir_measures computed them ("-" where they were not)."""
    ir = m.get("ir_measures") or {}
    return " | ".join(three(ir[k]) if ir.get(k) is not None else "-" for k in ("nDCG@10", "RR"))


def mean_pi_by_type(predictions: Path, questions: Path) -> dict:
    """The mean mixing weights of each question type (predictions and questions in the same order)."""
    from drkit.experiments.twowiki_data import read_question_records

    types = [r.get("type") or "untyped" for r in read_question_records(questions)]
    sums: dict[str, list] = {}
    with open(predictions, encoding="utf-8") as f:
        for t, line in zip(types, f):
            pi = json.loads(line)["pi"]
            acc = sums.setdefault(t, [0, [0.0] * len(pi)])
            acc[0] += 1
            acc[1] = [a + b for a, b in zip(acc[1], pi)]
    return {t: [round(x / n, 3) for x in v] for t, (n, v) in sorted(sums.items())}


NAMES = {"bm25": "BM25 (bm25s, title + text)", "dense": "dense MiniLM (mean pooled, cosine)",
         "single_step": "control: DrKIT's pretrained encoder, one step, no hops",
         "ppr": "control: personalised PageRank from the linked Z_0, no training",
         "drkit_reader": "drkit + reader: its top N with the passages of a supporting sentence first"}


def interval_lines(found: dict, title: str, reference: str = "drkit") -> list[str]:
    """A table of `intervals`' output: mean [95% interval] per metric, * where the paired test says the
    retriever differs from `reference` (in bold)."""
    metrics = ("R@2", "R@5", "AR@2", "AR@5")
    lines = [title, "", "| retriever | questions | " + " | ".join(metrics) + " |", "|---|---|" + "---|" * len(metrics)]
    for name, cells in found.items():
        row = [f"{three(c['mean'])} {interval(c['ci95'])}" + ("*" if c.get("differs") else "")
               for c in (cells[m] for m in metrics)]
        label = f"**{name}**" if name == reference else NAMES.get(name, name)
        lines.append(f"| {label} | {cells['R@2']['questions']} | " + " | ".join(row) + " |")
    lines += ["", "95% bootstrap intervals over the questions (10,000 resamples); * the paired sign-flip test says "
              f"it differs from {reference} (p < 0.05); without *, no difference is called."]
    return lines


def results_markdown(results: dict) -> list[str]:
    cols = [f"R@{k}" for k in KS] + [f"AR@{k}" for k in KS]
    head = ("| retriever | " + " | ".join(cols) + " | nDCG@10 | MRR | q/s batch 1 | q/s batch 64 | q/s with the entity "
            "answer, batch 1 / 64 |")
    rule = "|" + "---|" * (head.count("|") - 1)  # the separator under `head`, one cell a column
    fold = results.get("settings", {}).get("fold", 0)
    part = "dev split" if not fold else "fold 1: the seeded split's dev part trained on, its train part scored"
    lines = [f"# 2WikiMultiHopQA, {part} ({results['drkit']['overall']['questions']} questions, seeded by type)", "",
             f"DrKIT's encoder: {results['settings']['encoder']} (see `drkit reproduce-2wiki --help`). Split (train / dev "
             "questions): " + ", ".join(f"{t} {c['train']} / {c['dev']}" for t, c in results["split"].items()) + ".",
             "", "## Passage retrieval", "", head, rule]

    def row(name, m):
        o = m["overall"]
        answering = [m.get(f"batch_{b}_questions_per_s_with_answers") for b in (1, 64)]
        return (f"| {name} | " + " | ".join(three(o[c]) for c in cols) + f" | {ranking_cells(m)}"
                + f" | {m.get('batch_1_questions_per_s', '-')} | {m.get('batch_64_questions_per_s', '-')} | "
                + (" / ".join(map(str, answering)) if None not in answering else "-") + " |")

    lines.append(row("**drkit** (hop mixing)", results["drkit"]))
    for name, m in results["retrieval"].items():
        lines.append(row(NAMES.get(name, name), m))
    if results.get("intervals"):
        lines += [""] + interval_lines(results["intervals"], "### Intervals and paired tests")
    if results["rows"]:
        lines += ["", "## Rows (one change each from drkit)", "", head, rule]
        for name, m in results["rows"].items():
            lines.append(row(f"{name}: {m['what']}", m))
    lines += ["", "## By question type (drkit)", "", "| type | questions | R@2 | R@5 | AR@2 | AR@5 |", "|---|---|---|---|---|---|"]
    for t, o in results["drkit"]["by_type"].items():
        lines.append(f"| {t} | {o['questions']} | " + " | ".join(three(o[c]) for c in ("R@2", "R@5", "AR@2", "AR@5")) + " |")
    pi = results["drkit"].get("mean_pi_by_type")
    if pi:
        lines += ["", "Mean mixing weights pi (0, 1, 2 hops) by type: " + "; ".join(f"{t} {v}" for t, v in pi.items())]
    a = results.get("answers")
    if a:
        lines += ["", "## Entity answers (compositional + inference dev questions)", "",
                  "* drkit, plain question, hop count unknown (the last hop's best entity not named in the question, "
                  "the hops started from the entities it names: `drkit retrieve --answer-start named`): Hits@1 "
                  f"{three(a['drkit_mixing_hits@1'])} on {a['questions']} questions",
                  f"* fixed 2-hop DrKIT model handed the bracketed entity (same encoder and mention index): Hits@1 "
                  f"{three(a['fixed_2hop_bracketed_hits@1'])} on {a['fixed_2hop_bracketed_lines']} lines"]
    t = results.get("transfer")
    if t:
        lines += ["", f"## Transfer: the model, not retrained, on {t['data']}", "", head, rule]
        for name, m in t["retrieval"].items():
            lines.append(row("**drkit** (trained on 2Wiki)" if name == "drkit" else NAMES.get(name, name), m))
        lines += [""] + interval_lines(t["intervals"], "### Intervals and paired tests (transfer)")
    if results.get("reader"):
        from drkit.experiments.twowiki_reader import reader_markdown

        lines += [""] + reader_markdown(results["reader"], "## Answers: the reader (answer EM / F1, every question type)")
        lines.append("")
        for name, m in results["reader"].get("transfer", {}).get("rows", {}).items():
            lines.append(f"* transfer ({results['reader']['transfer']['data']}, not trained on): {transfer_row(name)} "
                         f"EM {three(m['em'])} F1 {three(m['f1'])}")
    lines += ["", "## Wall time (s)", "", "| step | s |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in results["timings_s"].items()]
    lines.append(f"| total | {round(sum(results['timings_s'].values()), 1)} |")
    return lines


def plot_recall(results: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    runs = {"drkit": results["drkit"], **results["retrieval"]}
    for i, (name, m) in enumerate(runs.items()):
        for ax, metric in zip(axes, ("R", "AR")):
            ax.plot(KS, [m["overall"][f"{metric}@{k}"] for k in KS], "o-", color=f"C{i}", label=name)
    for ax, metric in zip(axes, ("R@k (share of gold passages in the top k)", "AR@k (all gold passages in the top k)")):
        ax.set_xscale("log")
        ax.set_xticks(KS, [str(k) for k in KS])
        ax.minorticks_off()
        ax.set_xlabel("k")
        ax.set_ylabel(metric)
        ax.set_ylim(0, 1)
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle("2WikiMultiHopQA dev split: passage retrieval")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
