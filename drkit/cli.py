"""The ``drkit`` command. Each stage's flags are generated from its settings dataclass, so
``drkit <stage> --help`` and the Python API always agree."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from typing import Sequence

from . import __version__
from .corpus import CORPUS_FORMATS
from .errors import DrkitError
from .linking import LinkConfig
from .sparse_index import SparseConfig


def add_config_flags(parser: argparse.ArgumentParser, config_cls, title: str) -> None:
    """One ``--field-name`` flag per field of the frozen dataclass `config_cls`."""
    group = parser.add_argument_group(title)
    for f in dataclasses.fields(config_cls):
        group.add_argument(
            "--" + f.name.replace("_", "-"),
            dest=f"{config_cls.__name__}.{f.name}",
            type=type(f.default),
            default=f.default,
            metavar=type(f.default).__name__.upper(),
            help=f"{f.metadata.get('help', '')} (default: {f.default})",
        )


def config_from_args(args: argparse.Namespace, config_cls):
    prefix = config_cls.__name__ + "."
    return config_cls(**{k[len(prefix):]: v for k, v in vars(args).items() if k.startswith(prefix)})


def _index_parser(sub) -> None:
    p = sub.add_parser(
        "index",
        help="link a corpus and build the sparse entity->mention index",
        description="Link entities in a corpus, split it into passages and build A_{E->M} (TF-IDF co-occurrence) "
        "and B_{M->E} (mention -> entity) as a self-describing artifact directory, with a stats report.",
    )
    p.add_argument("--corpus", required=True, metavar="PATH", help="corpus file")
    p.add_argument("--format", choices=CORPUS_FORMATS, default=None,
                   help="corpus format (default: jsonl for *.jsonl, else wikimovies)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--kb", metavar="PATH", help="KB file, subject|relation|object per line: its subjects and objects are the entities")
    src.add_argument("--entities", metavar="PATH", help="entity list, one name per line")
    p.add_argument("--out", required=True, metavar="DIR", help="artifact directory to write")
    p.add_argument("--questions", action="append", default=[], metavar="[HOPS:]PATH",
                   help="MetaQA-format questions for the sparse reachability report (repeatable); the hop count "
                   "is read from an 'N-hop' folder in PATH unless given as HOPS:PATH")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    add_config_flags(p, LinkConfig, "entity linking and passages")
    add_config_flags(p, SparseConfig, "sparse index")
    p.set_defaults(run=_run_index)


def _run_index(args) -> int:
    from .index import build_index

    build_index(
        corpus=args.corpus,
        out=args.out,
        kb=args.kb,
        entities=args.entities,
        corpus_format=args.format,
        link_config=config_from_args(args, LinkConfig),
        sparse_config=config_from_args(args, SparseConfig),
        questions=args.questions,
        overwrite=args.overwrite,
    )
    print(f"wrote {args.out} (report: {args.out}/report.json)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="drkit",
        description="DrKIT: answer multi-hop questions over a text corpus used as a virtual knowledge base.",
    )
    parser.add_argument("--version", action="version", version=f"drkit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    _index_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except DrkitError as exc:
        print(f"drkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, PermissionError, UnicodeDecodeError) as exc:
        print(f"drkit {args.command}: error: {exc}", file=sys.stderr)
        return 2
