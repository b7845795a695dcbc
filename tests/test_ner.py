"""Entities found by a trained recogniser (drkit.index.ner, `drkit index --entities ner`): the rules around it
checked by hand with a stand-in recogniser, then spaCy's real English pipeline on a few sentences."""

import json
import os
import signal
import sys
from types import SimpleNamespace

import pytest

from drkit.data.kb import EntityTable
from drkit.errors import ConfigError, DrkitError
from drkit.index import ner
from drkit.index.found import MONTHS
from drkit.index.linking import EntityLinker
from drkit.index.ner import (
    TEXTS_PER_PROCESS,
    clean_name,
    date_forms,
    dates_in,
    load_pipeline,
    ner_entities,
    ner_processes,
    normal_date,
)

TEXTS = [
    "Corey Snide( born December 19, 1993) is an American actor. He studied first at the Colonie Central High School.",
    "Lee Hall( born 19 December 1993) is an English playwright. He wrote the 2000 film Billy Elliot.",
    "The bishop of Elmham met the bishop of Lucca in December. A bishop came in 1479.",
]


class FakeNlp:
    """A recogniser that labels the given (text, label) spans: the rules around the model, without the model."""

    def __init__(self, spans: dict[int, list[tuple[str, str]]]):
        self.spans = spans

    def pipe(self, texts, batch_size=1, n_process=1):
        for i, text in enumerate(texts):
            yield SimpleNamespace(text=text, ents=[SimpleNamespace(text=t, label_=label, start_char=text.index(t),
                                                                   end_char=text.index(t) + len(t))
                                                   for t, label in self.spans.get(i, [])])


def test_dates_normalised():
    assert normal_date("December 19, 1993") == "19 December 1993"
    assert normal_date("19 December, 1993") == "19 December 1993"
    assert normal_date("December 1993") == "December 1993"
    assert normal_date("1993") == "1993"
    for not_one_date in ("the 1990s", "851", "19 December", "born 1993", "1993 and 1994"):
        assert normal_date(not_one_date) is None, not_one_date
    assert dates_in("between December 19, 1993 and 1995") == ["December 19, 1993", "1995"]
    # a day or a year the recogniser left out of its span is taken back; a date beside the span is not
    text = "Frank Lloyd( 2 February 1886 – 10 August 1960) was a director."
    start = text.index("August 1960")
    assert dates_in(text, start, start + len("August 1960")) == ["10 August 1960"]
    assert dates_in("on December 19, 1993 in", 3, 14) == ["December 19, 1993"]
    assert dates_in("the next year") == []
    assert date_forms("12 December 1915") == ["12 December 1915", "December 12, 1915", "1915-12-12"]
    assert date_forms("December 1915") == ["December 1915"] and date_forms("1915") == ["1915"]


def test_iso_dates_are_full_dates_and_slashed_ones_their_years():
    assert normal_date("1975-04-09") == "9 April 1975" and normal_date(" 2001-12-31 ") == "31 December 2001"
    for not_one_date in ("1975-13-09", "1975-04-32", "1975-02-31", "1975-4-9", "0975-04-09", "1975-04-09-1", "11975-04-09"):
        assert normal_date(not_one_date) is None, not_one_date
    assert dates_in("born 1975-04-09 in Paris, died 2001") == ["1975-04-09", "2001"]
    assert dates_in("from 1975-04-09 to 12 May 1980, then 1990-01-02") == ["1975-04-09", "12 May 1980", "1990-01-02"]
    assert dates_in("on 4/12/1943 he") == ["1943"]  # day and month cannot be told apart: the year alone
    # every full date's ISO form is among its forms, so a text or question that writes it links to that date
    for day, month in ((1, 1), (9, 4), (31, 12), (29, 2)):
        normal = f"{day} {MONTHS[month - 1]} 1996"
        assert f"1996-{month:02d}-{day:02d}" in date_forms(normal) and normal_date(date_forms(normal)[-1]) == normal
    # no ISO form where it would not read back: a three-digit year, a day the month does not have
    assert date_forms("12 December 915") == ["12 December 915", "December 12, 915"]
    assert date_forms("31 February 1915") == ["31 February 1915", "February 31, 1915"]
    nlp = FakeNlp({0: [("1975-04-09", "DATE")], 1: [("9 April 1975", "DATE")], 2: [("9 April 1975", "DATE")]})
    texts = ["She was born on 1975-04-09 in Paris.", "Born 9 April 1975.", "On 9 April 1975 it rained."]
    found = ner_entities(texts, nlp)
    assert found.names == ["9 April 1975"] * 3 and found.aliases == {"9 April 1975": {"1975-04-09", "April 9, 1975"}}
    table = EntityTable.from_names(sorted(set(found.names))).with_aliases(found.aliases)
    date = table.lookup("9 April 1975")
    text = "Born 1975-04-09 (April 9, 1975); not 1975-04-10."
    assert [(text[s:e], i) for s, e, i in EntityLinker.of_table(table, 3).find(text)] == [
        ("1975-04-09", date), ("April 9, 1975", date)]


