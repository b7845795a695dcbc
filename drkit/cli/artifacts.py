"""The ``drkit`` commands that build artifacts before any question: ``corpus`` (a folder of documents as a JSONL
corpus), ``index`` (the sparse index),
``pretrain`` (the mention encoder), ``embed`` (the dense mention index), ``ann`` (a saved IVF-PQ index) and
``slot-fill`` (the encoder's single-hop evaluation)."""

from __future__ import annotations

import argparse
import sys

from drkit.cli.flags import add_config_flags, command, config_from_args
from drkit.data.corpus import CORPUS_FORMATS


@command(
    "corpus",
    help="turn a folder of .txt / .md / .html documents into the JSONL corpus that drkit index reads",
    description="Write every plain-text (.txt), Markdown (.md, .markdown) or HTML (.html, .htm) file below --docs as "
    "passages of a JSONL corpus ({\"id\", \"title\", \"text\"} a line) for drkit index and drkit add: each file is a "
    "page whose title (its entity with --entities titles) is its first '# heading' or <h1>, else its front matter's "
    "title or its <title>, else its file name; its paragraphs are joined into passages of at most --passage-words "
    "words, a longer one cut between sentences, a heading opening a new passage, a table's rows as lines of "
    "'header: cell' pairs ('name: Marie Curie; born: 1867'); ids are '<path below --docs>#<n>'. "
    "Nothing of the text is dropped but markup: the title's heading, Markdown's front matter, horizontal rules, "
    "link addresses and emphasis marks ('[Marie Curie](https://...)' is 'Marie Curie'), list bullets (each item a "
    "paragraph), block quotes' '>', code fences (the code is kept as written), what HTML's <script> and "
    "<style> hold. Files that are not UTF-8 are an error naming the file and line; hidden "
    "files, linked folders and other suffixes are left out and counted.",
)
def _corpus_parser(p) -> None:
    from drkit.data.documents import DocumentsConfig

    p.add_argument("--docs", required=True, metavar="DIR|FILE",
                   help="the folder of documents (read recursively), one document (.txt, .md, .html: ids "
                   "'<file name>#<n>'), or a JSONL file of long documents "
                   "({\"id\", \"title\", \"text\"} a line: each text's paragraphs, parted by blank lines, joined into passages "
                   "'<id>#<n>' as a file's are)")
    p.add_argument("--out", required=True, metavar="FILE", help="the JSONL corpus to write, e.g. corpus.jsonl")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    add_config_flags(p, DocumentsConfig, "passages")
    p.set_defaults(run=_run_corpus)


def _run_corpus(args) -> int:
    from drkit.data.documents import DocumentsConfig, documents_corpus

    log = lambda line: print(line, file=sys.stderr)  # noqa: E731
    done = documents_corpus(args.docs, args.out, config_from_args(args, DocumentsConfig), args.overwrite, log=log)
    left = ", ".join(f"{n} {k}" for k, n in sorted(done["left_out"].items()))
    print(f"wrote {args.out}: {done['passages']:,} passages of {done['documents']:,} documents ({done['pages']:,} "
          f"pages){f'; left out: {left}' if left else ''}. Next: drkit index --corpus {args.out} --entities titles "
          f"--entities ner --out DIR")
    return 0


