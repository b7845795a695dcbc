"""The 2WikiMultiHopQA question files of the HotpotQA-style experiment, prepared from the data folder.

The folder holds one half of the questions (``train.jsonl``); the other half is held out by the data's
owners. `split_questions` cuts ours into a train and a dev split, stratified by question type with a
seeded permutation, so that every figure on dev is on questions no step has trained on. Two derived
files keep that promise:

* `train_kb`: the KB for distant supervision (pretraining). The folder's ``kb.txt`` is the evidence of
  *all* its questions, dev included; pretraining on it would hand the encoder the dev questions' facts.
  The training KB is the evidence of the train split only.
* `bracketed_questions`: for the questions whose answer is an entity (compositional, inference), the
  MetaQA-format line with the question's first evidence subject in [brackets] and the answers, so that
  today's fixed-hop pipeline can be run on them as the baseline of the entity-answer comparison.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from drkit.data.corpus import iter_json_objects
from drkit.data.text import fold
from drkit.errors import ConfigError, InputFormatError
from drkit.util.artifact import file_checksum
from drkit.util.sampling import generator

ENTITY_ANSWER_TYPES = ("compositional", "inference")


def read_question_records(path: str | Path) -> list[dict]:
    """The JSON objects of a 2wiki question file, each with its ``line``; a line without a string "id" and
    "question" is an `InputFormatError` naming file, line and field."""
    records = []
    for line_no, obj in iter_json_objects(path, "question file"):
        for key in ("id", "question"):
            if not isinstance(obj.get(key), str) or not obj[key].strip():
                raise InputFormatError(path, line_no, f"{key!r} must be a non-empty string", field=key)
        records.append({**obj, "line": line_no})
    return records


def split_questions(path: str | Path, out: str | Path, dev_fraction: float = 0.5, seed: int = 0,
                    swap: bool = False) -> dict:
    """Write ``out/train.jsonl`` and ``out/dev.jsonl`` (the lines of `path`, unchanged, in file order) and
    ``out/split.json``. Within each question type a seeded permutation puts round(dev_fraction * n) of
    the type's questions in dev; the rest are train. `swap` exchanges the two parts (the second fold of a
    two-fold cross-fit: with the first, every question is scored once by a model that never trained on it).
    Returns the split record."""
    if not 0 < dev_fraction < 1:
        raise ValueError(f"dev_fraction must be between 0 and 1, got {dev_fraction}")
    out = Path(out)
    records = read_question_records(path)
    ids = [r["id"] for r in records]
    if len(set(ids)) != len(ids):
        dup = next(i for i in ids if ids.count(i) > 1)
        raise InputFormatError(path, None, f"question id {dup!r} appears more than once", field="id")
    by_type: dict[str, list[int]] = {}
    for i, r in enumerate(records):
        by_type.setdefault(str(r.get("type", "")), []).append(i)
    dev = set()
    for k, (qtype, rows) in enumerate(sorted(by_type.items())):
        order = generator(seed, k).permutation(len(rows))
        dev.update(rows[j] for j in order[: round(dev_fraction * len(rows))])
    if swap:
        dev = set(range(len(records))) - dev
    out.mkdir(parents=True, exist_ok=True)
    lines = Path(path).read_text(encoding="utf-8-sig").splitlines()
    with open(out / "train.jsonl", "w", encoding="utf-8") as tr, open(out / "dev.jsonl", "w", encoding="utf-8") as dv:
        for i, r in enumerate(records):
            (dv if i in dev else tr).write(lines[r["line"] - 1].strip() + "\n")
    split = {"source": str(path), "source_sha256": file_checksum(path)["sha256"], "seed": seed,
             "dev_fraction": dev_fraction, "swapped": swap,
             "counts": {qtype: {"train": sum(1 for i in rows if i not in dev), "dev": sum(1 for i in rows if i in dev)}
                        for qtype, rows in sorted(by_type.items())},
             "dev_ids": [records[i]["id"] for i in sorted(dev)]}
    (out / "split.json").write_text(json.dumps(split, indent=1) + "\n", encoding="utf-8")
    return split


def train_kb(questions: str | Path, out: str | Path) -> dict:
    """``subject|relation|object`` lines of the evidence of `questions` (the train split), each triple once,
    in first-seen order. A triple with a ``|`` or a line break in a field cannot be written in this format:
    it is counted and left out. Returns the counts."""
    seen, skipped = {}, 0
    for r in read_question_records(questions):
        for triple in r.get("evidence") or []:
            if len(triple) != 3 or not all(isinstance(x, str) and x.strip() for x in triple):
                skipped += 1
                continue
            if any("|" in x or "\n" in x for x in triple):
                skipped += 1
                continue
            seen.setdefault(tuple(x.strip() for x in triple), None)
    Path(out).write_text("".join("|".join(t) + "\n" for t in seen), encoding="utf-8")
    return {"triples": len(seen), "not_writable": skipped}


def bracketed_questions(questions: str | Path, out: str | Path, types=ENTITY_ANSWER_TYPES) -> dict:
    """MetaQA-format lines ``question with [subject]<TAB>answer|answer`` for the questions of `types`: the
    subject is the first evidence triple's subject, found in the question case-insensitively (the questions
    write "Me And Bobby Mcgee" for "Me and Bobby McGee"); the name is bracketed as the question writes it.
    Questions whose subject is not found in the text, or with no answer, are counted and left out.
    Writes ``out`` and returns the counts, with the ids written in order."""
    written, missing_subject, no_answer, ids = [], 0, 0, []
    for r in read_question_records(questions):
        if r.get("type") not in types:
            continue
        evidence = r.get("evidence") or []
        answers = [a for a in (r.get("answers") or []) if isinstance(a, str) and a.strip()]
        if not answers:
            no_answer += 1
            continue
        subject = evidence[0][0] if evidence and evidence[0] else ""
        span = _find_folded(r["question"], subject) if subject else None
        if span is None:
            missing_subject += 1
            continue
        a, b = span
        text = r["question"][:a] + "[" + r["question"][a:b] + "]" + r["question"][b:]
        written.append(text.replace("\t", " ") + "\t" + "|".join(x.replace("|", " ").strip() for x in answers))
        ids.append(r["id"])
    Path(out).write_text("".join(line + "\n" for line in written), encoding="utf-8")
    return {"written": len(written), "subject_not_in_question": missing_subject, "no_answer": no_answer, "ids": ids}


def _find_folded(text: str, name: str) -> tuple[int, int] | None:
    """Character span of `name` in `text`, compared case-insensitively (NFKC casefold) at word boundaries."""
    pattern = re.compile(r"(?<!\w)" + re.escape(name.strip()) + r"(?!\w)", re.IGNORECASE)
    m = pattern.search(text)
    if m:
        return m.start(), m.end()
    folded_name = fold(name.strip())
    for start in range(len(text)):  # a fold that changes lengths (rare): compare character by character
        for end in range(start + 1, len(text) + 1):
            if fold(text[start:end]) == folded_name:
                return start, end
    return None


def index_corpus(corpus: Path, index_dir: Path, entities: tuple, title_aliases: bool, timings, step: str, log,
                 name_parts: bool = False) -> None:
    """Index `corpus` into `index_dir` with `entities` (and titles' aliases as `title_aliases` says, one-word persons
    resolved within an article as `name_parts` says) unless done; an index made otherwise is refused (one made
    before titles had aliases had none; an index without the setting resolved none)."""
    from drkit.index.build import build_index
    from drkit.index.linking import LinkConfig
    from drkit.index.segments import entity_specs
    from drkit.util.runs import as_saved

    if (index_dir / "manifest.json").exists():
        manifest = json.loads((index_dir / "manifest.json").read_text())
        inputs, made = manifest["inputs"], manifest["inputs"].get("entities")
        if entity_specs(manifest) != list(entities):
            raise ConfigError(f"{index_dir} was indexed with --entities {made}, not {' '.join(entities)}; "
                              "use another --out")
        if "titles" in entities and inputs.get("title_aliases", False) != title_aliases:
            raise ConfigError(f"{index_dir} was indexed {'without' if title_aliases else 'with'} the titles' aliases; "
                              f"use another --out, or pass --{'no-' if title_aliases else ''}title-aliases")
        if as_saved(LinkConfig, manifest["config"]["link"]).name_parts != name_parts:
            raise ConfigError(f"{index_dir} was linked {'without' if name_parts else 'with'} one-word persons resolved "
                              f"within an article; use another --out, or pass --{'no-' if name_parts else ''}name-parts")
        return
    timings.run(step, lambda: build_index(corpus, index_dir, entities=list(entities), overwrite=True, log=log,
                                          title_aliases=title_aliases, link_config=LinkConfig(name_parts=name_parts)),
                log)
