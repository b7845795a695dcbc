"""The reader's commands: ``train-reader`` and ``answer`` (`drkit.reader`)."""

from __future__ import annotations

import sys

from drkit.cli.flags import add_config_flags, command, config_from_args


@command(
    "train-reader",
    help="train the reader (answer type, span, supporting sentences) on questions with answers and gold passages",
    description="Train the paper's reader: a transformer over the question and N passages with a span / yes / no "
    "classifier, start and end heads and a supporting-sentence head. Training examples come by distant supervision: "
    "each question of --questions (JSONL {\"id\", \"question\", \"answers\", \"supporting\": [corpus ids], "
    "\"evidence\"?}) with its gold passages and BM25 distractors, gold first in 60% of examples; with --kb, one "
    "templated single-hop question per triple whose object is in the subject's passage. A sentence is supporting "
    "when it holds the answer or an evidence object. No dev set is read. Writes OUT/reader (for 'drkit answer'), "
    "OUT/train_log.jsonl and OUT/curve.png; rerunning the same command resumes.",
)
def _train_reader_parser(p) -> None:
    from drkit.reader.examples import OrderConfig
    from drkit.reader.model import ReaderConfig
    from drkit.reader.train import ReaderTrainConfig

    p.add_argument("--corpus", required=True, metavar="FILE.jsonl", help="the corpus, {\"id\", \"title\", \"text\"} per line")
    p.add_argument("--questions", required=True, metavar="FILE.jsonl", help="training questions with answers and supporting")
    p.add_argument("--kb", metavar="FILE", default=None, help="subject|relation|object triples for templated questions "
                   "(training part only)")
    p.add_argument("--more-kb", metavar="FILE", default=None, help="a KB that 'drkit bootstrap-kb' wrote from --kb: "
                   "up to --more-kb-questions of the facts it found give single-hop questions too")
    p.add_argument("--out", required=True, metavar="DIR", help="run directory")
    p.add_argument("--overwrite", action="store_true", help="delete --out and start again")
    add_config_flags(p, ReaderConfig, "reader")
    add_config_flags(p, OrderConfig, "passages")
    add_config_flags(p, ReaderTrainConfig, "training")
    p.set_defaults(run=_run_train_reader)


def _run_train_reader(args) -> int:
    from drkit.reader.examples import OrderConfig
    from drkit.reader.model import ReaderConfig
    from drkit.reader.train import ReaderTrainConfig, train_reader

    path = train_reader(args.corpus, args.questions, args.out, args.kb, config_from_args(args, ReaderConfig),
                        config_from_args(args, OrderConfig), config_from_args(args, ReaderTrainConfig),
                        overwrite=args.overwrite, log=lambda line: print(line, file=sys.stderr), more_kb=args.more_kb)
    print(f"wrote {path}")
    return 0


@command(
    "answer",
    help="answer questions with their evidence: DrKIT retrieves the top passages, the reader reads them",
    description="For each question of FILE (JSONL {\"id\", \"question\"}; with \"answers\" it is scored, with "
    "\"type\" by type, with \"supporting\" the read passages' recall too), retrieve the top --passages passages "
    "with the model, read them with the reader, and write OUT/predictions.jsonl (answer, span/yes/no, supporting "
    "sentences, passages, the model's entity answer) and OUT/metrics.json (answer EM/F1 with 95% bootstrap "
    "intervals, by type, questions/s, the reader's ms a question at batch 1).",
)
def _answer_parser(p) -> None:
    from drkit.cli.kit import model_flags
    from drkit.qa.answer import AnswerConfig

    model_flags(p)
    p.add_argument("--reader", required=True, metavar="DIR", help="a reader trained by 'drkit train-reader' (or its run)")
    p.add_argument("--questions", required=True, metavar="FILE.jsonl", help="questions, one JSON object per line")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for predictions.jsonl and metrics.json")
    add_config_flags(p, AnswerConfig, "reading", exclude=("precision",))  # --precision of the model's flags sets both
    p.set_defaults(run=_run_answer)


def _run_answer(args) -> int:
    import dataclasses

    from drkit.cli.kit import load_kit
    from drkit.qa.answer import AnswerConfig, answer_questions
    from drkit.qa.pipeline import LoadConfig
    from drkit.reader.model import Reader

    kit, _ = load_kit(args)
    config = dataclasses.replace(config_from_args(args, AnswerConfig), precision=config_from_args(args, LoadConfig).precision)
    metrics = answer_questions(kit, Reader.load(args.reader), args.questions, args.out, config,
                               log=lambda line: print(line, file=sys.stderr))
    if "em" in metrics:
        print(f"answer EM {metrics['em']:.4f}  F1 {metrics['f1']:.4f}  ({metrics['questions']:,} questions, "
              f"{metrics['questions_per_s']} questions/s); wrote {args.out}/metrics.json")
    else:
        print(f"answered {metrics['questions']:,} questions; wrote {args.out}/predictions.jsonl")
    return 0
