"""The reader's step of ``drkit reproduce-2wiki`` and its pooling over the two folds.

The reader is trained on the fold's train questions (with their gold passages and BM25 distractors) and the
templated questions of the train part's KB (`drkit.reader.train`); it never reads a dev question in training.
Rows, all the same reader on the same dev questions, each reading N passages:

* ``gold``: the gold passages (an upper bound that isolates the reader);
* ``drkit``: drkit's top N (the retrieval step's own ranking, ``retrieve-drkit``), with drkit's entity answer
  (the last hop's best entity not named in the question) scored beside the reader's;
* ``drkit_reader_only``: the same passages, the reader's answer alone (no comparison of dates or countries);
* ``bm25``: BM25's top N (``peer-bm25``).

With ``--reader-distill K`` a K-layer reader taught by the trained one (OUT/train-reader-distilled,
`drkit.reader.distill`) reads every row instead.

The ``drkit`` row's reading also orders drkit's passages (`write_reading_ranking`, OUT/read-drkit/ranking): the
top N with those holding a supporting sentence first, then the rest of drkit's ranking; `drkit.experiments.twowiki`
scores it as a retrieval row beside drkit's (``drkit_reader``).

Every row but ``drkit_reader_only`` settles which-of-two date questions and same-country questions by
comparing the dates or countries read (`drkit.reader.compare`, the default of ``drkit answer``).

On the transfer corpus (musique100, not trained on) the same reader reads its questions' gold passages (where
every question names them, `supporting`: what the reader alone does on a corpus it never saw) and drkit's and BM25's
top N of the transfer step. Each row's predictions and metrics are in OUT/read-{row} (OUT/transfer/read-{row}).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from drkit.errors import InputFormatError
from drkit.experiments.steps import made_again, write_json
from drkit.util.artifact import file_checksum
from drkit.util.figures import interval, three

ROWS = {"gold": None, "drkit": "retrieve-drkit", "drkit_reader_only": "retrieve-drkit", "bm25": "peer-bm25"}
NO_COMPARE = ("drkit_reader_only",)  # rows read without comparing dates or countries
TRANSFER_ROWS = ("gold", "drkit", "bm25")  # rows read on the transfer corpus
# how a row with the comparison rules is read; one made otherwise is read again. 2: the questions the rules settle
# are not read by the transformer (their supporting sentences are those compared); 3: with, for "the director of
# A", the sentence of A's passage that names the director
READING = 3
ROW_NAMES = {"gold": "reader on the gold passages (upper bound)", "drkit": "**drkit** top N + reader",
             "drkit_reader_only": "drkit top N + reader alone (no comparison of dates or countries)",
             "bm25": "BM25 top N + reader", "entity": "drkit's entity answer alone (last hop)"}


def reader_train_config(run: Path, epochs: int):
    """The reader training settings of `reproduce-2wiki` for the reader run `run`: its defaults with `epochs`, and the
    batching of the run already there (a run made before sorted batches keeps, and resumes with, its batches as
    drawn, one made before hop questions has none)."""
    from drkit.reader.train import ReaderTrainConfig

    config = ReaderTrainConfig(epochs=epochs)
    saved = run / "run.json"
    if saved.exists():
        train = json.loads(saved.read_text()).get("train", {})
        config = dataclasses.replace(config, **{k: train.get(k, meant) for k, meant in ReaderTrainConfig.ABSENT_MEANT.items()})
    return config


def _has_more_kb(run: Path) -> bool:
    """Whether the reader run `run` trains with the bootstrapped facts: a new run does; one made before them (its
    ``run.json`` without a ``more_kb`` input) resumes as it was made."""
    saved = run / "run.json"
    return not saved.exists() or "more_kb" in json.loads(saved.read_text()).get("inputs", {})


def reader_step(data: Path, out: Path, split: Path, transfer: Path | None, config, timings, log) -> dict:
    """Train the reader unless done, read each row (module docstring), return the rows' metrics."""
    from drkit.reader.examples import read_passages, read_questions
    from drkit.reader.model import Reader
    from drkit.reader.train import train_reader

    run = out / "train-reader"
    train_config = reader_train_config(run, config.reader_epochs)
    more_kb = out / "kb-bootstrapped.txt" if "reader" in config.bootstrap and _has_more_kb(run) else None

    def train(run: Path, reader_config, train_config) -> None:  # timed unless already done
        call = lambda: train_reader(data / "corpus.jsonl", split / "train.jsonl", run, out / "kb-train.txt",  # noqa: E731
                                    reader_config, config=train_config, log=log, more_kb=more_kb)
        call() if (run / "done.json").exists() else timings.run(run.name, call, log, resumes=run)

    train(run, config.reader_config(), train_config)
    if config.reader_distill:  # a shallower reader taught by the one just trained reads every row
        teacher, run = run / "reader", out / "train-reader-distilled"
        taught = reader_train_config(run, config.reader_distill_epochs or config.reader_epochs)
        train(run, dataclasses.replace(config.reader_config(), layers=config.reader_distill),
              dataclasses.replace(taught, teacher=str(teacher)))
    reader = Reader.load(run / "reader")
    found = {"training": json.loads((run / "done.json").read_text()),
             "rows": _rows(reader, read_passages(data / "corpus.jsonl"), split / "dev.jsonl", out, out, config,
                           tuple(ROWS), timings, "read", log)}
    if transfer is not None and (out / "transfer" / "retrieve-drkit" / "predictions.jsonl").exists():
        questions = transfer / "questions.jsonl"
        rows = TRANSFER_ROWS if all(r.get("supporting") for r in read_questions(questions)) else TRANSFER_ROWS[1:]
        if rows != TRANSFER_ROWS:
            log(f"{out / 'transfer' / 'read-gold'}: skipped, not every question of {questions} names its gold passages "
                "(supporting)")
        found["transfer"] = {"data": str(transfer), "rows": _rows(
            reader, read_passages(transfer / "corpus.jsonl"), questions, out / "transfer", out / "transfer", config,
            rows, timings, "transfer-read", log)}
    return found