def test_names_cleaned():
    assert clean_name("the New York City Department of Education") == "New York City Department of Education"
    assert clean_name("an Academy Award and") == "Academy Award"
    assert clean_name("Stephen Daldry's") == "Stephen Daldry"
    assert clean_name('"Kismet",') == "Kismet"
    assert clean_name("The Hague") == "The Hague"  # a capitalised article is the name's own
    assert clean_name("A Star Is Born") == "A Star Is Born"
    for nothing in ("the", "11", "-", "X"):
        assert clean_name(nothing) is None, nothing


def test_recognised_spans_become_names_and_dates():
    nlp = FakeNlp({0: [("Corey Snide", "PERSON"), ("December 19, 1993", "DATE"), ("American", "NORP"),
                       ("the Colonie Central High School", "ORG"), ("first", "ORDINAL")],
                   1: [("Lee Hall", "PERSON"), ("19 December 1993", "DATE"), ("2000", "DATE"), ("Billy Elliot", "WORK_OF_ART")],
                   2: [("bishop", "ORG"), ("Elmham", "GPE"), ("1479", "CARDINAL"), ("December", "DATE")]})
    found = ner_entities(TEXTS, nlp)
    # the two ways of writing 19 December 1993 are one date (named in its normal form: a tie); numbers and ordinals are left out; "bishop", which
    # the corpus writes in lower case, is not a name; a month alone is not a date
    assert found.names == ["Corey Snide", "19 December 1993", "American", "Colonie Central High School", "Lee Hall",
                           "19 December 1993", "2000", "Billy Elliot", "Elmham"]
    assert found.aliases == {"19 December 1993": {"December 19, 1993", "1993-12-19"}}
    assert found.labels["ORDINAL"] == 1 and sum(found.labels.values()) == 13
    assert found.kinds == {"Corey Snide": "PERSON", "American": "NORP", "Colonie Central High School": "ORG",
                           "Lee Hall": "PERSON", "Billy Elliot": "WORK_OF_ART", "Elmham": "GPE",
                           "19 December 1993": "DATE", "2000": "DATE"}


def test_an_alias_links_as_its_entity():
    table = EntityTable.from_names(["19 December 1993", "Lee Hall", "December 1993"]).with_aliases(
        {"19 December 1993": {"December 19, 1993", "December 1993"}, "Nobody": {"x"}})
    date = table.lookup("19 December 1993")
    # "December 1993" is an entity of its own, so it is not made an alias of another
    assert table.aliases[date] == ["19 December 1993", "December 19, 1993"]
    assert table.alias_keys() == [("december 19, 1993", date)]
    assert table.lookup("december 19, 1993") == date
    linker = EntityLinker.of_table(table, 3)
    text = "Lee Hall, born December 19, 1993, or 19 December 1993, in December 1993."
    assert [(text[s:e], i) for s, e, i in linker.find(text)] == [
        ("Lee Hall", table.lookup("Lee Hall")), ("December 19, 1993", date), ("19 December 1993", date),
        ("December 1993", table.lookup("December 1993"))]
    # saved and loaded (entities.jsonl's rows), the table links alike
    again = EntityTable.from_records(table.to_records())
    assert again.alias_keys() == table.alias_keys() and again.kinds is None
    # kinds: given by name or alias, the first given kept, saved only where there is one
    kinded = table.with_kinds({"December 19, 1993": "DATE", "19 December 1993": "CARDINAL", "Nobody": "PERSON"})
    assert kinded.kinds == ["DATE", None, None] and kinded.aliases == table.aliases
    assert [r.get("kind") for r in kinded.to_records()] == ["DATE", None, None]
    assert "kind" not in kinded.to_records()[1]
    assert EntityTable.from_records(kinded.to_records()).kinds == ["DATE", None, None]


def test_missing_pipeline_says_how_to_install(monkeypatch):
    spacy = pytest.importorskip("spacy")

    def missing(*args, **kwargs):
        raise OSError("[E050] Can't find model")

    monkeypatch.setattr(spacy, "load", missing)
    with pytest.raises(ConfigError, match=r'pip install "drkit\[ner\]"'):
        load_pipeline()