@command(
    "index",
    help="link a corpus and build the sparse entity->mention index",
    description="Link entities in a corpus, split it into passages and build A_{E->M} (TF-IDF co-occurrence) "
    "and B_{M->E} (mention -> entity) as a self-describing artifact directory, with a stats report.",
)
def _index_parser(p) -> None:
    p.add_argument("--corpus", required=True, metavar="PATH",
                   help="corpus file: WikiMovies-style numbered lines, or JSONL {\"id\", \"title\", \"text\"} per line, "
                   "optionally with \"links\": [{\"start\", \"end\", \"title\"}] (character offsets into text), which "
                   "are then the text's mentions instead of the linker's")
    p.add_argument("--format", choices=CORPUS_FORMATS, default=None,
                   help="corpus format (default: jsonl for *.jsonl, else wikimovies)")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--kb", metavar="PATH", help="KB file, subject|relation|object per line: its subjects and objects are the entities")
    src.add_argument("--entities", metavar="PATH|titles|ner|found", action="append",
                     help="entity list, one name per line; 'titles': every article title is an entity (a corpus whose "
                     "passages are each about their title entity, e.g. Wikipedia); 'ner': the people, places, "
                     "organisations, works and dates that spaCy's trained English recogniser finds in the text (pip "
                     "install \"drkit[ner]\"; dates normalised); 'found': the names (runs of capitalised words) and "
                     "dates that rules find (nothing to install); repeatable: the union, e.g. --entities titles "
                     "--entities ner, or --entities titles --entities more.txt")
    p.add_argument("--title-aliases", action=argparse.BooleanOptionalAction, default=True,
                   help="with --entities titles: a title with a disambiguation suffix, \"Next of Kin (1982 film)\", is "
                   "also found as \"Next of Kin\" where that form has two words or more, no other title is or "
                   "shortens to it, and it is not a date nor (with --entities ner) a place the recogniser found "
                   "(drkit.index.title_aliases); --no-title-aliases: titles only as written. Default: on")
    p.add_argument("--out", required=True, metavar="DIR", help="artifact directory to write")
    p.add_argument("--questions", action="append", default=[], metavar="[HOPS:]PATH",
                   help="MetaQA-format questions for the sparse reachability report (repeatable); the hop count "
                   "is read from an 'N-hop' folder in PATH unless given as HOPS:PATH")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    _engine_flags(p, "linking, splitting and n-gram counting")
    p.add_argument("--shard-articles", type=int, default=None, metavar="N",
                   help="articles linked at a time: the local engine reads, links and writes one run of them at "
                        "a time, never holding the whole corpus (default: 50,000); with --engine ray, the articles "
                        "of a Ray shard (default: 2,000; the driver reads the whole corpus to send it)")
    from drkit.index.linking import LinkConfig
    from drkit.index.sparse import SparseConfig

    add_config_flags(p, LinkConfig, "entity linking and passages")
    add_config_flags(p, SparseConfig, "sparse index")
    p.set_defaults(run=_run_index)


def _engine_flags(p, what: str) -> None:
    g = p.add_argument_group("engine")
    g.add_argument("--engine", choices=("local", "ray"), default="local",
                   help=f"where {what} runs: local (this process) or ray (Ray Data actors, the 'ray' extra; the same "
                        "output as local). Default: local")
    g.add_argument("--ray-address", metavar="ADDR", default=None,
                   help="with --engine ray, the Ray cluster to join (e.g. ray://head:10001 or auto; the build's folders "
                        "must be on storage every node sees); default: RAY_ADDRESS, else Ray started on this machine")


def _run_index(args) -> int:
    from drkit.index.build import build_index
    from drkit.index.linking import LinkConfig
    from drkit.index.sparse import SparseConfig

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
        engine=args.engine,
        ray_address=args.ray_address,
        shard_articles=args.shard_articles,
        title_aliases=args.title_aliases,
    )
    print(f"wrote {args.out} (report: {args.out}/report.json)")
    return 0


@command(
    "pretrain",
    help="pretrain the mention encoder on slot-filling queries made from a KB (without one: the untrained encoder)",
    description="Pretrain the mention encoder f(m) and query encoder g(q) with distant supervision: each KB fact "
    "(e1, R, e2) gives the queries 'e1, R, ?' and 'e2, R^-1, ?', answered by spans of passages that mention both "
    "entities, against shared-entity, shared-relation and random negatives. Writes OUT/encoder (the encoder), "
    "OUT/train_log.jsonl, OUT/heldout.jsonl (held-out queries) and checkpoints; rerunning the same command "
    "resumes from the last checkpoint. --steps 0 saves the encoder as it is before pretraining; without --kb "
    "that is all it does (the encoder for 'drkit embed' when there is no KB to pretrain on).",
)
def _pretrain_parser(p) -> None:
    from drkit.dense.distant import DistantConfig
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig

    p.add_argument("--index", required=True, metavar="DIR", help="sparse index built by 'drkit index'")
    p.add_argument("--kb", metavar="PATH", default=None,
                   help="KB file, subject|relation|object per line (default: none; only --steps 0 then, unless --qa)")
    p.add_argument("--qa", metavar="FILE.jsonl", default=None,
                   help="question-answer pairs over a title-entity corpus, {\"question\", \"supporting\": [corpus ids]} per "
                   "line: each question is a query answered by its supporting passages' title entities, with "
                   "BM25-retrieved negatives (with --kb too: steps alternate between the two)")
    p.add_argument("--out", required=True, metavar="DIR", help="run directory (resumed if it holds a run with the same settings)")
    p.add_argument("--overwrite", action="store_true", help="delete --out and start again")
    add_config_flags(p, PretrainConfig, "pretraining recipe")
    add_config_flags(p, EncoderConfig, "encoder")
    add_config_flags(p, DistantConfig, "distant supervision")
    p.set_defaults(run=_run_pretrain)