READING_RANKING = "read-drkit/ranking"  # drkit's ranking, its top N ordered by the reader's evidence


def write_reading_ranking(where: Path, to: Path | None = None) -> Path | None:
    """TO/predictions.jsonl (TO: WHERE/read-drkit/ranking unless given): each question of WHERE/retrieve-drkit's
    predictions with its passages as the reader ordered the top N it read (WHERE/read-drkit,
    `drkit.qa.answer.supporting_first`), then the rest of drkit's ranking; written where both exist, and
    returned (None where they do not)."""
    from drkit.qa.answer import supporting_first

    retrieved, read = where / "retrieve-drkit" / "predictions.jsonl", where / "read-drkit" / "predictions.jsonl"
    if not (retrieved.exists() and read.exists()):
        return None
    with open(read, encoding="utf-8") as f:
        readings = {row["id"]: row for row in map(json.loads, f)}
    out = (to or where / READING_RANKING) / "predictions.jsonl"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(retrieved, encoding="utf-8") as f, open(out, "w", encoding="utf-8") as w:
        for line_no, row in enumerate(map(json.loads, f), 1):
            if row["id"] not in readings:
                raise InputFormatError(retrieved, line_no, f"question {row['id']!r} is not in {read}", field="id")
            first = supporting_first(readings[row["id"]])
            by_id = {p["id"]: p for p in row["passages"]}
            chosen = set(first)
            if not by_id.keys() >= chosen:
                raise InputFormatError(read, None, f"question {row['id']!r}: a passage read is not among {retrieved}'s")
            ranked = [by_id[i] for i in first] + [p for p in row["passages"] if p["id"] not in chosen]
            w.write(json.dumps({"id": row["id"], "passages": ranked}, ensure_ascii=False) + "\n")
    return out


def _rows(reader, passages, questions: Path, retrieved: Path, out: Path, config, rows, timings, step, log) -> dict:
    from drkit.qa.answer import AnswerConfig, passages_from_predictions, read_and_score
    from drkit.reader.examples import read_questions

    corpus = {p.id: p for p in passages}
    records = read_questions(questions)
    answer_config = AnswerConfig(passages=config.reader_passages)
    no_compare = dataclasses.replace(answer_config, compare=False)
    reader_sha = file_checksum(reader.path / "model.safetensors")["sha256"]
    found = {}
    for name in rows:
        ev = out / f"read-{name}"
        source = retrieved / ROWS[name] / "predictions.jsonl" if ROWS[name] else None
        if source is not None and not source.exists():  # e.g. --no-peers: no BM25 ranking to read
            log(f"{ev}: skipped, {source} is missing")
            continue
        row_config = no_compare if name in NO_COMPARE else answer_config
        made_with = row_made_with(reader_sha, questions, source, row_config, reader.config.max_pieces)
        if made_again(ev / "metrics.json", made_with, log):
            def run(name=name, source=source, ev=ev, made_with=made_with, row_config=row_config):
                if source is None:
                    read = [_gold(r, corpus, questions) for r in records]
                    extra = None
                else:
                    by_id = passages_from_predictions(source, corpus, answer_config.passages)
                    missing = [r for r in records if r["id"] not in by_id]
                    if missing:
                        raise InputFormatError(questions, missing[0]["line"], f"question {missing[0]['id']!r} is not "
                                               f"in {source}", field="id")
                    read = [by_id[r["id"]] for r in records]
                    extra = _entity_answers(source) if name == "drkit" else None
                    extra = [{"entity_answer": extra.get(r["id"])} for r in records] if extra else None
                metrics = read_and_score(reader, records, read, ev, row_config, extra, log)
                write_json(ev / "metrics.json", {**metrics, "made_with": made_with})
            timings.run(f"{step}-{name}", run, log)
        found[name] = json.loads((ev / "metrics.json").read_text())
    return found