def _real_pipeline():
    pytest.importorskip("spacy")
    try:
        return load_pipeline()
    except ConfigError as exc:
        pytest.skip(str(exc))


def test_real_recogniser_finds_people_places_and_dates():
    nlp = _real_pipeline()
    found = ner_entities(["Barack Obama was born on August 4, 1961, in Honolulu, Hawaii. He studied at "
                          "Columbia University and Harvard Law School."], nlp)
    names = set(found.names)
    assert {"Barack Obama", "August 4, 1961", "Honolulu", "Hawaii", "Columbia University",
            "Harvard Law School"} <= names, names
    # the date is named as the text writes it; its normal form and ISO form are aliases
    assert found.aliases == {"August 4, 1961": {"4 August 1961", "1961-08-04"}}  # and its ISO form
    # 2Wiki's way of giving a life's dates, where the recogniser's spans leave out the days
    found = ner_entities(["Frank William George Lloyd( 2 February 1886 – 10 August 1960) was a British- born "
                          "American film director."], nlp)
    assert {"2 February 1886", "10 August 1960", "Frank William George Lloyd"} <= set(found.names), found.names


def test_the_unused_shared_token_vectors_are_left_out_and_nothing_changes():
    """load_pipeline drops the shared tok2vec, which no component listens to: the recogniser's spans are those
    of the pipeline with it, on real 2Wiki-like text and on the release's own kind of sentence."""
    import spacy

    from drkit.index.ner import EXCLUDED, PIPELINE

    nlp = _real_pipeline()
    assert nlp.pipe_names == ["ner"]
    full = spacy.load(PIPELINE, exclude=list(EXCLUDED))
    assert full.pipe_names == ["tok2vec", "ner"]
    texts = TEXTS + ["Barack Obama was born on August 4, 1961, in Honolulu, Hawaii. He studied at Columbia "
                     "University.", "Frank William George Lloyd( 2 February 1886 – 10 August 1960) was a British- "
                     "born American film director.", "Apple is looking at buying U.K. startup for $1 billion."]
    spans = lambda n: [[(e.start_char, e.end_char, e.label_) for e in d.ents] for d in n.pipe(texts)]  # noqa: E731
    assert spans(nlp) == spans(full)
    assert sum(map(len, spans(nlp))) > 10


def test_processes_find_what_one_finds():
    """Texts read by two recogniser processes (forked, each sending back its spans) give the names, dates, forms, labels and kinds that
    one process gives, in the same order."""
    nlp = _real_pipeline()
    texts = TEXTS * 3 + ["Barack Obama was born on August 4, 1961, in Honolulu, Hawaii.",
                         "Frank William George Lloyd( 2 February 1886 – 10 August 1960) was a British- born director."]
    told = []
    one = ner_entities(texts, nlp, batch_size=2, processes=1)
    two = ner_entities(texts, nlp, batch_size=2, processes=2, log=told.append)
    assert told == [f"recognising entities in {len(texts)} texts with 2 process(es)"]
    assert len(one.names) > 10 and "Barack Obama" in one.names
    assert (two.names, two.aliases, two.labels, two.kinds) == (one.names, one.aliases, one.labels, one.kinds)


def test_the_spans_sent_back_are_the_recognisers():
    """What a recogniser process sends back, (label, start, end) a span, is spaCy's entities, their text the text's
    slice (the names are read from the slice)."""
    nlp = _real_pipeline()
    texts = TEXTS + ["Frank William George Lloyd( 2 February 1886 – 10 August 1960) was a British- born director."]
    docs = list(nlp.pipe(texts))
    was, ner._pipeline = ner._pipeline, nlp
    try:
        sent = ner._spans(texts)
    finally:
        ner._pipeline = was
    assert sent == [[(e.label_, e.start_char, e.end_char) for e in d.ents] for d in docs]
    assert [[t[s:e] for _, s, e in spans] for t, spans in zip(texts, sent)] == [[e.text for e in d.ents] for d in docs]
    assert sum(map(len, sent)) > 5


