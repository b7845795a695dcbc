"""A reading option off and on, side by side: each fold's reader (RUN/train-reader of a ``drkit reproduce-2wiki``
run) reads the gold passages and drkit's top 5 of the fold's dev questions (``drkit answer``'s other defaults) with
the option (``--option``: ``skip_bridges``, settings "own" / "skip", ``decompose``, "off" / "on", or ``reader_quantize``,
"none" / "int8", timed as ``drkit answer`` times the reader, or ``span_checks``, "off" / "on") off and on;
EM/F1 overall and by type, pooled over the runs given (each question read by the reader that did not train on it),
with 95% bootstrap intervals and the paired sign-flip test of on against off. Writes OUT/<fold>/<row>-<setting>/
(predictions.jsonl, metrics.json) and OUT/<option>.json, OUT/<option>.md.

    python scripts/reader_option_compare.py --runs runs/2wiki-f0 runs/2wiki-f1 --out benchmarks/results/reader-skip-bridges
    python scripts/reader_option_compare.py --option decompose --runs runs/2wiki-f0-eb4 runs/2wiki-f1-eb4 \
        --out benchmarks/results/reader-decompose

With ``--transfer DIR`` (a corpus the readers never trained on, e.g. ../shared/data/musique100), each fold's reader
also reads the top 5 of drkit and BM25 on it (RUN/transfer/retrieve-drkit, RUN/transfer/peer-bm25) both ways:
OUT/<fold>/transfer-<row>-<setting>/ and OUT/<option>-transfer.md (EM and F1; reported, never used to choose).

(``skip_bridges`` was compared before ``decompose`` existed, so with both off; run again it reads with ``decompose``
on, the default.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

import numpy as np

from drkit.qa.answer import AnswerConfig, passages_from_predictions, read_and_score, score
from drkit.qa.stats import paired_test
from drkit.reader.examples import read_passages, read_questions
from drkit.reader.model import Reader
from drkit.util.hardware import configure_threads

ROWS = ("gold", "drkit")
OPTIONS = {"skip_bridges": ("own", "skip"), "decompose": ("off", "on"),  # option -> names of its settings off, on
           "span_checks": ("off", "on"),
           "reader_quantize": ("none", "int8")}
VALUES = {"reader_quantize": ("none", "int8")}  # an option whose settings are not False / True
TIMED = ("reader_quantize",)  # options read with the reader's ms a question at batch 1 (drkit answer's sample of 50)
TYPES = ("comparison", "bridge_comparison", "compositional", "inference")


def settings(option: str):
    """Each setting of the option, off then on: its name and `drkit answer`'s defaults with it."""
    for value, name in zip(VALUES.get(option, (False, True)), OPTIONS[option]):
        yield name, dataclasses.replace(AnswerConfig(qps_sample=50 if option in TIMED else 0), **{option: value})


def read_fold(reader, run: Path, corpus: dict, out: Path, option: str) -> dict:
    """Read the fold's dev questions with each row's passages and each setting; return `load_fold` of what was written."""
    records = read_questions(run / "split" / "dev.jsonl")
    drkit = passages_from_predictions(run / "retrieve-drkit" / "predictions.jsonl", corpus, 5)
    for row in ROWS:
        passages = [[corpus[str(s)] for s in r["supporting"]] if row == "gold" else drkit[r["id"]] for r in records]
        for setting, config in settings(option):
            read_and_score(reader, records, passages, out / f"{row}-{setting}", config, log=print)
    return load_fold(run, out, option)


def read_transfer(reader, run: Path, corpus: dict, records: list[dict], out: Path, option: str) -> list[str]:
    """The transfer corpus's questions (`records`, passages `corpus`) read from drkit's and BM25's top 5 (the fold's
    runs on it; a ranking the run lacks, made with --no-peers, is said and left out), each setting; one markdown
    table line each."""
    lines = []
    for row, ranking in (("drkit", "retrieve-drkit"), ("bm25", "peer-bm25")):
        predictions = run / "transfer" / ranking / "predictions.jsonl"
        if not predictions.is_file():
            print(f"{row} top 5 on the transfer corpus: left out, {predictions} is missing")
            continue
        top = passages_from_predictions(predictions, corpus, 5)
        for setting, config in settings(option):
            m = read_and_score(reader, records, [top[r["id"]] for r in records], out / f"transfer-{row}-{setting}",
                               config, log=print)
            lines.append(f"| {run.name} | {row} top 5 | {setting} | {m['questions']} | {m['em']:.3f} | {m['f1']:.3f} |")
    return lines


