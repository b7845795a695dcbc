"""The paper's HotpotQA setting on 2WikiMultiHopQA in one command (``drkit reproduce-2wiki``).

Real Wikipedia passages, each about its title entity; plain questions (no bracketed entity, hop count
unknown); no KB at question time. Steps, each skipped when its output is complete (a training run or an
evaluation made with other settings is refused, naming the setting, or made again):

    split (train/dev, seeded, by type) -> index (--entities titles ner: the titles and what a trained
    recogniser finds in the text; no list made from the benchmark) -> encoders
    (pretrained as DrKIT and the rows need) -> embed -> train the hop-mixing model (and each row) -> retrieve
    on dev -> peers (BM25, dense MiniLM) -> controls (`drkit.qa.controls`: the same pretrained encoder as a
    single-step dense retriever; personalised PageRank from the linked Z_0) -> with ``--answers``, entity
    answers: Hits@1 of the last hop's top entity against a fixed 2-hop model given the bracketed question entity
    (same encoder) ->
    transfer: the trained model, not retrained, on a second corpus (``--transfer``, musique100 beside the
    data by default: index, embed with DrKIT's encoder, retrieve), with the peers and controls on it -> reader:
    trained on the train part, answer EM/F1 reading the gold passages, drkit's and BM25's top N, on dev and on
    the transfer corpus (`drkit.experiments.twowiki_reader`)

DrKIT's encoder (``--encoder``, default ``kb_qa``) is pretrained as the paper does, here on both the KB of
the train split's evidence triples (distant supervision) and the train split's questions with their gold
passages (BM25-retrieved negatives, `drkit.dense.qa_supervision`): `pretrain_steps` steps alternating between the two.
Ablation rows (``--rows``, none by default), each a hop-mixing model trained and scored like the main one but for
one change:

* ``fixed_0``, ``fixed_1``, ``fixed_2``: no mixing, Z_0 (rescored) / Z_1 / Z_2 alone;
* ``remove_named``: the entities the question names verbatim removed from every hop's output, as MetaQA's
  question entity is (Z_0 keeps them);
* ``links``, ``both``: the link-graph A, or both A's, instead of the TF-IDF A (the default: see results);
* ``no_pretraining``, ``kb_pretrained``, ``qa_pretrained``, ``kb_qa_pretrained``: the base MiniLM, and the
  paper's three ways of pretraining the encoder (the one that is DrKIT's own is DrKIT's row, not trained
  twice).

Every retriever's R@2, R@5, AR@2 and AR@5 get a 95% bootstrap interval over the questions, and a paired
sign-flip test against drkit (`drkit.qa.stats`). ``drkit pool-2wiki`` pools the two folds (``--fold 0``
and ``--fold 1`` runs) so that every question is scored once, by the model that did not train on it.

Outputs in OUT: one directory per step, ``timings.json`` (wall seconds of each step), ``results.json``,
``results.md`` and ``recall_at_k.png`` (R@k and AR@k against k for drkit and the peers).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path

from drkit.data.tokenizer import DEFAULT_ENCODER, encoder_name
from drkit.dense.quantize import QUANTIZE
from drkit.errors import ConfigError
from drkit.experiments.steps import Timings, embedded_as, jsonable, made_again, model_checksums, write_json
from drkit.experiments.twowiki_answers import answers_step
from drkit.experiments.twowiki_report import intervals, mean_pi_by_type, plot_recall, ranking_metrics, results_markdown
from drkit.experiments.twowiki_retrievers import peers_and_controls, score, transfer_dir, transfer_step
from drkit.reason.follow import FollowConfig
from drkit.reason.mixing import MixConfig
from drkit.util.artifact import file_checksum


@dataclass(frozen=True)
class Row:
    what: str
    mix: dict = field(default_factory=dict)  # MixConfig fields
    follow: dict = field(default_factory=dict)  # FollowConfig fields
    encoder: str | None = None  # base | kb | qa | kb_qa: the base MiniLM, or pretrained on the KB, QA pairs,
    # both in turn; None: DrKIT's


ENCODERS = ("base", "kb", "qa", "kb_qa")
BOOTSTRAP_USES = ("retriever", "reader", "pretrain")  # where --bootstrap's facts go
SHARED_ROWS = ("fixed_0", "fixed_1", "fixed_2", "remove_named", "links", "both")  # the rows of DrKIT's own encoder
DRKIT = Row("DrKIT: hop mixing over 0..2 hops, TF-IDF A")
ROWS = {
    "fixed_0": Row("no mixing: Z_0 alone (the linked entities, rescored)", mix={"fixed": 0}),
    "fixed_1": Row("no mixing: Z_1 alone (1 hop)", mix={"fixed": 1}),
    "fixed_2": Row("no mixing: Z_2 alone (2 hops)", mix={"fixed": 2}),
    "remove_named": Row("the entities the question names removed from every hop's output (Z_0 keeps them)",
                        mix={"remove_named": True}),
    "links": Row("the paper's link-graph A instead of the TF-IDF A", follow={"adjacency": "links"}),
    "both": Row("both A's (TF-IDF and link graph)", follow={"adjacency": "both"}),
    "no_pretraining": Row("the base MiniLM encoder, not pretrained", encoder="base"),
    "kb_pretrained": Row("encoder pretrained on the KB of the train split's evidence triples", encoder="kb"),
    "qa_pretrained": Row("encoder pretrained on the train split's questions and gold passages (BM25 negatives)",
                         encoder="qa"),
    "kb_qa_pretrained": Row("encoder pretrained on both, in turn", encoder="kb_qa"),
}


@dataclass(frozen=True)
class TwoWikiConfig:
    """Settings of ``drkit reproduce-2wiki``."""

    dev_fraction: float = field(default=0.5, metadata={"help": "share of the questions (per type) kept for dev"})
    split_seed: int = field(default=0, metadata={"help": "seed of the train/dev split"})
    fold: int = field(default=0, metadata={"help": "0: train on the split's train part and score its dev part; 1: the "
                                                   "parts swapped (with fold 0, a two-fold cross-fit that scores every "
                                                   "question once)", "type": int, "choices": (0, 1)})
    entities: tuple = field(default=("titles", "ner"), metadata={
        "help": "the index's entities: titles (every title), ner (also the names and dates a trained recogniser "
                "finds in the text, drkit.index.ner: the answers that have no page), found (those rules find, "
                "drkit.index.found); never a list made from the benchmark", "nargs": "+", "type": str,
        "choices": ("titles", "ner", "found")})
    title_aliases: bool = field(default=True, metadata={"help": "with titles: \"Next of Kin (1982 film)\" also found as "
                                                                "\"Next of Kin\" where that names one page (drkit index)"})
    name_parts: bool = field(default=False, metadata={"help": "with ner: a person named by one word is the person of "
                                                             "the article whose longer name, given earlier in it, has "
                                                             "that word first or last (drkit index --name-parts; off: "
                                                             "no gain measured, docs/entities.md)"})
    bootstrap: tuple = field(default=(), metadata={
        "help": "where the facts found in the corpus by the patterns the train split's KB teaches (drkit "
                "bootstrap-kb, never in a dev question's gold passage) are used beside the KB's own: retriever (up "
                "to 1,000 two-hop questions of their chains in hop-mixing training, train-mixing --more-kb: "
                "compositional Hits@1 +0.03, R@2 -0.01, AR@5 +0.01 on both folds, docs/results-2wiki.md), reader "
                "(up to 1,000 single-hop questions of them in the reader's training: answer EM 0.658 -> 0.679 on "
                "both folds pooled, no difference called, at twice the reader's training time, docs/reader.md), "
                "pretrain (the mention encoder's pretraining KB: no gain measured); default none",
        "nargs": "*", "type": str, "choices": BOOTSTRAP_USES})
    steps: int = field(default=150, metadata={"help": "optimizer steps of hop-mixing training (batch 16)"})
    encoder: str = field(default="kb_qa", metadata={"help": "DrKIT's encoder: base (MiniLM, not pretrained) or "
                                                            "pretrained on kb, qa or kb_qa (both in turn)",
                                                    "choices": ENCODERS})
    pretrain_steps: int = field(default=100, metadata={"help": "pretraining steps of each pretrained encoder (kb_qa "
                                                                "alternates KB and QA steps)"})
    pretrain_attention_dropout: bool = field(default=False, metadata={
        "help": "pretraining's dropout on the attention probabilities, as drkit pretrain --attention-dropout (off by "
                "default here since 2026-12-07, in the models trained from the encoder too: on the AVX2 machine "
                "pretraining 13-18% faster, hop mixing 11%, both folds' retrieval as before, docs/timings.md)"})
    answer_steps: int = field(default=300, metadata={"help": "training steps of the fixed 2-hop bracketed model "
                                                             "(DrKIT's encoder)"})
    rows: tuple = field(default=(), metadata={
        "help": f"ablation rows beside DrKIT, of {', '.join(ROWS)} (default: none; each row trains and scores a "
                f"model of its own, 2 to 4 minutes on 2 cores, {' '.join(SHARED_ROWS)} all of them about 18; an "
                "encoder row also pretrains and embeds an encoder of its own, about 8 minutes more)",
        "nargs": "*", "type": str})
    peers: bool = field(default=True, metadata={"help": "run BM25 and dense MiniLM on the same dev questions"})
    controls: bool = field(default=True, metadata={"help": "run the controls: DrKIT's pretrained encoder as a "
                                                           "single-step dense retriever, and personalised PageRank"})
    transfer: str = field(default="auto", metadata={
        "help": "a second corpus folder (corpus.jsonl, questions.jsonl) the trained model is run on without "
                "retraining; auto: musique100 beside --data when it is there; none: skip"})
    answers: bool = field(default=False, metadata={"help": "compare the entity answers with those of a fixed 2-hop model "
                                                           "given the bracketed question entity (about 4 minutes)"})
    embed_quantize: str = field(default="int8", metadata={
        "help": "how the mention encoder embeds both corpora: int8 (its transformer's Linear layers as int8 dynamic "
                "quantisation, on the CPU: about 1.5x faster, retrieval unchanged on both folds, docs/precision.md) "
                "or none (fp32, or as --device and the machine choose)", "choices": QUANTIZE})
    qps_sample: int = field(default=100, metadata={"help": "questions timed one at a time (batch-1 questions/s)"})
    reader: bool = field(default=True, metadata={"help": "train the reader on the train part and score answer EM/F1 "
                                                         "reading the gold passages, drkit's and BM25's top N"})
    reader_epochs: int = field(default=2, metadata={"help": "the reader's training epochs"})
    reader_passages: int = field(default=5, metadata={"help": "passages the reader reads (N)"})
    reader_layers: int = field(default=0, metadata={"help": "transformer layers of the reader, the base's first ones "
                                                            "(0: all)"})
    reader_base: str = field(default=DEFAULT_ENCODER, metadata={
        "help": "the reader's pretrained transformer: the packaged all-MiniLM-L6-v2, or a folder with config.json, "
                "safetensors weights and tokenizer (such as all-mpnet-base-v2: docs/reader.md)"})
    reader_distill: int = field(default=0, metadata={
        "help": "after the reader, train a second one of this many transformer layers, taught by it (drkit train-reader "
                "--teacher: it starts from the trained reader's layers and learns from its outputs beside the "
                "labels), and read every row with the second one (0: none)"})
    reader_distill_epochs: int = field(default=0, metadata={
        "help": "the taught reader's training epochs (0: --reader-epochs); it starts from the trained reader's "
                "layers and heads, so it may need fewer"})
    reader_max_pieces: int = field(default=512, metadata={"help": "word pieces the reader is trained on (question and "
                                                                  "passages); it reads at most 320 of them"})
    # what a run made before a setting existed meant by its absence (`drkit pool-2wiki` compares the folds so)
    ABSENT_MEANT = {"reader_layers": 0, "reader_distill": 0, "reader_distill_epochs": 0, "reader_base": DEFAULT_ENCODER,
                    "reader_max_pieces": 512, "embed_quantize": "none", "title_aliases": False, "bootstrap": (),
                    "pretrain_attention_dropout": True}

    def __post_init__(self):
        try:
            self.reader_config()
        except ConfigError as e:
            raise ConfigError(f"the reader's settings (--reader-layers, --reader-max-pieces): {e}") from None
        try:  # a folder with a tokenizer, said before any step runs; one spelling, so that folds pool together
            object.__setattr__(self, "reader_base", encoder_name(self.reader_base))
        except ConfigError as e:
            raise ConfigError(f"reader_base (--reader-base): {e}") from None
        unknown = [r for r in self.rows if r not in ROWS]
        if unknown:
            raise ConfigError(f"unknown rows {unknown}; choose from {', '.join(ROWS)}")
        if self.encoder not in ENCODERS:
            raise ConfigError(f"encoder must be one of {ENCODERS}, got {self.encoder!r}")
        if "titles" not in self.entities or not set(self.entities) <= {"titles", "ner", "found"}:
            raise ConfigError(f"entities must be titles, and ner or found beside it; got {list(self.entities)}")
        if not set(self.bootstrap) <= set(BOOTSTRAP_USES):
            raise ConfigError(f"bootstrap takes {', '.join(BOOTSTRAP_USES)}, got {list(self.bootstrap)}")
        if not 0 < self.dev_fraction < 1:
            raise ConfigError(f"dev_fraction must be in (0, 1), got {self.dev_fraction}")
        if self.reader_distill < 0:
            raise ConfigError(f"reader_distill must be 0 (none) or a number of layers, got {self.reader_distill}")
        if self.reader_distill_epochs < 0:
            raise ConfigError(f"reader_distill_epochs must be 0 (--reader-epochs) or more, got {self.reader_distill_epochs}")
        if self.embed_quantize not in QUANTIZE:
            raise ConfigError(f"embed_quantize must be 'none' or 'int8', got {self.embed_quantize!r}")

    def embed_config(self):
        """How the mentions of both corpora are embedded (`drkit.dense.embedding.EmbedConfig`): int8 where the
        encoder would run on the CPU; on a GPU (``--device auto`` finding one) in its own precision there."""
        from drkit.dense.embedding import EmbedConfig
        from drkit.util.hardware import resolve_device

        return EmbedConfig(quantize=self.embed_quantize if resolve_device("auto").type == "cpu" else "none")

    def reader_config(self):
        """The reader's `drkit.reader.model.ReaderConfig`."""
        from drkit.reader.model import ReaderConfig

        return ReaderConfig(base=self.reader_base, max_pieces=self.reader_max_pieces, layers=self.reader_layers)


