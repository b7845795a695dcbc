"""The commands of title-entity corpora and plain questions (the paper's HotpotQA setting): ``train-mixing``,
``retrieve`` and ``reproduce-2wiki``."""

from __future__ import annotations

import sys
from pathlib import Path

from drkit.cli.flags import add_config_flags, command, config_from_args
from drkit.errors import ConfigError
from drkit.util.figures import three


@command(
    "train-mixing",
    help="train a hop-mixing model on plain questions with gold passages (JSONL), for drkit retrieve and ask",
    description="Train the paper's HotpotQA-setting model on a title-entity index: Z_0 links the plain question "
    "to entity names, up to --hops textual follows give Z_1..Z_T, and Z* = sum_t pi_t Z_t with pi from a classifier "
    "on the question. Questions are JSONL lines {\"id\", \"question\", \"supporting\": [corpus ids]} (\"answers\", "
    "when they are entities, train the last hop). The loss is multi-label on the supporting passages' title "
    "entities. Writes OUT/model (the model for 'drkit retrieve' and 'drkit ask'), OUT/train_log.jsonl and "
    "OUT/dev_log.jsonl (dev entity R@5 of Z*); a rerun with the same settings finds the run done.",
)
def _train_mixing_parser(p) -> None:
    from drkit.index.question_linking import QuestionLinkConfig
    from drkit.reason.follow import FollowConfig
    from drkit.reason.mixing import MixConfig
    from drkit.reason.model import ModelConfig
    from drkit.reason.train_mixing import MixTrainConfig

    p.add_argument("--index", required=True, metavar="DIR", help="sparse index (drkit index --entities titles ...)")
    p.add_argument("--mentions", required=True, metavar="DIR", help="mention index built by 'drkit embed'")
    p.add_argument("--train", required=True, metavar="FILE.jsonl", help="training questions with 'supporting'")
    p.add_argument("--dev", required=True, metavar="FILE.jsonl", help="dev questions with 'supporting' (learning curve)")
    p.add_argument("--out", required=True, metavar="DIR", help="run directory")
    p.add_argument("--overwrite", action="store_true", help="delete --out and start again")
    p.add_argument("--more-kb", metavar="FILE", default=None, help="a KB (subject|relation|object; e.g. one 'drkit "
                   "bootstrap-kb' grew): up to --more-kb-chains two-hop questions of its chained facts are trained on "
                   "too, written to OUT/kb-chains.jsonl")
    add_config_flags(p, MixConfig, "hop mixing")
    add_config_flags(p, ModelConfig, "question encoder", exclude=("hops",))  # the hop count is --hops of hop mixing
    add_config_flags(p, QuestionLinkConfig, "question linking")
    add_config_flags(p, FollowConfig, "textual follow")
    add_config_flags(p, MixTrainConfig, "training")
    p.set_defaults(run=_run_train_mixing)


def _run_train_mixing(args) -> int:
    from drkit.index.question_linking import QuestionLinkConfig
    from drkit.reason.follow import FollowConfig
    from drkit.reason.mixing import MixConfig
    from drkit.reason.model import ModelConfig
    from drkit.reason.train_mixing import MixTrainConfig, train_mixing

    path = train_mixing(args.index, args.mentions, args.train, args.dev, args.out, config_from_args(args, MixConfig),
                        model_config=config_from_args(args, ModelConfig),
                        follow_config=config_from_args(args, FollowConfig), config=config_from_args(args, MixTrainConfig),
                        link_config=config_from_args(args, QuestionLinkConfig), overwrite=args.overwrite,
                        log=lambda line: print(line, file=sys.stderr), more_kb=args.more_kb)
    print(f"wrote {path}")
    return 0


@command(
    "retrieve",
    help="multi-hop passage retrieval with a hop-mixing model: predictions.jsonl and, with gold, metrics.json",
    description="Rank the passages of a title-entity corpus for each question of a JSONL file ({\"id\", "
    "\"question\"} per line; \"supporting\": gold corpus ids, and \"type\", when present, are used for scoring) "
    "with a trained hop-mixing model: entities ranked by Z* = sum_t pi_t Z_t, each replaced by its page (a page of "
    "several passages divided among them by the question). Writes OUT/predictions.jsonl ({\"id\", \"passages\": "
    "[{\"id\", \"title\", \"score\", \"reached\", \"entity\", \"hop\"}, ...], \"pi\", \"chain\", \"answer\"}; the "
    "passages the model reached, then the question linker's, marked \"reached\": false), OUT/bad_lines.txt and, "
    "when gold is given, OUT/metrics.json (R@k and AR@k for k = 2, 5, 10, 20 up to --top, overall and per type, "
    "unreached passages per top k, questions/s at batch 1 and the batch size). The index may be one the model has never "
    "seen: index and embed a new corpus with the model's encoder, then retrieve.",
)
def _retrieve_parser(p) -> None:
    from drkit.qa.retrieve import RetrieveConfig

    p.add_argument("--index", required=True, metavar="DIR", help="sparse index (drkit index --entities titles ...)")
    p.add_argument("--model", required=True, metavar="DIR", help="hop-mixing model, or the training run holding it")
    p.add_argument("--mentions", metavar="DIR", help="mention index of --index (default: the one the model was trained "
                   "with; give it for another corpus)")
    p.add_argument("--questions", required=True, metavar="FILE.jsonl", help="questions, one JSON object per line")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    add_config_flags(p, RetrieveConfig, "retrieval")
    p.set_defaults(run=_run_retrieve)


