"""The retrievers ``drkit reproduce-2wiki`` scores beside drkit's (the peers BM25 and dense MiniLM, the controls: a
single-step dense retriever of DrKIT's encoder and personalised PageRank), each scored once per set of inputs
(`score`), and the transfer step: the trained model, not retrained, with the same peers and controls on a second
corpus (`transfer_step`)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import TYPE_CHECKING

from drkit.errors import ConfigError
from drkit.experiments.steps import embedded_as, made_again, model_checksums, write_json
from drkit.util.artifact import file_checksum

if TYPE_CHECKING:
    from drkit.experiments.twowiki import TwoWikiConfig


def peers_and_controls(config: TwoWikiConfig, encoder: Path) -> dict:
    """The peers and controls asked for: name -> (output step, make(index dir, mentions dir) -> Retriever,
    the checksums of what else it depends on)."""
    from drkit.index.question_linking import QuestionLinkConfig
    from drkit.index.sparse import SparseIndex
    from drkit.qa.controls import PPRRetriever, SingleStepRetriever
    from drkit.qa.peers import BM25Retriever, DenseRetriever

    out = {}
    if config.peers:
        out["bm25"] = ("peer-bm25", lambda i, m: BM25Retriever.from_index(SparseIndex.load(i)), {})
        out["dense"] = ("peer-dense", lambda i, m: DenseRetriever.from_index(SparseIndex.load(i)), {})
    if config.controls:
        weights = encoder / "encoder" / "model.safetensors"
        out["single_step"] = ("control-single_step", lambda i, m: SingleStepRetriever.load(i, encoder),
                              {"encoder_sha256": file_checksum(weights)["sha256"] if weights.exists() else None})
        # the walk starts from the question linker's Z_0 (drkit's default settings): a change of them is a new walk
        link = QuestionLinkConfig()
        out["ppr"] = ("control-ppr", lambda i, m: PPRRetriever.load(i, link), {"link": dataclasses.asdict(link)})
    return out


def score(name: str, step: str, make, index_dir: Path, questions: Path, ev: Path, retrieve_config, timings, log,
           extra: dict | None = None) -> dict:
    """`run_retrieval` of the retriever `make()` into `ev`, skipped when done with the same inputs: the index's,
    the questions', the retrieval settings and `extra` (the checksums of a model or encoder the retriever uses)."""
    from drkit.index.sparse import SparseIndex
    from drkit.qa.retrieve import run_retrieval

    made_with = {"index_sha256": json.loads((index_dir / "manifest.json").read_text()).get("inputs"),
                 "questions_sha256": file_checksum(questions)["sha256"], "retrieve": dataclasses.asdict(retrieve_config),
                 **(extra or {})}
    if made_again(ev / "metrics.json", made_with, log):
        def run():
            index = SparseIndex.load(index_dir)
            metrics = run_retrieval(make(), index.article_keys, index.article_titles, questions, ev, retrieve_config, log=log)
            write_json(ev / "metrics.json", {**metrics, "made_with": made_with})
        timings.run(step, run, log)
    return json.loads((ev / "metrics.json").read_text())


def transfer_dir(data: Path, transfer: str) -> Path | None:
    """The transfer corpus `--transfer` names: musique100 beside `data` for auto (None when it is not there), none for
    none, else the folder given, which must hold corpus.jsonl and questions.jsonl."""
    if transfer == "none":
        return None
    path = Path(data).parent / "musique100" if transfer == "auto" else Path(transfer)
    if not ((path / "corpus.jsonl").exists() and (path / "questions.jsonl").exists()):
        if transfer == "auto":
            return None
        raise ConfigError(f"--transfer {transfer}: no corpus.jsonl and questions.jsonl there")
    return path


def transfer_step(data: Path, out: Path, encoder: Path, config: TwoWikiConfig, retrieve_config, timings,
                  log) -> tuple[dict, dict]:
    """The trained model, not retrained, on the corpus of `data`: index it (as the 2Wiki corpus), embed its mentions with
    DrKIT's encoder, retrieve; the peers and controls on the same questions. Returns the results section ({"data",
    "retrieval"}) and each retriever's output folder, for the intervals (the caller's, once every row is in)."""
    from drkit.dense.mentions import MentionIndex, build_mention_index, partial_dir
    from drkit.experiments.twowiki_data import index_corpus
    from drkit.qa.drkit_retriever import DrKITRetriever

    t = out / "transfer"
    index_corpus(data / "corpus.jsonl", t / "index", config.entities, config.title_aliases, timings, "transfer-index",
                 log, config.name_parts)
    if (t / "mentions" / "manifest.json").exists():
        embedded_as(MentionIndex.load(t / "mentions"), config)
    else:
        timings.run("transfer-embed", lambda: build_mention_index(t / "index", encoder, t / "mentions",
                                                                  config.embed_config(), overwrite=True, log=log),
                    log, resumes=partial_dir(t / "mentions"))
    questions = data / "questions.jsonl"
    found = {"drkit": score("drkit", "transfer-drkit", lambda: DrKITRetriever.load(
        t / "index", out / "train-drkit", t / "mentions", **retrieve_config.retriever_options()), t / "index", questions,
        t / "retrieve-drkit", retrieve_config, timings, log, model_checksums(out / "train-drkit"))}
    steps = {"drkit": t / "retrieve-drkit"}
    for name, (step, make, extra) in peers_and_controls(config, encoder).items():
        found[name] = score(name, f"transfer-{name}", lambda: make(t / "index", t / "mentions"), t / "index", questions,
                             t / step, retrieve_config, timings, log, extra)
        steps[name] = t / step
    return {"data": str(data), "retrieval": found}, steps
