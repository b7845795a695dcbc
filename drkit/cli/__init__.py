"""The ``drkit`` command. Each stage's flags are generated from its settings dataclass (`drkit.cli.flags`), so
``drkit <stage> --help`` and the Python API always agree. The commands that build the index, the encoder
and the mention index are in `drkit.cli.artifacts`; those of plain questions over title-entity corpora in
`drkit.cli.passages`; the reader's (``train-reader``, ``answer``) in `drkit.cli.reader`; `drkit serve` in
`drkit.cli.serve`."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

# each of these modules registers its commands (drkit.cli.flags.command) when imported
import drkit.cli.artifacts  # noqa: F401
import drkit.cli.passages  # noqa: F401
import drkit.cli.reader  # noqa: F401
import drkit.cli.serve  # noqa: F401
import drkit.cli.update  # noqa: F401
from drkit import __version__
from drkit.cli.flags import COMMANDS, add_config_flags, command, config_from_args
from drkit.cli.kit import load_kit, model_flags
from drkit.errors import DrkitError


@command(
    "train",
    help="train a DrKIT model end to end on MetaQA-format questions (final answers only)",
    description="Train the question encoder and T textual follows over the virtual KB from question/answer pairs: "
    "the loss is -log of the probability Z_T gives to the answer set. Every --eval-every steps the model is "
    "scored on a seeded dev sample and the best one is kept in OUT/model. Writes OUT/train_log.jsonl, "
    "OUT/dev_log.jsonl, OUT/curve.png and checkpoints; rerunning the same command resumes.",
)
def _train_parser(p) -> None:
    from drkit.reason.follow import FollowConfig
    from drkit.reason.model import ModelConfig
    from drkit.reason.train import TrainConfig

    p.add_argument("--index", required=True, metavar="DIR", help="sparse index built by 'drkit index'")
    p.add_argument("--mentions", required=True, metavar="DIR", help="mention index built by 'drkit embed'")
    p.add_argument("--encoder", metavar="DIR", default=None,
                   help="pretrained encoder to start the question encoder from (default: the one that embedded --mentions)")
    p.add_argument("--train", required=True, metavar="PATH", help="training questions, MetaQA format")
    p.add_argument("--dev", required=True, metavar="PATH", help="dev questions for model selection, MetaQA format")
    p.add_argument("--out", required=True, metavar="DIR", help="run directory (resumed if it holds a run with the same settings)")
    p.add_argument("--overwrite", action="store_true", help="delete --out and start again")
    p.add_argument("--init", metavar="DIR", default=None,
                   help="start from a trained model or run with the same mention index (curriculum: a 2-hop model from "
                   "a 1-hop one); hop t copies its hop t, or its last hop where it has fewer (default: the pretrained encoder)")
    add_config_flags(p, ModelConfig, "model")
    add_config_flags(p, FollowConfig, "textual follow")
    add_config_flags(p, TrainConfig, "training")
    p.set_defaults(run=_run_train)


def _run_train(args) -> int:
    from drkit.reason.follow import FollowConfig
    from drkit.reason.model import ModelConfig
    from drkit.reason.train import TrainConfig, train

    path = train(args.index, args.mentions, args.train, args.dev, args.out, args.encoder,
                 config_from_args(args, ModelConfig), config_from_args(args, FollowConfig),
                 config_from_args(args, TrainConfig), overwrite=args.overwrite, init=args.init,
                 log=lambda line: print(line, file=sys.stderr))
    print(f"wrote {path}")
    return 0


@command(
    "evaluate",
    help="score a trained model on a MetaQA-format question file",
    description="Answer every question of FILE and report Hits@1 and Hits@5 (over all lines: a line that cannot "
    "be scored counts as a miss and is reported with its reason), per question type when --qtypes is given, and "
    "questions/s at batch 64 and batch 1. Writes OUT/metrics.json and OUT/predictions.jsonl.",
)
def _evaluate_parser(p) -> None:
    from drkit.qa.evaluate import EvaluateConfig

    model_flags(p)
    p.add_argument("--questions", required=True, metavar="FILE", help="questions, 'text with [entity]<TAB>a1|a2|...' per line (the brackets may be left out)")
    p.add_argument("--qtypes", metavar="FILE", default=None, help="question type of each line of FILE")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for metrics.json and predictions.jsonl")
    add_config_flags(p, EvaluateConfig, "evaluation")
    p.set_defaults(run=_run_evaluate)


def _run_evaluate(args) -> int:
    from drkit.qa.evaluate import EvaluateConfig, evaluate

    kit, query = load_kit(args)
    config = config_from_args(args, EvaluateConfig)
    metrics = evaluate(kit, args.questions, args.out, args.qtypes, config.batch_size, config.qps_sample, query,
                       log=lambda line: print(line, file=sys.stderr), question_entity=config.question_entity)
    print(f"Hits@1 {metrics['hits@1']:.4f}  Hits@5 {metrics['hits@5']:.4f}  ({metrics['scored']:,} of {metrics['lines']:,} "
          f"lines scored); wrote {args.out}/metrics.json")
    return 0


@command(
    "ask",
    help="answer questions and show each answer's reasoning chain",
    description="Answer each QUESTION. The question entity is the bracketed name ('who directed [Kismet]'), or, "
    "for a plain question, the least frequent entity of the index named in it. Prints the answers with their "
    "probabilities and, for each hop, the top entities with their supporting mention in its passage. With a "
    "hop-mixing model (drkit reproduce-2wiki), prints the mixing weights pi, the best entities of each hop and "
    "the best passages; with --reader, the reader's answer from the top passages with its supporting sentences.",
)
def _ask_parser(p) -> None:
    from drkit.qa.ask import AskConfig
    from drkit.reader.reading import ReadConfig

    model_flags(p)
    p.add_argument("questions", nargs="+", metavar="QUESTION")
    add_config_flags(p, AskConfig, "output")
    p.add_argument("--reader", default=None, metavar="DIR", help="a reader (drkit train-reader) that reads the top "
                   "passages of a hop-mixing model and answers with its evidence")
    add_config_flags(p, ReadConfig, "reading (with --reader)", exclude=("passages",))
    p.set_defaults(run=_run_ask)


def _run_ask(args) -> int:
    import json

    from drkit.qa.ask import AskConfig, format_result
    from drkit.qa.pipeline import HOP_MIXING
    from drkit.reader.reading import ReadConfig

    config = config_from_args(args, AskConfig)
    kit, query = load_kit(args, args.reader, config_from_args(args, ReadConfig))

    passages = config.passages if config.passages is not None else (5 if kit.kind == HOP_MIXING else 0)
    failed = 0
    for q in args.questions:
        try:
            result = kit.answer(q, config.top, config.chain_top, query, passages=passages)
        except DrkitError as exc:
            print(f"drkit ask: error: {exc}", file=sys.stderr)
            failed += 1
            continue
        print(json.dumps(result.to_dict(), ensure_ascii=False) if config.json else "\n".join(format_result(result)))
    return 2 if failed else 0


@command(
    "reproduce-metaqa",
    help="run the whole MetaQA pipeline: index, pretrain, embed, train 1/2/3 hops, evaluate on dev",
    description="Run every step of the MetaQA experiment from a MetaQA folder (wiki.txt, kb.txt, N-hop/vanilla/"
    "qa_{train,dev}.txt): index, pretrain, embed, train a model per hop count, evaluate it on dev, and sweep K "
    "for the Hits@1 / questions-per-second plot. Each step is skipped when done and resumed when interrupted, so "
    "rerun the same command after a crash; a step done with other settings is redone (evaluations, samples) or "
    "refused with the setting that differs (training runs). The 2-hop model starts from the 1-hop one and the "
    "3-hop model from the 2-hop one (--no-curriculum: each from the pretrained encoder, as the paper). Writes "
    "OUT/results.md, OUT/results.json, OUT/figure3.png and OUT/timings.json.",
)
def _reproduce_parser(p) -> None:
    from drkit.experiments.metaqa import ReproduceConfig

    p.add_argument("--data", default="../shared/data/metaqa", metavar="DIR", help="MetaQA folder (default: %(default)s)")
    p.add_argument("--out", default="runs/metaqa", metavar="DIR", help="output folder (default: %(default)s)")
    add_config_flags(p, ReproduceConfig, "experiment")
    p.set_defaults(run=_run_reproduce)


def _run_reproduce(args) -> int:
    from drkit.experiments import metaqa

    metaqa.reproduce_metaqa(args.data, args.out, config_from_args(args, metaqa.ReproduceConfig),
                            log=lambda line: print(line, file=sys.stderr))
    print(f"wrote {args.out}/results.md")
    return 0


ORDER = ("corpus", "index", "pretrain", "bootstrap-kb", "embed", "ann", "slot-fill", "add", "remove", "compact", "train", "evaluate", "ask",
         "reproduce-metaqa", "train-mixing", "retrieve", "reproduce-2wiki", "pool-2wiki", "train-reader", "answer",
         "serve")  # as `drkit --help` lists them


def build_parser(only: str | None = None, flags: bool = True) -> argparse.ArgumentParser:
    """The ``drkit`` parser: every command with its help; the flags of every command (`flags`), or of the command
    `only` alone (`main`: another command's flags would import what only it needs, torch among them, and
    ``drkit --help`` would take seconds instead of a fraction of one)."""
    parser = argparse.ArgumentParser(
        prog="drkit",
        description="DrKIT: answer multi-hop questions over a text corpus used as a virtual knowledge base.",
    )
    parser.add_argument("--version", action="version", version=f"drkit {__version__}")
    parser.add_argument("--threads", type=int, default=0, metavar="N", help="torch threads (default 0: every CPU this "
                        "process may use; drkit serve sets its model process's with its own --threads)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in ORDER:  # the same names as COMMANDS (tests/test_cli.py)
        c = COMMANDS[name]
        p = sub.add_parser(name, help=c.help, description=c.description)
        if flags and only in (None, name):
            c.build(p)
    return parser


def command_in(argv: Sequence[str]) -> str | None:
    """The command `argv` names: its first word that is neither an option nor the value of --threads (or of an
    abbreviation of it that argparse takes, "--thr 2")."""
    skip = False
    for word in argv:
        if skip:
            skip = False
        elif len(word) > 2 and "=" not in word and "--threads".startswith(word):
            skip = True
        elif not word.startswith("-"):
            return word
    return None


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    named = command_in(argv)
    args = build_parser(only=named, flags=named in COMMANDS).parse_args(argv)
    if not hasattr(args, "run"):  # argparse found another command than `command_in` did: parse with its flags
        args = build_parser(only=args.command).parse_args(argv)
    try:
        if args.command != "serve":  # serve gives its HTTP side one thread and the model process the rest
            from drkit.util.hardware import configure_threads

            configure_threads(args.threads)
        return args.run(args)
    except DrkitError as exc:
        print(f"drkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        print(f"drkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