def _run_pretrain(args) -> int:
    from drkit.dense.distant import DistantConfig
    from drkit.dense.encoder import EncoderConfig
    from drkit.dense.pretrain import PretrainConfig, pretrain

    pretrain(args.index, args.kb, args.out, config_from_args(args, PretrainConfig),
             config_from_args(args, EncoderConfig), config_from_args(args, DistantConfig), overwrite=args.overwrite,
             log=lambda line: print(line, file=sys.stderr), qa=args.qa)
    return 0


@command(
    "bootstrap-kb",
    help="find more facts for pretraining in a title-entity corpus, by the patterns a KB's own facts teach",
    description="Learn patterns from the KB: in the passages whose title entity is a KB subject, the words before "
    "each mention of another entity (1 to --context of them) and that entity's kind, kept for a relation when "
    "they find at least --min-support of its KB facts at a precision of at least --min-precision. Then read "
    "every passage with a title entity and write the KB's facts followed by every new (title entity, relation, "
    "mentioned entity) the patterns find, as a KB file for 'drkit pretrain --kb', with OUT.json beside it "
    "(the patterns and the counts). See drkit.dense.bootstrap.",
)
def _bootstrap_parser(p) -> None:
    from drkit.dense.bootstrap import BootstrapConfig

    p.add_argument("--index", required=True, metavar="DIR", help="sparse index built by 'drkit index' (entities: titles "
                   "and, for facts about people, places and dates without a page, ner)")
    p.add_argument("--kb", required=True, metavar="PATH", help="KB file, subject|relation|object per line: the facts "
                   "that teach the patterns")
    p.add_argument("--out", required=True, metavar="PATH", help="the KB file to write (and PATH.json)")
    p.add_argument("--skip-articles", metavar="FILE", default=None, help="corpus ids, one per line, whose passages "
                   "find no fact (for example the gold passages of questions to be scored)")
    add_config_flags(p, BootstrapConfig, "patterns")
    p.set_defaults(run=_run_bootstrap)


def _run_bootstrap(args) -> int:
    from drkit.dense.bootstrap import BootstrapConfig, bootstrap_kb, corpus_id_articles

    skip = corpus_id_articles(args.index, args.skip_articles) if args.skip_articles else ()
    bootstrap_kb(args.index, args.kb, args.out, config_from_args(args, BootstrapConfig), skip,
                 log=lambda line: print(line, file=sys.stderr))
    return 0


@command(
    "embed",
    help="embed every mention of a sparse index with a (pretrained) encoder: the dense mention index",
    description="Compute f(m) = [W_st^T H_start ; W_en^T H_end] for every mention of the sparse index, once, "
    "and store the vectors in fp16 as a self-describing artifact (memory-mapped when loaded, searched by exact "
    "or FAISS MIPS). The vectors are written to disk as they are computed (.OUT.partial/); an interrupted run, "
    "started again with the same arguments, resumes where it stopped.",
)
def _embed_parser(p) -> None:
    from drkit.dense.mentions import EmbedConfig

    p.add_argument("--index", required=True, metavar="DIR", help="sparse index built by 'drkit index'")
    p.add_argument("--encoder", required=True, metavar="DIR",
                   help="encoder artifact, or a 'drkit pretrain' run directory (its encoder/ is used)")
    p.add_argument("--out", required=True, metavar="DIR", help="mention index directory to write")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    _engine_flags(p, "the encoder")
    add_config_flags(p, EmbedConfig, "embedding")
    p.set_defaults(run=_run_embed)


def _run_embed(args) -> int:
    from drkit.dense.mentions import EmbedConfig, build_mention_index

    build_mention_index(args.index, args.encoder, args.out, config_from_args(args, EmbedConfig),
                        overwrite=args.overwrite, log=lambda line: print(line, file=sys.stderr), engine=args.engine,
                        ray_address=args.ray_address)
    print(f"wrote {args.out}")
    return 0


