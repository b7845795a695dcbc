"""`build_index`: corpus + entities -> a sparse index artifact (the `drkit index` command).

Reads the corpus and the entities, links and splits passages (`drkit.index.linking`), builds A_{E->M}
and B_{M->E} (`drkit.index.sparse`), computes the statistics (`drkit.index.stats`) and writes one
self-describing directory:

    manifest.json                format, version, config, input checksums, counts, command
    report.json                  statistics and counted warnings
    entities.jsonl               one {"name", "aliases"} per entity id ("kind" too where a recogniser gave one)
    articles.jsonl               one {"key", "title"} per article id
    passage_text.bin             UTF-8 passage texts, concatenated
    passage_text_offsets.npy     (P+1,) int64 byte offsets into passage_text.bin
    passage_article.npy          (P,) int32
    passage_char_start.npy       (P,) int64 offset in its article's content of the passage's slice
    passage_title_chars.npy      (P,) int32 characters of the title line carried in front of that slice
                                 (0 for an article's first passage; see `drkit.index.linking`)
    pieces.npy, piece_offsets.npy  word-piece ids of each passage (no [CLS]/[SEP])
    mentions.npy                 (M, 6) int32: entity, passage, piece_start, piece_end (inclusive),
                                 char_start, char_end (in the passage text); sorted by passage
    entity_passage_indptr/entity_passage/entity_passage_score.npy  EP, the top-mu passages per entity;
                                 A_{E->M} is EP with each passage replaced by its mentions (derived, not
                                 stored: `SparseIndex.A_row`); B_{M->E} is mentions[:, 0]
    df_buckets.npy, df_counts.npy  TF-IDF document frequencies (to vectorise new text the same way)
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Iterable, Sequence, Sized

import numpy as np

from drkit.data.corpus import Article, guess_corpus_format, read_corpus
from drkit.data.kb import EntityTable, entities_from_kb, name_key, read_entity_list, read_kb
from drkit.data.questions import Question, hops_from_path, read_questions
from drkit.data.tokenizer import tokenizer_fingerprint
from drkit.errors import ConfigError, InputFormatError
from drkit.index.linking import EntityLinker, LinkConfig, LinkedCorpus, link_question
from drkit.index.sparse import FORMAT, FORMAT_VERSION, SparseConfig, SparseIndex, sparse_from_counts
from drkit.index.stats import index_counts, kb_coverage, sparse_reachability_sets
from drkit.index.stream import RUN_ARTICLES, StreamedCorpus, link_runs, write_linked
from drkit.index.tfidf import NgramHasher
from drkit.index.title_aliases import PLACES
from drkit.index.title_aliases import title_aliases as find_title_aliases
from drkit.util.artifact import ArtifactWriter, file_checksum
from drkit.util.ray_engine import ENGINES
from drkit.util.warnlog import WarningLog


def parse_question_spec(spec: str) -> tuple[int, Path]:
    """``PATH`` (hops read from an ``N-hop`` folder name) or ``HOPS:PATH``."""
    head, sep, tail = spec.partition(":")
    if sep and head.isdigit():
        if int(head) < 1:
            raise ConfigError(f"the hop count in {spec!r} must be at least 1")
        return int(head), Path(tail)
    hops = hops_from_path(spec)
    if hops is None:
        raise ConfigError(f"cannot tell the hop count of {spec!r}; write it as HOPS:PATH, e.g. 2:{spec}")
    return hops, Path(spec)


def build_index(
    corpus: str | Path,
    out: str | Path,
    kb: str | Path | None = None,
    entities: str | Path | Sequence[str | Path] | None = None,
    corpus_format: str | None = None,
    link_config: LinkConfig = LinkConfig(),
    sparse_config: SparseConfig = SparseConfig(),
    questions: Sequence[str] = (),
    overwrite: bool = False,
    log=print,
    engine: str = "local",
    ray_address: str | None = None,
    shard_articles: int | None = None,
    title_aliases: bool = True,
) -> SparseIndex:
    """Build the sparse index of `corpus` over the entities of `kb`, or of `entities`: an entity list (one
    name per line), ``"titles"`` (every article title is an entity: a title-entity corpus, the paper's
    HotpotQA setting; with `title_aliases`, a title's disambiguated form is also found without its suffix,
    `drkit.index.title_aliases`), ``"found"`` (the names and dates that rules find in the text, `drkit.index.found`),
    ``"ner"`` (those a trained recogniser finds, `drkit.index.ner`), or several of these (their union; e.g.
    ``["titles", "ner"]`` or ``["titles", "extra.txt"]``).

    `engine`: ``local`` (this process; the corpus is read, linked and written in runs of `shard_articles`
    articles, default `RUN_ARTICLES`, so memory does not grow with the corpus's text: `drkit.index.stream`) or
    ``ray``: linking, tokenizing, splitting and n-gram counting run on Ray in runs of `shard_articles` articles
    (default 2,000; `drkit.index.distributed`), on this machine or the cluster at `ray_address`. The index is
    the same, array for array, whatever the engine and the runs."""
    if engine not in ENGINES:
        raise ConfigError(f"engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if shard_articles is not None and shard_articles < 1:
        raise ConfigError(f"shard_articles must be at least 1, got {shard_articles}")
    if engine == "ray":
        from drkit.util.ray_engine import import_ray

        import_ray()  # a missing Ray is said before the corpus is read
    if isinstance(entities, (str, Path)):
        entities = [entities]
    if (kb is None) == (not entities):
        raise ConfigError("give exactly one of kb (subject|relation|object file) and entities (one name per line, "
                          "or 'titles')")
    if not Path(corpus).is_file():
        what = "does not exist" if not Path(corpus).exists() else "is not a regular file (a pipe or a device)"
        raise ConfigError(f"--corpus {corpus} {what}: the corpus is read more than once (entities, linking, its "
                          "checksum, 'drkit compact'), so give a file; save a stream to one first")
    corpus_format = corpus_format or guess_corpus_format(corpus)
    question_specs = [parse_question_spec(s) for s in questions]
    question_sets = [(hops, list(read_questions(path))) for hops, path in question_specs]  # fail early on bad lines
    warnings = WarningLog()
    timings: dict[str, float] = {}
    t0 = time.perf_counter()

    triples = list(read_kb(kb)) if kb is not None else None
    if triples is not None:
        table = entities_from_kb(triples)
    else:
        names: list[str] = []
        aliases: dict[str, set[str]] = {}
        kinds: dict[str, str] = {}
        wanted = {str(e) for e in entities}
        if "ner" in wanted:  # a recogniser that is not installed is said before the corpus is read
            from drkit.index.ner import load_pipeline, ner_entities, pipeline_version

            nlp = load_pipeline()
        titles, texts = [], []
        if wanted & {"titles", "found", "ner"}:  # the corpus read once for all of them; its text kept only if used
            keep_text = bool(wanted & {"found", "ner"})
            for a in read_corpus(corpus, corpus_format, WarningLog()):
                if a.title.strip():
                    titles.append(a.title)
                if keep_text:
                    texts.append(a.text)
        for spec in entities:
            if str(spec) == "titles":
                names += titles
            elif str(spec) == "found":  # names and dates found in the text by rules (drkit.index.found)
                from drkit.index.found import found_entities

                found = found_entities(texts)
                log(f"found {len(found):,} names and dates in the text")
                names += found
            elif str(spec) == "ner":  # names and dates a trained recogniser finds in the text (drkit.index.ner)
                recognised = ner_entities(texts, nlp, log=log)
                log(recognised.summary())
                names += recognised.names
                aliases, kinds = recognised.aliases, recognised.kinds
                recogniser = pipeline_version(nlp)
            else:
                names += list(read_entity_list(spec))
        if title_aliases and "titles" in wanted:
            aliases = with_title_aliases(names, aliases, kinds, titles, link_config.min_name_length)
        table = EntityTable.from_names(names).with_aliases(aliases).with_kinds(kinds)
    if len(table) == 0:
        raise ConfigError(f"no entities in {kb or ', '.join(map(str, entities))}")
    timings["read_entities"] = time.perf_counter() - t0
    articles = read_corpus(corpus, corpus_format, warnings)  # read as it is linked (`drkit.index.stream`)
    if kb is not None:
        inputs = {"corpus": file_checksum(corpus), "kb": file_checksum(kb)}
    else:
        specs = [str(e) if str(e) in ("titles", "found", "ner") else file_checksum(e) for e in entities]
        inputs = {"corpus": file_checksum(corpus), "entities": specs[0] if len(specs) == 1 else specs}
        if "ner" in specs:
            inputs["recogniser"] = recogniser
        if "titles" in specs:
            inputs["title_aliases"] = title_aliases
    inputs.update({f"questions_{i}": file_checksum(p) for i, (_, p) in enumerate(question_specs)})
    sources = [{"file": str(Path(corpus).resolve()), "format": corpus_format, "sha256": inputs["corpus"]["sha256"],
                "articles": None}]  # counted as they are read
    return write_index(articles, table, out, triples=triples, link_config=link_config, sparse_config=sparse_config,
                       corpus_format=corpus_format, inputs=inputs, sources=sources, question_specs=question_specs,
                       question_sets=question_sets, warnings=warnings, timings=timings, overwrite=overwrite, log=log,
                       engine=engine, ray_address=ray_address, shard_articles=shard_articles, label=str(corpus),
                       started=t0)


def with_title_aliases(names: list[str], aliases: dict[str, set[str]], kinds: dict[str, str], titles: Sequence[str],
                       min_length: int, only: set[str] | None = None) -> dict[str, set[str]]:
    """`aliases` with each title's alias (`drkit.index.title_aliases`) but one that is a date or already a form of
    `aliases` ("March 1982 (album)" leaves "March 1982" to the date), or that the recogniser labelled a place
    (`kinds`: "Palo Alto" stays the city's, not "Palo Alto (2013 film)"'s). A name of `names` other than a title
    that is such an alias is taken out of `names` (in place: that title's entity is found there instead, and takes
    the kind the recogniser gave that name most often, `kinds` being looked up by name and alias: on 2Wiki mostly
    right, "PERSON" for "Ian Barry (director)", "WORK_OF_ART" for a film). `only`: the titles given aliases (the
    others of `titles` count only where a form is shared; None: all of them)."""
    from drkit.index.ner import normal_date

    blocked = ({name_key(n) for n, kind in kinds.items() if kind in PLACES}  # places, and forms taken already
               | {name_key(f) for name, forms in aliases.items() for f in (name, *forms)})
    found = {t: a for t, a in find_title_aliases(titles, min_length).items()
             if (only is None or t in only) and name_key(a) not in blocked and normal_date(a) is None}
    if not found:
        return aliases
    keys = {name_key(a) for a in found.values()}
    title_keys = {name_key(t) for t in titles}
    names[:] = [n for n in names if name_key(n) in title_keys or name_key(n) not in keys]
    merged = {name: set(forms) for name, forms in aliases.items()}
    for title, alias in found.items():
        merged.setdefault(title, set()).add(alias)
    return merged


def read_articles(corpus: str | Path, corpus_format: str, warnings: WarningLog) -> list:
    """Every article of `corpus`; an `InputFormatError` when there is none."""
    articles = list(read_corpus(corpus, corpus_format, warnings))
    if not articles:
        raise empty_corpus_error(corpus, corpus_format, warnings)
    return articles


def empty_corpus_error(corpus, corpus_format: str, warnings: WarningLog) -> InputFormatError:
    empty = warnings.count("empty_article")
    return InputFormatError(corpus, None, f"no article to index in this {corpus_format} corpus"
                            + (f" ({empty} read, all without title and text)" if empty else "")
                            + ("; expected a {'id', 'title', 'text'} object per line" if corpus_format == "jsonl"
                               else "; expected articles of numbered lines, '1 <title>' then '2 <text>', ..."))


def write_index(articles: Iterable[Article], table: EntityTable, out: str | Path, *, triples=None,
                link_config: LinkConfig = LinkConfig(), sparse_config: SparseConfig = SparseConfig(),
                corpus_format: str = "jsonl", inputs: dict | None = None, sources: list | None = None,
                question_specs=(), question_sets=(), warnings: WarningLog | None = None,
                timings: dict | None = None, overwrite: bool = False, log=print, engine: str = "local",
                ray_address: str | None = None, shard_articles: int | None = None, label: str = "the corpus",
                extra_manifest: dict | None = None, started: float | None = None,
                copy_files: Sequence[tuple[Path, str]] = ()) -> SparseIndex:
    """Link `articles` over the entities `table` and write the index `out` (the work of `build_index` once its
    inputs are read; `drkit compact` calls it with the articles of a grown index). `sources`: the corpus files
    the articles come from, in order, recorded in the manifest so that a later `drkit compact` can read them
    again (``[{"file", "format", "sha256", "articles", "skip": [article positions left out]}]``); `copy_files`:
    ``(file, name in the index)`` pairs copied into it (the corpus files of a compacted index)."""
    warnings = warnings if warnings is not None else WarningLog()
    timings = timings if timings is not None else {}
    t0 = started if started is not None else time.perf_counter()
    linker = EntityLinker.of_config(table, link_config)
    too_short = [n for n, k in zip(table.names, table.keys) if len(k) < link_config.min_name_length]
    if too_short:
        warnings.add("entity_name_too_short", f"{len(too_short)} names shorter than {link_config.min_name_length} "
                     f"characters are not linked, e.g. {too_short[:5]}", count=len(too_short))
    variants = table.case_variants()
    merged = len(variants)
    if merged:
        example = variants[0]
        warnings.add("entity_names_merged", f"names equal but for case are one entity, e.g. {example}", count=merged)
    out_path = Path(out)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    # each run's n-gram counts (and the Ray shards): a folder of this build's own beside the output
    work = Path(tempfile.mkdtemp(prefix=f".{out_path.name}.link-work-", dir=out_path.parent))
    try:
        with ArtifactWriter(out, FORMAT, FORMAT_VERSION, overwrite=overwrite) as w:
            t = time.perf_counter()
            hasher = None  # the local runs' (Ray's workers hash on their own)
            if engine == "ray":
                from drkit.index.distributed import link_and_count_on_ray

                articles = list(articles)
                if not articles:  # said before Ray starts
                    raise empty_corpus_error(label, corpus_format, warnings)
                runs = link_and_count_on_ray(articles, table, link_config, sparse_config.hash_buckets,
                                             sparse_config.ngram, work / "ray", warnings, shard_articles or 2000,
                                             address=ray_address, log=log)
            else:
                total = len(articles) if isinstance(articles, Sized) else None
                hasher = NgramHasher(sparse_config.hash_buckets, sparse_config.ngram)
                runs = link_runs(articles, linker, link_config, warnings, hasher, entity_of=table.lookup,
                                 run_articles=shard_articles or RUN_ARTICLES, total=total)
            linked = write_linked(runs, w, work, sparse_config.hash_buckets)
            del runs
            if hasher is not None:
                hasher.clear_cache()  # its cache of n-gram buckets is not needed after linking
            if linked.n_articles == 0:
                raise empty_corpus_error(label, corpus_format, warnings)
            if linked.n_passages == 0:
                raise InputFormatError(label, None, f"no passage to index: none of its {linked.n_articles} articles "
                                       f"has a word piece of the tokenizer {link_config.encoder!r}")
            timings["read_and_link"] = time.perf_counter() - t

            t = time.perf_counter()
            matrices = sparse_from_counts(linked.counts(), linked.df, linked.n_passages, linked.mentions, table,
                                          sparse_config)
            if matrices.n_entities_without_terms:
                warnings.add("entity_without_tfidf_terms", "names made only of stopwords or punctuation get an empty "
                             "G(e) and so an empty row of A", count=matrices.n_entities_without_terms)
            timings["tfidf_and_A"] = time.perf_counter() - t
            report = _report(table, linker, linked, matrices, triples, question_specs, question_sets, warnings,
                             timings, t0)
            for s in sources or []:
                if "articles" in s and s["articles"] is None:  # build_index's one corpus, counted as it was read
                    s["articles"] = linked.n_articles
            w.manifest.update(
                config={"link": dataclasses.asdict(link_config), "sparse": dataclasses.asdict(sparse_config),
                        "corpus_format": corpus_format},
                tokenizer=tokenizer_fingerprint(link_config.encoder),
                inputs=inputs or {},
                counts=report["counts"],
                sources=sources or [],
                **(extra_manifest or {}),
            )
            w.write_jsonl("entities.jsonl", table.records(), note="row = entity id")
            write_sparse_arrays(w, matrices)
            w.write_json("report.json", report)
            for file, name in copy_files:
                w.path(name).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(file, w.path(name))
            del linked  # its mentions are mapped from the folder about to be renamed
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for line in format_report(report):
        log(line)
    return SparseIndex.load(out)


def _report(table: EntityTable, linker: EntityLinker, linked: StreamedCorpus, matrices, triples, question_specs,
            question_sets, warnings: WarningLog, timings: dict, t0: float) -> dict:
    """``report.json``: counts, KB coverage, sparse reachability of the question sets, warnings, timings."""
    t = time.perf_counter()
    counts = index_counts(table, linker.n_linkable, linked.n_articles, linked.n_passages, linked.mention_entity,
                          matrices.A_indptr)
    never = len(table) - counts["entities_with_mentions"]
    if never:
        unmentioned = np.setdiff1d(np.arange(len(table)), linked.mention_entity)
        warnings.add("entity_never_mentioned", f"e.g. {[table.names[i] for i in unmentioned[:5]]}", count=never)
    report: dict = {"counts": counts}
    if triples is not None:
        report["kb_coverage"] = kb_coverage(table, triples, linked.mention_entity, linked.mention_passage,
                                            linked.n_passages)
    timings["coverage"] = time.perf_counter() - t
    if question_specs:
        t = time.perf_counter()
        frequency = np.bincount(linked.mention_entity, minlength=len(table))
        question_sets = [(hops, [_link_plain(q, table, linker, frequency) for q in qs]) for hops, qs in question_sets]
        results = sparse_reachability_sets(table, question_sets, matrices.entity_passage_indptr,
                                           matrices.entity_passage, linked.mention_entity, linked.mention_passage,
                                           linked.n_passages)
        report["reachability"] = {}
        for (hops, path), result in zip(question_specs, results):
            result["file"] = str(path)
            report["reachability"][f"{hops}-hop:{path}"] = result
        timings["reachability"] = time.perf_counter() - t
    report["warnings"] = warnings.to_dict()
    timings["total"] = time.perf_counter() - t0
    report["timings_s"] = {k: round(v, 2) for k, v in timings.items()}
    return report


def _link_plain(q: Question, table: EntityTable, linker: EntityLinker, frequency: np.ndarray) -> Question:
    """A plain question (no [brackets]) with its question entity as `VirtualKB.parse` finds it; unchanged
    (topic None, counted as not an entity) when it names none."""
    if q.topic is not None:
        return q
    entity, _ = link_question(q.text, linker, frequency)
    return q if entity is None else replace(q, topic=table.names[entity])


def write_arrays(w: ArtifactWriter, table: EntityTable, linked: LinkedCorpus, m) -> None:
    """The files of an index of `linked` (one run of articles, linked in memory) and its matrices `m`."""
    w.write_jsonl("entities.jsonl", table.records(), note="row = entity id")
    work = w.path(".link-work")  # removed before the artifact is complete
    try:
        write_linked([(linked, None)], w, work, 0)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    write_sparse_arrays(w, m)


def write_sparse_arrays(w: ArtifactWriter, m) -> None:
    w.save_array("entity_passage_indptr", m.entity_passage_indptr)
    w.save_array("entity_passage", m.entity_passage)
    w.save_array("entity_passage_score", m.entity_passage_score)
    w.save_array("df_buckets", m.df_buckets)
    w.save_array("df_counts", m.df_counts)


def format_report(report: dict) -> list[str]:
    """Human-readable lines of an index report."""
    c = report["counts"]
    lines = [
        f"entities {c['entities']:,} (linkable {c['entities_linkable']:,}, with mentions {c['entities_with_mentions']:,})",
        f"articles {c['articles']:,}  passages {c['passages']:,}  mentions {c['mentions']:,}",
        f"A: nnz {c['A_nnz']:,}  mentions per row: mean {c['A_row_mean']:.1f} "
        f"(non-empty rows {c['A_row_mean_nonempty']:.1f}), max {c['A_row_max']:,}, empty rows {c['A_rows_empty']:,}",
    ]
    if "kb_coverage" in report:
        k = report["kb_coverage"]
        lines.append(f"KB coverage: {k['covered']:,} / {k['triples']:,} triples = {k['fraction']:.3f} "
                     "have a passage mentioning subject and object")
    for r in report.get("reachability", {}).values():
        lines.append(f"sparse reachability, {r['hops']} hops, {r['file']}: {r['reachable']:,} / {r['questions']:,} "
                     f"= {r['fraction']:.3f} (topic not an entity: {r['topic_not_an_entity']})")
    for kind, w in report.get("warnings", {}).items():
        lines.append(f"warning: {w['count']:,} x {kind}: {w['examples'][0]}")
    return lines