def _run_retrieve(args) -> int:
    from drkit.qa.pipeline import DrKIT, LoadConfig
    from drkit.qa.retrieve import RetrieveConfig, run_retrieval

    config = config_from_args(args, RetrieveConfig)
    load = LoadConfig(precision=config.precision, device=config.device, quantize=config.quantize)
    kit = DrKIT.load(args.index, args.model, args.mentions, load, config.retriever_options())
    if kit.retriever is None:
        raise ConfigError(f"{args.model} is a multi-hop model (drkit train): 'drkit retrieve' ranks passages with a "
                          "hop-mixing model (drkit train-mixing, drkit reproduce-2wiki); ask a multi-hop model with "
                          "'drkit ask' or 'drkit evaluate'")
    retriever = kit.retriever
    index = kit.vkb.index
    metrics = run_retrieval(retriever, index.article_keys, index.article_titles, args.questions, args.out,
                            config, log=lambda line: print(line, file=sys.stderr))
    o = metrics.get("overall")
    figures = {name: v for name, v in (o or {}).items() if name.startswith(("R@", "AR@")) and v is not None}
    shown = [name for k in (2, 5) for name in (f"R@{k}", f"AR@{k}") if name in figures] or list(figures)[:2]
    print(f"wrote {args.out}/predictions.jsonl ({metrics['questions']} questions, {metrics['bad_lines']} bad lines)"
          + (f"; {' '.join(f'{name} {three(o[name])}' for name in shown)} ({args.out}/metrics.json)" if shown else ""))
    return 0


@command(
    "reproduce-2wiki",
    help="the HotpotQA-style setting on 2WikiMultiHopQA: index, encoder, embed, train hop mixing, retrieve, peers, "
    "controls, transfer, reader",
    description="Run the paper's HotpotQA setting on a 2WikiMultiHopQA folder (corpus.jsonl, train.jsonl, "
    "kb.txt): split the questions into train and dev (seeded, by type), index the corpus with every title "
    "an entity and the names a recogniser finds (no entity list from the benchmark), pretrain the encoder, embed "
    "the mentions, train the hop-mixing model, retrieve on dev; run the BM25 and dense peers and the two controls "
    "(one step, no hops; PageRank without training) on the same questions; the same model, not retrained, on a "
    "second corpus (--transfer, musique100 by default); train the reader and score answers reading the gold "
    "passages, drkit's and BM25's top N. Ablation rows (--rows) and the bracketed 2-hop entity-answer comparison "
    "(--answers) run only when asked for. Each step is skipped when done. Writes OUT/results.md, OUT/results.json, "
    "OUT/recall_at_k.png, OUT/timings.json.",
)
def _reproduce_2wiki_parser(p) -> None:
    from drkit.experiments.twowiki import TwoWikiConfig

    p.add_argument("--data", default="../shared/data/2wiki", metavar="DIR", help="2wiki folder (default: %(default)s)")
    p.add_argument("--out", default="runs/2wiki", metavar="DIR", help="output folder (default: %(default)s)")
    add_config_flags(p, TwoWikiConfig, "experiment")
    p.set_defaults(run=_run_reproduce_2wiki)


def _run_reproduce_2wiki(args) -> int:
    from drkit.experiments import twowiki

    twowiki.reproduce_2wiki(args.data, args.out, config_from_args(args, twowiki.TwoWikiConfig),
                            log=lambda line: print(line, file=sys.stderr))
    print(f"wrote {args.out}/results.md")
    return 0


@command(
    "pool-2wiki",
    help="pool the two folds of reproduce-2wiki: every question scored once, with intervals and paired tests",
    description="Pool a 'drkit reproduce-2wiki --fold 0' run and a '--fold 1' run of the same split (each "
    "question scored by the model that did not train on it): R@k and AR@k of every retriever over all the "
    "questions, nDCG@10 and MRR (ir_measures), 95% bootstrap intervals and paired sign-flip tests against drkit "
    "for R@2, R@5, AR@2 and AR@5, "
    "the entity answers' Hits@1 and each fold's transfer figures. Writes OUT/results.md and OUT/results.json.",
)
def _pool_2wiki_parser(p) -> None:
    p.add_argument("--runs", required=True, nargs=2, metavar="DIR", help="the fold 0 and fold 1 output folders")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.set_defaults(run=_run_pool_2wiki)


def _run_pool_2wiki(args) -> int:
    from drkit.experiments import twowiki_report
    from drkit.experiments.twowiki import TwoWikiConfig

    twowiki_report.pool_folds([Path(r) for r in args.runs], Path(args.out), absent=TwoWikiConfig.ABSENT_MEANT)
    print(f"wrote {args.out}/results.md")
    return 0