def row_made_with(reader_sha: str, questions: Path, source: Path | None, row_config, trained_pieces: int) -> dict:
    """What a reading row (`row_config`, a `drkit.qa.answer.AnswerConfig`) is made from: the reader, the questions,
    the passages read (`source`: a ranking's predictions, None: the gold ones) and every reading setting (span
    checks and the version of their rules, two-step reading, the word pieces read by a reader trained with
    `trained_pieces`, ...), so that a row read otherwise is read again."""
    from drkit.reader.decode import SPAN_CHECKS

    return {"reader": reader_sha, "questions_sha256": file_checksum(questions)["sha256"],
            "passages_sha256": file_checksum(source)["sha256"] if source else "gold",
            "passages": row_config.passages, "compare": row_config.compare,
            **({"reading": READING} if row_config.compare else {}),
            **({"span_checks_rules": SPAN_CHECKS} if row_config.span_checks else {}),
            "settings": {**dataclasses.asdict(reading := row_config.reading()),
                         "max_pieces": reading.pieces(trained_pieces)}}


def _gold(record: dict, corpus: dict, questions: Path) -> list:
    """The gold passages of a question record, or an `InputFormatError` naming its line."""
    ids = [str(s) for s in record.get("supporting") or []]
    if not ids or any(i not in corpus for i in ids):
        raise InputFormatError(questions, record["line"], "needs supporting passage ids of the corpus for the gold row",
                               field="supporting")
    return [corpus[i] for i in ids]


def _entity_answers(predictions: Path) -> dict:
    """Question id -> the retriever's entity answer, where its predictions have one."""
    out = {}
    with open(predictions, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                row = json.loads(line)
                if row.get("answer") is not None:
                    out[row["id"]] = row["answer"]
    return out


def pool_reader(runs: list[Path]) -> dict | None:
    """The reader's rows over both folds' dev questions (each read by the reader of the fold that did not train on
    it): EM/F1 overall and by type with bootstrap intervals; None when a run has no reader step."""
    from drkit.qa.answer import score
    from drkit.reader.examples import read_questions

    if not all((r / "read-gold" / "metrics.json").exists() for r in runs):
        return None
    records = [q for r in runs for q in read_questions(r / "split" / "dev.jsonl")]
    out: dict = {"rows": {}}
    for name in ROWS:
        if not all((r / f"read-{name}" / "predictions.jsonl").exists() for r in runs):
            continue
        rows = [json.loads(line) for r in runs for line in open(r / f"read-{name}" / "predictions.jsonl", encoding="utf-8")]
        if [x["id"] for x in rows] != [q["id"] for q in records]:
            raise ValueError(f"read-{name}: predictions are not in the order of the dev questions")
        out["rows"][name] = score(records, rows)
        metrics = [json.loads((r / f"read-{name}" / "metrics.json").read_text()) for r in runs]
        for key in ("reader_ms_per_question_batch1", "reader_ms_per_read_batch1"):
            out["rows"][name][key] = [m.get(key) for m in metrics]
    transfer = [r / "transfer" for r in runs if (r / "transfer" / "read-drkit" / "metrics.json").exists()]
    out["transfer"] = {str(t): {n: json.loads((t / f"read-{n}" / "metrics.json").read_text())
                                for n in TRANSFER_ROWS if (t / f"read-{n}" / "metrics.json").exists()}
                       for t in transfer}
    return out


def reader_markdown(found: dict, title: str) -> list[str]:
    """Rows of answer EM / F1 (with intervals) by type, from `pool_reader` or `reader_step`."""
    rows = found["rows"]
    if not rows:
        return []
    types = list(next(iter(rows.values())).get("by_type", {}))
    lines = [title, "", "| row | EM [95% CI] | F1 [95% CI] | " + " | ".join(f"EM {t}" for t in types) + " |",
             "|---|---|---|" + "---|" * len(types)]

    def line(label, m):
        return (f"| {label} | {three(m['em'])} {interval(m['em_ci95'])} | {three(m['f1'])} "
                f"{interval(m['f1_ci95'])} | "
                + " | ".join(three(m['by_type'][t]['em']) for t in types) + " |")

    for name, m in rows.items():
        lines.append(line(ROW_NAMES[name], m))
        if name == "drkit" and m.get("entity_answer"):
            lines.append(line(ROW_NAMES["entity"], m["entity_answer"]))
    def said(value):  # a figure, or per fold where pooled; "-" where not measured
        return "-" if value is None or (isinstance(value, list) and all(v is None for v in value)) else value

    ms = "; ".join(f"{name} {said(m.get('reader_ms_per_question_batch1'))} / {said(m.get('reader_ms_per_read_batch1'))}"
                   for name, m in rows.items())
    lines += ["", "The reader's milliseconds at batch 1, reading N passages, a question (those the comparison rules "
              "settle unread included) / a question the transformer reads (per fold where pooled; - : not measured): "
              f"{ms}."]
    return lines