def reproduce_2wiki(data: str | Path, out: str | Path, config: TwoWikiConfig = TwoWikiConfig(), log=print) -> dict:
    """Run the experiment (module docstring) in `out`; return the results written to ``results.json``."""
    from drkit.dense.mentions import MentionIndex, build_mention_index, partial_dir
    from drkit.dense.pretrain import PretrainConfig, pretrain
    from drkit.experiments.twowiki_data import index_corpus, split_questions, train_kb
    from drkit.index.sparse import SparseIndex
    from drkit.qa.drkit_retriever import DrKITRetriever
    from drkit.qa.retrieve import RetrieveConfig, run_retrieval
    from drkit.reason.train_mixing import MixTrainConfig, train_mixing

    data, out = Path(data), Path(out)
    for f in ("corpus.jsonl", "train.jsonl"):
        if not (data / f).exists():
            raise ConfigError(f"{data / f} is missing; --data must be a 2WikiMultiHopQA folder "
                              "(see ../shared/data/2wiki/README.md)")
    out.mkdir(parents=True, exist_ok=True)
    timings = Timings(out / "timings.json")
    split = out / "split"
    split_questions(data / "train.jsonl", split, config.dev_fraction, config.split_seed, swap=config.fold == 1)
    train_file, dev_file = split / "train.jsonl", split / "dev.jsonl"
    index_corpus(data / "corpus.jsonl", out / "index", config.entities, config.title_aliases, timings, "index", log,
                 config.name_parts)
    index = SparseIndex.load(out / "index")
    retrieve_config = RetrieveConfig(qps_sample=config.qps_sample, answers=True)

    train_kb(train_file, out / "kb-train.txt")
    if config.bootstrap:
        _bootstrap(out, index, dev_file, timings, log)

    def encoder_of(row: Row) -> str:
        return row.encoder or config.encoder

    wanted = [config.encoder] + [encoder_of(ROWS[r]) for r in config.rows]
    encoders = {}
    if "base" in wanted:
        encoders["base"] = out / "encoder-base"
        if not (encoders["base"] / "encoder" / "manifest.json").exists():
            timings.run("encoder-base", lambda: pretrain(out / "index", None, encoders["base"], PretrainConfig(steps=0),
                                                         log=log), log)
    for name in dict.fromkeys(e for e in wanted if e != "base"):
        run = encoders[name] = out / f"pretrain-{name}"
        kb = out / ("kb-bootstrapped.txt" if "pretrain" in config.bootstrap else "kb-train.txt") \
            if name in ("kb", "kb_qa") else None
        qa = train_file if name in ("qa", "kb_qa") else None
        _check_pretrained_as_asked(run, config)  # a finished encoder, or a pretraining to resume
        if not (run / "encoder" / "manifest.json").exists():
            timings.run(f"pretrain-{name}", lambda: pretrain(out / "index", kb, run, PretrainConfig(
                steps=config.pretrain_steps, attention_dropout=config.pretrain_attention_dropout), log=log, qa=qa), log,
                resumes=run)
    if config.embed_config().quantize != config.embed_quantize:
        log(f"embedding on the GPU in its own precision: --embed-quantize {config.embed_quantize} is for a CPU")
    mentions, loaded = {}, {}
    for name, enc in encoders.items():
        mentions[name] = out / f"mentions-{name}"
        if (mentions[name] / "manifest.json").exists():
            loaded[name] = embedded_as(MentionIndex.load(mentions[name]), config)
            loaded[name].check_compatible(index, enc)
        else:
            loaded[name] = timings.run(f"embed-{name}", lambda: build_mention_index(
                out / "index", enc, mentions[name], config.embed_config(), overwrite=True, log=log),
                log, resumes=partial_dir(mentions[name]))

    # what the vectors are (a GPU embeds in its own precision, --embed-quantize int8 being a CPU's): the settings say
    embedded = {"embed_quantize": loaded[config.encoder].manifest["config"].get("quantize", "none")}
    results: dict = {"data": str(data), "settings": jsonable({**dataclasses.asdict(config), **embedded}),
                     "split": json.loads((split / "split.json").read_text())["counts"], "retrieval": {}, "rows": {}}
    more_kb = out / "kb-bootstrapped.txt" if "retriever" in config.bootstrap else None  # every row trains on it
    for name, row in [("drkit", DRKIT)] + [(r, ROWS[r]) for r in config.rows]:
        if name != "drkit" and not row.mix and not row.follow and encoder_of(row) == config.encoder:
            results["rows"][name] = {**results["retrieval"]["drkit"], "what": f"{row.what} (= DrKIT's row)"}
            continue
        row = dataclasses.replace(row, encoder=encoder_of(row))
        run = out / f"train-{name}"
        mix_config = MixConfig(**{"hops": 2, **row.mix})
        follow_config = FollowConfig(**row.follow)
        train_config = MixTrainConfig(steps=config.steps)
        done = (run / "done.json").exists()
        train_mixing_call = lambda: train_mixing(out / "index", mentions[row.encoder], train_file, dev_file, run,  # noqa: E731
                                                 mix_config, follow_config=follow_config, config=train_config, log=log,
                                                 more_kb=more_kb)
        train_mixing_call() if done else timings.run(f"train-{name}", train_mixing_call, log)  # starts again if cut
        ev = out / f"retrieve-{name}"
        made_with = {**model_checksums(run), "questions_sha256": file_checksum(dev_file)["sha256"],
                     "retrieve": dataclasses.asdict(retrieve_config)}
        if made_again(ev / "metrics.json", made_with, log):
            def run_eval():
                metrics = run_retrieval(DrKITRetriever.load(out / "index", run, **retrieve_config.retriever_options()),
                                        index.article_keys, index.article_titles,
                                        dev_file, ev, retrieve_config, log=log)
                write_json(ev / "metrics.json", {**metrics, "made_with": made_with})
            timings.run(f"retrieve-{name}", run_eval, log)
        metrics = json.loads((ev / "metrics.json").read_text())
        metrics["train"] = json.loads((run / "done.json").read_text())
        metrics["what"] = row.what
        metrics["mean_pi_by_type"] = mean_pi_by_type(ev / "predictions.jsonl", dev_file)
        (results["retrieval"] if name == "drkit" else results["rows"])[name] = metrics
    results["drkit"] = results["retrieval"].pop("drkit")

    others = peers_and_controls(config, encoders[config.encoder])
    for name, (step, make, extra) in others.items():
        results["retrieval"][name] = score(name, step, lambda: make(out / "index", mentions[config.encoder]), out / "index",
                                            dev_file, out / step, retrieve_config, timings, log, extra)
    scored = {"drkit": out / "retrieve-drkit", **{n: out / step for n, (step, _, _) in others.items()},
              **{r: out / f"retrieve-{r}" for r in results["rows"] if (out / f"retrieve-{r}").exists()}}

    if config.answers:
        results["answers"] = answers_step(out, mentions[config.encoder], split, config.answer_steps, timings, log)
    transfer = transfer_dir(data, config.transfer)
    transfer_scored: dict = {}
    if transfer is not None:
        results["transfer"], transfer_scored = transfer_step(transfer, out, encoders[config.encoder], config,
                                                             retrieve_config, timings, log)
    if config.reader:
        from drkit.experiments.twowiki_reader import reader_step

        results["reader"] = reader_step(data, out, split, transfer, config, timings, log)
        scored.update(reading_row(results, out, dev_file))
        if transfer is not None:
            transfer_scored.update(reading_row(results["transfer"], out / "transfer", transfer / "questions.jsonl"))
    results["intervals"] = intervals(scored, [dev_file])
    if transfer is not None:
        results["transfer"]["intervals"] = intervals(transfer_scored, [transfer / "questions.jsonl"])
    results["timings_s"] = json.loads((out / "timings.json").read_text())
    write_json(out / "results.json", results)
    (out / "results.md").write_text("\n".join(results_markdown(results)) + "\n", encoding="utf-8")
    plot_recall(results, out / "recall_at_k.png")
    log(f"wrote {out / 'results.md'}")
    return results