def test_a_recogniser_process_that_dies_is_an_error_not_a_hang():
    parent = os.getpid()

    class Dying(FakeNlp):
        def pipe(self, texts, batch_size=1, n_process=1):
            if os.getpid() != parent:  # in a recogniser process: killed as the system kills one out of memory
                os._exit(1)
            yield from super().pipe(texts, batch_size, n_process)

    assert ner_entities(TEXTS, Dying({0: [("Corey Snide", "PERSON")]}), processes=1).names == ["Corey Snide"]
    with pytest.raises(DrkitError, match="a recogniser process died while reading the 12 texts"):
        ner_entities(TEXTS * 4, Dying({}), batch_size=2, processes=2)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_recogniser_workers_die_with_their_parent(monkeypatch):
    """A process forked while the recogniser runs (one of its processes) is killed when its parent dies, so a
    killed `drkit add` leaves no worker holding its update lock; a process forked at another time is not."""
    import ctypes

    def death_signal_of_a_child() -> int:
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report PR_GET_PDEATHSIG and leave at once
            got = ctypes.c_int(-1)
            ctypes.CDLL("libc.so.6").prctl(2, ctypes.byref(got))
            os.write(w, str(got.value).encode())
            os._exit(0)
        os.close(w)
        os.waitpid(pid, 0)
        with os.fdopen(r) as f:
            return int(f.read())

    monkeypatch.setattr(ner, "_recognising", os.getpid())
    assert death_signal_of_a_child() == signal.SIGKILL
    monkeypatch.setattr(ner, "_recognising", None)
    assert death_signal_of_a_child() == 0


def test_how_many_recogniser_processes(monkeypatch):
    import drkit.util.hardware as hardware

    monkeypatch.setattr(hardware, "available_cpus", lambda: 4)
    assert ner_processes(10) == 1  # too few texts to be worth another process
    assert ner_processes(2 * TEXTS_PER_PROCESS) == 2
    assert ner_processes(100 * TEXTS_PER_PROCESS) == 4  # no more than the CPUs
    assert ner_processes(10, processes=3) == 3  # as asked
    with pytest.raises(ConfigError, match="processes must be >= 0"):
        ner_processes(10, processes=-1)


def test_the_release_own_example():
    """The recogniser's own test in its release repository (explosion/spacy-models, tests/lang/en/test_ner.py)."""
    doc = _real_pipeline()("Apple is looking at buying U.K. startup for $1 billion")
    assert [(e.text, e.start_char, e.end_char, e.label_) for e in doc.ents] == [
        ("Apple", 0, 5, "ORG"), ("U.K.", 27, 31, "GPE"), ("$1 billion", 44, 54, "MONEY")]


def test_index_with_recognised_entities(tmp_path):
    from drkit.index.build import build_index

    nlp = _real_pipeline()
    rows = [{"id": "0", "title": "Barack Obama", "text": "Barack Obama was born on August 4, 1961, in Honolulu, Hawaii."},
            {"id": "1", "title": "Honolulu", "text": "Honolulu is the capital of Hawaii. Obama was born there on "
                                                     "4 August 1961."}]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    index = build_index(tmp_path / "c.jsonl", tmp_path / "ix", entities=["titles", "ner"], log=lambda *a: None)
    inputs = json.loads((tmp_path / "ix" / "manifest.json").read_text())["inputs"]
    assert inputs["entities"] == ["titles", "ner"]
    assert inputs["recogniser"]["version"] == nlp.meta["version"]
    date = index.entities.lookup("4 August 1961")
    hawaii = index.entities.lookup("Hawaii")
    assert date is not None and hawaii is not None and index.entities.lookup("August 4, 1961") == date
    assert index.entities.kinds[date] == "DATE" and index.entities.kinds[hawaii] == "GPE"
    # both ways of writing the date are mentions of the one entity, in both passages
    date_passages = {int(m[1]) for m in index.mentions if int(m[0]) == date}
    assert date_passages == {0, 1}


def test_the_kind_a_question_asks_for():
    from drkit.data.asked import asked_kinds
    from drkit.qa.answer_kinds import prefer_kinds

    assert asked_kinds("When did the director of Kismet die?") == {"DATE"}
    assert asked_kinds("What is the date of birth of Lee Hall's father?") == {"DATE"}
    assert asked_kinds("What nationality is the director of film Blood Street?") == {"NORP", "GPE"}
    assert asked_kinds("Where was the composer of film Amarajeevi born?") == {"GPE", "LOC", "FAC"}
    assert asked_kinds("Who is the spouse of the director of film The Glass Boat?") == {"PERSON"}
    assert asked_kinds("Which award did the director of film Edelweiss Pirates receive?") is None
    assert asked_kinds("Which film has the director who was born first, Kismet or Airheads?") is None  # a film
    assert asked_kinds("What is the native language of the person who broke the salt law?") is None
    assert asked_kinds("To whom was Leo Fong married?") == asked_kinds('"Who directed Kismet?"') == {"PERSON"}
    assert asked_kinds("Kismet is a film. Who directed it?") == {"PERSON"}
    found = [(3, 0.5), (1, 0.3), (0, 0.1), (2, 0.05)]
    kinds = ["PERSON", "GPE", None, "PERSON"]
    # entity 2 has no known kind: it may be a person or a place, so it keeps its place among them
    assert prefer_kinds(found, kinds, frozenset({"PERSON"})) == [(3, 0.5), (0, 0.1), (2, 0.05), (1, 0.3)]
    assert prefer_kinds(found, kinds, frozenset({"GPE"})) == [(1, 0.3), (2, 0.05), (3, 0.5), (0, 0.1)]
    assert prefer_kinds(found, ["GPE", "GPE", "GPE", "GPE"], frozenset({"DATE"})) == found  # none may be: as it is
    assert prefer_kinds(found, None, frozenset({"PERSON"})) == found and prefer_kinds(found, kinds, None) == found


