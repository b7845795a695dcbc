"""The ``drkit`` commands that grow an index without a rebuild: ``add``, ``remove`` and ``compact``
(`drkit.dense.update`, `drkit.index.segments`)."""

from __future__ import annotations

import json
import sys

from drkit.cli.flags import command
from drkit.data.corpus import CORPUS_FORMATS


@command(
    "add",
    help="add documents to an index (and its mention indexes) without a rebuild",
    description="Link, split and score the articles of --corpus as a new segment of the index (TF-IDF with the "
    "IDF frozen at build), embed their mentions with the encoder of each --mentions index, and make them live "
    "by replacing INDEX/CURRENT atomically: a crash leaves the previous version, and models trained before "
    "keep working. Old passages are linked to entities added now only at 'drkit compact'. Prints a JSON "
    "report.",
)
def _add_parser(p) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="sparse index built by 'drkit index'")
    p.add_argument("--corpus", required=True, metavar="PATH", help="the articles to add, in a corpus format of 'drkit index'")
    p.add_argument("--format", choices=CORPUS_FORMATS, default=None,
                   help="corpus format (default: jsonl for *.jsonl, else wikimovies)")
    p.add_argument("--mentions", action="append", default=[], metavar="DIR",
                   help="a mention index of --index whose vectors the new mentions get (repeatable; give every one "
                   "you will load with this index)")
    p.add_argument("--entities", action="append", default=[], metavar="PATH",
                   help="names to add as entities, one per line (repeatable); an index whose entities are its titles "
                   "adds the new articles' titles anyway")
    p.add_argument("--replace", action="store_true",
                   help="an article whose id is in the index already replaces it (default: refused)")
    p.set_defaults(run=_run_add)


@command(
    "remove",
    help="remove documents from an index by corpus id",
    description="Mark the articles with the given corpus ids removed (a new version of INDEX/CURRENT): from the "
    "next load no answer or reasoning chain cites their passages. Every id must be a live article of the index, "
    "else nothing changes. 'drkit compact' reclaims the space.",
)
def _remove_parser(p) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="sparse index")
    p.add_argument("--ids", required=True, metavar="FILE", help="article ids (the corpus's 'id'), one per line")
    p.set_defaults(run=_run_remove)


@command(
    "compact",
    help="merge an index's segments and removals into a new index (as a fresh build would make it)",
    description="Write the live articles of --index as a new index --out: the same arrays as 'drkit index' of "
    "those articles (IDF recomputed, every passage linked again). Each --mentions index is written to its "
    "--mentions-out with the vectors of unchanged passages reused and the rest embedded. --index is left as "
    "it is.",
)
def _compact_parser(p) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="sparse index with added or removed documents")
    p.add_argument("--out", required=True, metavar="DIR", help="the compacted index to write")
    p.add_argument("--mentions", action="append", default=[], metavar="DIR", help="a mention index of --index (repeatable)")
    p.add_argument("--mentions-out", action="append", default=[], metavar="DIR",
                   help="where to write the compacted mention index, one per --mentions, in the same order")
    p.add_argument("--base-corpus", metavar="PATH", default=None,
                   help="the corpus file --index was built from, if it has moved (checked by its sha256)")
    p.add_argument("--overwrite", action="store_true", help="replace --out and --mentions-out if they exist")
    p.set_defaults(run=_run_compact)


def _log(line: str) -> None:
    print(line, file=sys.stderr)


def _run_add(args) -> int:
    from drkit.dense.update import add_documents

    report = add_documents(args.index, args.corpus, args.mentions, args.format, args.entities, args.replace, log=_log)
    print(json.dumps(report))
    return 0


def _run_remove(args) -> int:
    from drkit.dense.update import remove_documents

    print(json.dumps(remove_documents(args.index, args.ids, log=_log)))
    return 0


def _run_compact(args) -> int:
    from drkit.dense.update import compact

    compact(args.index, args.out, args.mentions, args.mentions_out, args.base_corpus, args.overwrite, log=_log)
    print(f"wrote {args.out}" + "".join(f" and {m}" for m in args.mentions_out))
    return 0