def load_fold(run: Path, out: Path, option: str) -> dict:
    """Per row and setting ("drkit-own", ...): the fold's dev questions and the predictions written to OUT for them."""
    records = read_questions(run / "split" / "dev.jsonl")
    return {f"{row}-{setting}": (records, [json.loads(x) for x in open(out / f"{row}-{setting}" / "predictions.jsonl",
                                                                        encoding="utf-8")])
            for row in ROWS for setting in OPTIONS[option]}


def block(found: tuple[list[dict], list[dict]]) -> dict:
    """EM with its interval, F1 and EM by type, as `drkit answer` scores them (`drkit.qa.answer.score`)."""
    s = score(*found)
    return {"questions": s["questions"], "em": s["em"], "em_ci95": s["em_ci95"], "f1": s["f1"],
            "em_by_type": {t: s["by_type"][t]["em"] for t in TYPES if t in s["by_type"]}}


def compare(parts: list[dict], option: str) -> dict:
    """Each row with the option off and on over the folds' questions, and the paired test of EM."""
    table = {}
    off_name, on_name = OPTIONS[option]
    for row in ROWS:
        off, on = ([[x for f in parts for x in f[f"{row}-{setting}"][k]] for k in (0, 1)] for setting in OPTIONS[option])
        test = paired_test(np.array([x["em"] for x in on[1]], float), np.array([x["em"] for x in off[1]], float))
        table[row] = {off_name: block(off), on_name: block(on), "em_paired_test": test,
                      "answers_changed": sum(a["answer"] != b["answer"] for a, b in zip(off[1], on[1]))}
    return table


def write_report(folds: dict, runs: list[Path], out: Path, option: str) -> None:
    """OUT/<option>.json and .md: each fold's comparison and the pooled one."""
    report = {"option": option, "runs": [str(r) for r in runs],
              "folds": {name: compare([f], option) for name, f in folds.items()},
              "pooled": compare(list(folds.values()), option)}
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{option}.json").write_text(json.dumps(report, indent=2) + "\n")
    lines = ["| scope | row | setting | questions | EM [95% CI] | F1 | " + " | ".join(TYPES) + " | answers changed | p (paired) |",
             "|---" * (8 + len(TYPES)) + "|"]
    for scope, table in [*report["folds"].items(), ("pooled", report["pooled"])]:
        for row, t in table.items():
            for setting in OPTIONS[option]:
                b = t[setting]
                lines.append(f"| {scope} | {row} | {setting} | {b['questions']} | {b['em']:.3f} [{b['em_ci95'][0]:.3f}, "
                             f"{b['em_ci95'][1]:.3f}] | {b['f1']:.3f} | "
                             + " | ".join(f"{b['em_by_type'].get(x, float('nan')):.3f}" for x in TYPES)
                             + (f" | {t['answers_changed']} | {t['em_paired_test']['p']:.4f} |" if setting == OPTIONS[option][1] else " | | |"))
    if option in TIMED:  # each fold's reader_ms_per_question_batch1 / reader_ms_per_read_batch1, as drkit answer times them
        lines += ["", "| fold | row | setting | ms a question, batch 1 | ms a question read |", "|---|---|---|---|---|"]
        for run in runs:
            for row in ROWS:
                for setting in OPTIONS[option]:
                    m = json.loads((out / run.name / f"{row}-{setting}" / "metrics.json").read_text())
                    lines.append(f"| {run.name} | {row} | {setting} | {m.get('reader_ms_per_question_batch1')} "
                                 f"| {m.get('reader_ms_per_read_batch1')} |")
    (out / f"{option}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=Path, nargs="+", required=True)
    ap.add_argument("--data", type=Path, default=Path("../shared/data/2wiki"))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--option", choices=sorted(OPTIONS), default="skip_bridges")
    ap.add_argument("--transfer", type=Path, default=None, help="a corpus not trained on (corpus.jsonl, questions.jsonl)")
    args = ap.parse_args()
    configure_threads(0)
    corpus = {p.id: p for p in read_passages(args.data / "corpus.jsonl")}
    transfer = ({p.id: p for p in read_passages(args.transfer / "corpus.jsonl")},
                read_questions(args.transfer / "questions.jsonl")) if args.transfer is not None else None
    folds, lines = {}, ["| fold | passages | setting | questions | EM | F1 |", "|---|---|---|---|---|---|"]
    for run in args.runs:  # each fold's reader loaded once, for its dev questions and the transfer corpus
        reader = Reader.load(run / "train-reader")
        folds[run.name] = read_fold(reader, run, corpus, args.out / run.name, args.option)
        if transfer is not None:
            lines += read_transfer(reader, run, *transfer, args.out / run.name, args.option)
    write_report(folds, args.runs, args.out, args.option)
    if transfer is not None:
        (args.out / f"{args.option}-transfer.md").write_text(f"{args.transfer}\n\n" + "\n".join(lines) + "\n")
        print("\n".join(lines))


if __name__ == "__main__":
    main()