def test_an_index_recognised_before_kinds_were_recorded_is_told_apart():
    """An index built with --entities ner before drkit index recorded kinds has none: the retriever says so (the
    answer's kind filter has nothing to use) instead of answering as if it had. Titles or a KB have no kinds anyway."""
    from drkit.qa.answer_kinds import kinds_lost

    def index(entities, kinds):
        return SimpleNamespace(manifest={"inputs": {"entities": entities}} if entities else {},
                               entities=SimpleNamespace(kinds=kinds))

    assert kinds_lost(index(["titles", "ner"], None))
    assert not kinds_lost(index(["titles", "ner"], ["PERSON", None]))
    assert not kinds_lost(index(["titles"], None)) and not kinds_lost(index(None, None))


def test_documents_added_to_a_recognised_index_are_recognised_too(tmp_path, capsys):
    from drkit.cli import main
    from drkit.index.build import build_index
    from drkit.index.sparse import SparseIndex

    _real_pipeline()
    first = [{"id": "0", "title": "Barack Obama", "text": "Barack Obama was born on August 4, 1961, in Honolulu, Hawaii."}]
    added = [{"id": "1", "title": "Michelle Obama", "text": "Michelle Obama was born on January 17, 1964, in Chicago, "
                                                            "Illinois. She married Barack Obama, born 4 August 1961."}]
    (tmp_path / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in first))
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in added))
    build_index(tmp_path / "a.jsonl", tmp_path / "ix", entities=["titles", "ner"], log=lambda *a: None)
    assert main(["add", "--index", str(tmp_path / "ix"), "--corpus", str(tmp_path / "b.jsonl")]) == 0
    live = SparseIndex.load(tmp_path / "ix")
    chicago, date = live.entities.lookup("Chicago"), live.entities.lookup("January 17, 1964")
    assert chicago is not None and live.entities.kinds[chicago] == "GPE"
    assert date is not None and live.entities.kinds[date] == "DATE" and live.entities.lookup("17 January 1964") == date
    assert live.entities.kinds[live.entities.lookup("Hawaii")] == "GPE"  # the first build's kinds are kept
    assert {int(p) for p in live.mentions[live.mentions[:, 0] == chicago, 1]} == {1}
    # a date the index has, written otherwise in the new article, is the same entity, mentioned in both
    obama_born = live.entities.lookup("August 4, 1961")
    assert live.entities.lookup("4 August 1961") == obama_born
    assert sum(1 for n in live.entities.names if n in ("August 4, 1961", "4 August 1961")) == 1
    assert {int(p) for p in live.mentions[live.mentions[:, 0] == obama_born, 1]} == {0, 1}
    # the segment says which recogniser read it; one other than the index's is said, not passed over
    segments = sorted((tmp_path / "ix" / "segments").iterdir())
    built = json.loads((tmp_path / "ix" / "manifest.json").read_text())["inputs"]["recogniser"]
    assert json.loads((segments[0] / "manifest.json").read_text())["inputs"]["recogniser"] == built
    assert "recogniser_differs" not in json.loads((segments[0] / "manifest.json").read_text())["warnings"]
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    manifest["inputs"]["recogniser"] = {**built, "version": "0.0.1"}
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(manifest))
    more = [{"id": "2", "title": "Sasha Obama", "text": "Sasha Obama was born on June 10, 2001, in Chicago."}]
    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in more))
    capsys.readouterr()
    assert main(["add", "--index", str(tmp_path / "ix"), "--corpus", str(tmp_path / "c.jsonl")]) == 0
    assert "0.0.1" in capsys.readouterr().err
    segments = sorted((tmp_path / "ix" / "segments").iterdir(), key=lambda d: d.stat().st_mtime)
    assert json.loads((segments[-1] / "manifest.json").read_text())["warnings"]["recogniser_differs"]["count"] == 1