@command(
    "ann",
    help="train and save an IVF-PQ index over a mention index (load it with --mips ivfpq --ann DIR)",
    description="Approximate MIPS for large indexes: k-means lists (IVF) over a sample of the mention vectors "
    "and product-quantized codes of every vector (PQ, --pq-m bytes a vector in memory). At question time the "
    "best candidates of the codes are scored again exactly from the memory-mapped fp16 vectors. Saving it "
    "spares training it at every load.",
)
def _ann_parser(p) -> None:
    p.add_argument("--mentions", required=True, metavar="DIR", help="mention index built by 'drkit embed'")
    p.add_argument("--out", required=True, metavar="DIR", help="folder to write")
    p.add_argument("--nlist", type=int, default=None, metavar="INT", help="IVF lists (default: 4 sqrt(mentions))")
    p.add_argument("--pq-m", type=int, default=None, metavar="INT",
                   help="bytes of code a vector; must divide the vector size (default: about one a 8 values)")
    p.add_argument("--train-size", type=int, default=100_000, metavar="INT",
                   help="vectors sampled for k-means (at least 39 a list are used) (default: 100000)")
    p.add_argument("--seed", type=int, default=0, metavar="INT", help="seed of the sample (default: 0)")
    p.add_argument("--overwrite", action="store_true", help="replace --out if it exists")
    p.set_defaults(run=_run_ann)


def _run_ann(args) -> int:
    from drkit.dense.ann import build_ann_index

    build_ann_index(args.mentions, args.out, args.nlist, args.pq_m, args.train_size, args.seed, args.overwrite,
                    log=lambda line: print(line, file=sys.stderr))
    print(f"wrote {args.out}")
    return 0


@command(
    "slot-fill",
    help="evaluate an encoder and its mention index on single-hop slot-filling queries",
    description="For each query (e1, R, ?), score the mentions reachable from e1 through the sparse index by "
    "f(m).g(q), rank entities by their best mention, and report Hits@1 and Hits@5 overall and per relation. "
    "Writes OUT/metrics.json and OUT/predictions.jsonl.",
)
def _slot_fill_parser(p) -> None:
    p.add_argument("--index", required=True, metavar="DIR", help="sparse index")
    p.add_argument("--mentions", required=True, metavar="DIR", help="mention index built by 'drkit embed'")
    p.add_argument("--encoder", required=True, metavar="DIR", help="the encoder the mention index was built with")
    p.add_argument("--queries", required=True, metavar="PATH",
                   help="JSONL queries {text, subject, answers, [relation, inverse]}, e.g. heldout.jsonl of a pretraining run")
    p.add_argument("--out", required=True, metavar="DIR", help="directory for metrics.json and predictions.jsonl")
    p.set_defaults(run=_run_slot_fill)


def _run_slot_fill(args) -> int:
    import json
    from pathlib import Path

    from drkit.dense.encoder import DualEncoder
    from drkit.dense.mentions import MentionIndex, resolve_encoder_dir
    from drkit.dense.slot_filling import evaluate_slot_filling, read_slot_queries
    from drkit.index.sparse import SparseIndex

    index = SparseIndex.load(args.index)
    mentions = MentionIndex.load(args.mentions)
    mentions.check_compatible(index, args.encoder)
    mentions = mentions.for_index(index)
    encoder = DualEncoder.load(resolve_encoder_dir(args.encoder))
    queries = read_slot_queries(args.queries, index)
    metrics, predictions = evaluate_slot_filling(index, mentions, encoder, queries)
    metrics.update(index=str(args.index), mentions=str(args.mentions), encoder=str(args.encoder), queries_file=str(args.queries))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "metrics.json").write_text(json.dumps(metrics, indent=2) + "\n")
    with open(out / "predictions.jsonl", "w", encoding="utf-8") as f:
        for row in predictions:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"{len(queries)} queries: Hits@1 {metrics['hits@1']:.4f}  Hits@5 {metrics['hits@5']:.4f}  "
          f"(answer reachable: {metrics['reachable']:.4f}; random ranking: Hits@1 {metrics['chance_hits@1']:.4f}); "
          f"wrote {out}/metrics.json")
    return 0