def reading_row(section: dict, where: Path, questions: Path) -> dict:
    """Score drkit's ranking as the reader ordered its top N (`drkit.experiments.twowiki_reader.write_reading_ranking`)
    as the retrieval row ``drkit_reader`` of a results `section`; returns {"drkit_reader": its folder}, or {} where
    WHERE has no such ranking."""
    from drkit.experiments.twowiki_reader import write_reading_ranking

    ranking = write_reading_ranking(where)
    if ranking is None:
        return {}
    section["retrieval"]["drkit_reader"] = ranking_metrics([ranking], [questions])
    return {"drkit_reader": ranking.parent}


def _bootstrap(out: Path, index, dev_file: Path, timings, log) -> None:
    """``out/kb-bootstrapped.txt``: the train split's KB and the facts its patterns find (`drkit.dense.bootstrap`)
    in every passage but the dev questions' gold ones; made again when the KB or the dev questions change."""
    from drkit.dense.bootstrap import bootstrap_kb
    from drkit.experiments.twowiki_data import read_question_records

    made_with = {"kb_sha256": file_checksum(out / "kb-train.txt")["sha256"],
                 "dev_sha256": file_checksum(dev_file)["sha256"]}
    report = out / "kb-bootstrapped.txt.json"
    if (out / "kb-bootstrapped.txt").exists() and report.exists() and \
            json.loads(report.read_text()).get("made_with") == made_with:
        return
    gold = {str(s) for r in read_question_records(dev_file) for s in r.get("supporting") or ()}
    skip = [a for a, key in enumerate(index.article_keys) if key in gold]

    def run():
        found = bootstrap_kb(out / "index", out / "kb-train.txt", out / "kb-bootstrapped.txt", skip_articles=skip, log=log)
        write_json(report, {**found, "made_with": made_with})
    timings.run("bootstrap-kb", run, log)


def _check_pretrained_as_asked(run: Path, config: TwoWikiConfig) -> None:
    """A `ConfigError` where the encoder pretrained in `run` (made or begun by an earlier command) was pretrained with
    the attention dropout other than `config` asks: its figures would be labelled with a recipe they were not made with
    (a run made before the setting existed was pretrained with it on)."""
    if not (run / "run.json").exists():
        if not (run / "encoder").exists():
            return  # nothing pretrained there yet
        made = TwoWikiConfig.ABSENT_MEANT["pretrain_attention_dropout"]  # an encoder without its settings
    else:
        made = json.loads((run / "run.json").read_text()).get("pretrain", {}).get(
            "attention_dropout", TwoWikiConfig.ABSENT_MEANT["pretrain_attention_dropout"])
    if made != config.pretrain_attention_dropout:
        flag = "--pretrain-attention-dropout" if made else "--no-pretrain-attention-dropout"
        raise ConfigError(f"{run / 'encoder'} was pretrained with the attention dropout {'on' if made else 'off'}, "
                          f"and this command asks for it {'off' if made else 'on'} (the default since 2026-12-07 is "
                          f"off): pass {flag} to go on with it, or use another --out")
