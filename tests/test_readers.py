"""Input readers: WikiMovies and JSONL corpora, KB files, entity lists, MetaQA questions, EntityTable."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from drkit.data.corpus import Article, guess_corpus_format, read_corpus, read_jsonl_corpus, read_wikimovies
from drkit.data.kb import EntityTable, Triple, entities_from_kb, read_entity_list, read_kb
from drkit.data.questions import Question, hops_from_path, load_questions, parse_question_line, read_questions, split_topic
from drkit.errors import ConfigError, DrkitError, InputFormatError, QuestionError
from drkit.util.warnlog import WarningLog


def write(tmp_path, name: str, text: str, newline: str = "\n"):
    path = tmp_path / name
    path.write_bytes(text.replace("\n", newline).encode("utf-8"))
    return path


def wiki(tmp_path, text: str, newline: str = "\n"):
    path = write(tmp_path, "wiki.txt", text, newline)
    log = WarningLog()
    return path, list(read_wikimovies(path, log)), log


# ---------------------------------------------------------------------------------------------
# WikiMovies


def test_wikimovies_articles_split_by_blank_lines(tmp_path):
    text = (
        "1 Kismet\n"
        "2 Kismet is a 1944 film directed by William Dieterle.\n"
        "3 It stars Marlene Dietrich.\n"
        "\n"
        "1 The Mark of Zorro\n"
        "2 The Mark of Zorro is a 1940 film.\n"
    )
    path, arts, log = wiki(tmp_path, text)
    assert arts == [
        Article("1", "Kismet", "Kismet is a 1944 film directed by William Dieterle.\nIt stars Marlene Dietrich.", 1),
        Article("5", "The Mark of Zorro", "The Mark of Zorro is a 1940 film.", 5),
    ]
    assert arts[0].content == "Kismet\nKismet is a 1944 film directed by William Dieterle.\nIt stars Marlene Dietrich."
    assert len(log) == 0


def test_wikimovies_several_blank_lines_and_trailing_blank(tmp_path):
    _, arts, log = wiki(tmp_path, "\n\n1 A\n2 a text\n\n\n   \n1 B\n2 b text\n\n\n")
    assert [(a.title, a.text, a.source_line) for a in arts] == [("A", "a text", 3), ("B", "b text", 8)]
    assert len(log) == 0


def test_wikimovies_line_one_starts_new_article_without_blank_line(tmp_path):
    _, arts, log = wiki(tmp_path, "1 A\n2 first\n3 second\n1 B\n2 third\n")
    assert [(a.key, a.title, a.text) for a in arts] == [("1", "A", "first\nsecond"), ("4", "B", "third")]
    assert len(log) == 0


def test_wikimovies_line_number_gap_is_a_counted_warning(tmp_path):
    path, arts, log = wiki(tmp_path, "1 A\n2 x\n4 y\n5 z\n\n1 B\n3 w\n")
    assert [a.text for a in arts] == ["x\ny\nz", "w"]
    assert log.count("line_number_gap") == 2
    assert len(log) == 2
    examples = log.to_dict()["line_number_gap"]["examples"]
    assert f"{path}:3" in examples[0] and f"{path}:7" in examples[1]


@pytest.mark.parametrize("bad_line", ["foo bar", "x1 A", "2:no space", " 2 leading space", "-1 negative"])
def test_wikimovies_malformed_line_names_file_and_line(tmp_path, bad_line):
    path = write(tmp_path, "wiki.txt", f"1 A\n2 ok\n\n1 B\n{bad_line}\n2 never read\n")
    with pytest.raises(InputFormatError) as info:
        list(read_wikimovies(path, WarningLog()))
    assert info.value.line == 5
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}:5")
    assert isinstance(info.value, DrkitError)


def test_wikimovies_malformed_line_is_raised_lazily_after_earlier_articles(tmp_path):
    path = write(tmp_path, "wiki.txt", "1 A\n2 ok\n\n1 B\nbroken\n")
    it = read_wikimovies(path, WarningLog())
    assert next(it).title == "A"
    with pytest.raises(InputFormatError, match=r":5: "):
        next(it)


def test_wikimovies_empty_title_is_an_error(tmp_path):
    path = write(tmp_path, "wiki.txt", "1 A\n2 x\n\n1\n2 y\n")
    with pytest.raises(InputFormatError) as info:
        list(read_wikimovies(path, WarningLog()))
    assert info.value.line == 4 and info.value.field == "title"
    assert f"{path}:4 (field 'title')" in str(info.value)


def test_wikimovies_title_only_article_is_a_counted_warning(tmp_path):
    path, arts, log = wiki(tmp_path, "1 Lonely\n\n1 B\n2 text\n\n1 Also lonely\n")
    assert [(a.title, a.text) for a in arts] == [("Lonely", ""), ("B", "text"), ("Also lonely", "")]
    assert arts[0].content == "Lonely"
    assert log.count("article_without_text") == 2
    assert len(log) == 2
    assert f"{path}:1" in log.to_dict()["article_without_text"]["examples"][0]


def test_wikimovies_article_not_numbered_from_one(tmp_path):
    _, arts, log = wiki(tmp_path, "1 A\n2 x\n\n2 Starts at two\n3 y\n")
    assert [(a.title, a.text) for a in arts] == [("A", "x"), ("Starts at two", "y")]
    assert log.count("article_not_numbered_from_1") == 1
    assert log.count("line_number_gap") == 0


def test_wikimovies_tab_after_line_number(tmp_path):
    _, arts, log = wiki(tmp_path, "1\tA\n2\tx y\n")
    assert [(a.title, a.text) for a in arts] == [("A", "x y")]
    assert len(log) == 0


def test_wikimovies_numbered_line_without_text(tmp_path):
    _, arts, log = wiki(tmp_path, "1 A\n2\n3 x\n")
    assert [(a.title, a.text) for a in arts] == [("A", "x")]
    assert log.count("empty_line_text") == 1


def test_wikimovies_crlf_line_endings(tmp_path):
    text = "1 Kismet\n2 Kismet is a film.\n\n1 Zorro\n2 Zorro rides.\n3 Again.\n"
    _, lf, lf_log = wiki(tmp_path, text)
    path, crlf, crlf_log = wiki(tmp_path, text, newline="\r\n")
    assert path.read_bytes().count(b"\r\n") == 6
    assert crlf == lf
    assert all("\r" not in a.title and "\r" not in a.text for a in crlf)
    assert len(crlf_log) == len(lf_log) == 0


def test_wikimovies_file_without_final_newline_and_unicode(tmp_path):
    _, arts, _ = wiki(tmp_path, "1 Amélie\n2 Amélie is set in Montmartre — Paris")
    assert arts == [Article("1", "Amélie", "Amélie is set in Montmartre — Paris", 1)]


def test_wikimovies_empty_file(tmp_path):
    _, arts, log = wiki(tmp_path, "")
    assert arts == [] and len(log) == 0


def test_read_corpus_dispatch_and_format_guess(tmp_path):
    w = write(tmp_path, "c.txt", "1 A\n2 x\n")
    j = write(tmp_path, "c.jsonl", json.dumps({"id": "a", "title": "A", "text": "x"}) + "\n")
    assert guess_corpus_format(w) == "wikimovies"
    assert guess_corpus_format(j) == "jsonl"
    assert guess_corpus_format("x.json") == "jsonl"
    assert [a.title for a in read_corpus(w)] == ["A"]
    assert [a.key for a in read_corpus(j)] == ["a"]
    assert [a.key for a in read_corpus(j, "jsonl")] == ["a"]
    with pytest.raises(ConfigError, match="unknown corpus format"):
        read_corpus(w, "xml")


# ---------------------------------------------------------------------------------------------
# JSONL


def jsonl_lines(*objs) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)


def test_jsonl_reads_articles_and_skips_blank_lines(tmp_path):
    path = write(tmp_path, "c.jsonl", jsonl_lines(
        {"id": "k1", "title": " Kismet ", "text": "Kismet is a film. "},
        "",
        {"id": 7, "title": "Zorro", "text": "Zorro rides.", "extra": [1, 2]},
    ))
    log = WarningLog()
    arts = list(read_jsonl_corpus(path, log))
    assert arts == [
        Article("k1", "Kismet", "Kismet is a film.", 1),
        Article("7", "Zorro", "Zorro rides.", 3),
    ]
    assert len(log) == 0


@pytest.mark.parametrize("field", ["id", "title", "text"])
def test_jsonl_missing_field(tmp_path, field):
    obj = {"id": "b", "title": "B", "text": "b"}
    del obj[field]
    path = write(tmp_path, "c.jsonl", jsonl_lines({"id": "a", "title": "A", "text": "a"}, obj))
    with pytest.raises(InputFormatError) as info:
        list(read_jsonl_corpus(path, WarningLog()))
    assert (info.value.line, info.value.field) == (2, field)
    assert f"{path}:2 (field {field!r})" in str(info.value)
    assert "missing" in str(info.value)


@pytest.mark.parametrize("field,value", [
    ("id", 1.5), ("id", True), ("id", None), ("id", ["a"]),
    ("title", 3), ("title", None), ("text", {"a": 1}), ("text", 5),
])
def test_jsonl_wrong_type(tmp_path, field, value):
    obj = {"id": "a", "title": "A", "text": "a"}
    obj[field] = value
    path = write(tmp_path, "c.jsonl", jsonl_lines(obj))
    with pytest.raises(InputFormatError) as info:
        list(read_jsonl_corpus(path, WarningLog()))
    assert (info.value.line, info.value.field) == (1, field)
    assert f"{path}:1 (field {field!r})" in str(info.value)


@pytest.mark.parametrize("bad", ['{"id": "b", "title": "B", "text": }', "{'id': 'b'}", '{"id": "b"', "not json"])
def test_jsonl_invalid_json(tmp_path, bad):
    path = write(tmp_path, "c.jsonl", jsonl_lines({"id": "a", "title": "A", "text": "a"}, "", bad))
    with pytest.raises(InputFormatError) as info:
        list(read_jsonl_corpus(path, WarningLog()))
    assert info.value.line == 3
    assert f"{path}:3" in str(info.value) and "JSON" in str(info.value)


@pytest.mark.parametrize("bad", ["[1, 2]", '"a string"', "3"])
def test_jsonl_not_an_object(tmp_path, bad):
    path = write(tmp_path, "c.jsonl", jsonl_lines(bad))
    with pytest.raises(InputFormatError, match=r":1: expected a JSON object"):
        list(read_jsonl_corpus(path, WarningLog()))


def test_jsonl_duplicate_id(tmp_path):
    path = write(tmp_path, "c.jsonl", jsonl_lines(
        {"id": "a", "title": "A", "text": "a"},
        {"id": "b", "title": "B", "text": "b"},
        {"id": "a", "title": "A2", "text": "a2"},
    ))
    with pytest.raises(InputFormatError) as info:
        list(read_jsonl_corpus(path, WarningLog()))
    assert (info.value.line, info.value.field) == (3, "id")
    assert "duplicate id 'a'" in str(info.value) and "line 1" in str(info.value)


def test_jsonl_integer_and_string_ids_collide(tmp_path):
    path = write(tmp_path, "c.jsonl", jsonl_lines({"id": 1, "title": "A", "text": "a"}, {"id": "1", "title": "B", "text": "b"}))
    with pytest.raises(InputFormatError, match="duplicate id '1'"):
        list(read_jsonl_corpus(path, WarningLog()))


def test_jsonl_empty_article_and_title_only_are_counted_warnings(tmp_path):
    path = write(tmp_path, "c.jsonl", jsonl_lines(
        {"id": "empty", "title": "  ", "text": ""},
        {"id": "titled", "title": "Only a title", "text": " "},
        {"id": "ok", "title": "", "text": "Body without title"},
        {"id": "empty2", "title": "", "text": "\n"},
    ))
    log = WarningLog()
    arts = list(read_jsonl_corpus(path, log))
    assert [(a.key, a.title, a.text, a.source_line) for a in arts] == [
        ("titled", "Only a title", "", 2),
        ("ok", "", "Body without title", 3),
    ]
    assert log.count("empty_article") == 2
    assert log.count("article_without_text") == 1
    assert len(log) == 3
    assert f"{path}:1" in log.to_dict()["empty_article"]["examples"][0]


def test_warning_log_counts_and_keeps_few_examples():
    log = WarningLog(max_examples=2)
    for i in range(5):
        log.add("a", f"a{i}")
    log.add("b", "b0", count=10)
    assert (log.count("a"), log.count("b"), log.count("c"), len(log)) == (5, 10, 0, 15)
    assert log.to_dict() == {"a": {"count": 5, "examples": ["a0", "a1"]}, "b": {"count": 10, "examples": ["b0"]}}
    assert log.lines() == ["warning: 5 x a, e.g. a0", "warning: 10 x b, e.g. b0"]


# ---------------------------------------------------------------------------------------------
# KB and entity lists


def test_read_kb(tmp_path):
    path = write(tmp_path, "kb.txt", "Kismet|directed_by|William Dieterle\n\n Kismet | starred_actors |Marlene Dietrich \n")
    assert list(read_kb(path)) == [
        Triple("Kismet", "directed_by", "William Dieterle", 1),
        Triple("Kismet", "starred_actors", "Marlene Dietrich", 3),
    ]


def test_read_kb_crlf(tmp_path):
    path = write(tmp_path, "kb.txt", "a|r|b\nc|r|d\n", newline="\r\n")
    assert [(t.subject, t.relation, t.object) for t in read_kb(path)] == [("a", "r", "b"), ("c", "r", "d")]


@pytest.mark.parametrize("bad,found", [("Kismet directed_by Dieterle", 0), ("Kismet|directed_by", 1), ("a|b|c|d", 3)])
def test_read_kb_wrong_number_of_bars(tmp_path, bad, found):
    path = write(tmp_path, "kb.txt", f"a|r|b\n\n{bad}\nc|r|d\n")
    with pytest.raises(InputFormatError) as info:
        list(read_kb(path))
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3: ")
    assert f"found {found}" in str(info.value)


@pytest.mark.parametrize("bad,field", [("|r|b", "subject"), ("a| |b", "relation"), ("a|r|", "object"), ("a|r|  ", "object")])
def test_read_kb_empty_field(tmp_path, bad, field):
    path = write(tmp_path, "kb.txt", f"a|r|b\n{bad}\n")
    with pytest.raises(InputFormatError) as info:
        list(read_kb(path))
    assert (info.value.line, info.value.field) == (2, field)
    assert f"{path}:2 (field {field!r}): empty" in str(info.value)


def test_read_entity_list(tmp_path):
    path = write(tmp_path, "ents.txt", "Kismet\n\n  Marlene Dietrich  \n\t\nW.C. Fields", newline="\r\n")
    assert list(read_entity_list(path)) == ["Kismet", "Marlene Dietrich", "W.C. Fields"]


# ---------------------------------------------------------------------------------------------
# EntityTable


def test_entity_table_merges_names_equal_but_for_case():
    table = EntityTable.from_names(["brian cox", "Kismet", "Brian Cox", "Brian Cox", "BRIAN COX", "kismet"])
    assert len(table) == 2
    # ids in order of first sight of each key; display name = the most frequent alias
    assert table.names == ["Brian Cox", "Kismet"]
    assert table.aliases == [["BRIAN COX", "Brian Cox", "brian cox"], ["Kismet", "kismet"]]
    assert table.keys == ["brian cox", "kismet"]


def test_entity_table_display_name_tie_is_deterministic():
    a = EntityTable.from_names(["kismet", "Kismet"])
    b = EntityTable.from_names(["Kismet", "kismet"])
    assert a.names == b.names == ["Kismet"]  # equal votes: the lexicographically smallest alias


def test_entity_table_normalises_whitespace():
    table = EntityTable.from_names(["Marlene  Dietrich", " Marlene Dietrich\t", "Other"])
    assert table.names == ["Marlene Dietrich", "Other"]
    assert table.aliases[0] == ["Marlene Dietrich"]


def test_entity_table_lookup_is_case_insensitive():
    table = EntityTable.from_names(["Brian Cox", "brian cox", "Place Vendôme", "Kismet"])
    assert table.lookup("BRIAN COX") == 0
    assert table.lookup("brian   Cox") == 0
    assert table.lookup("PLACE VENDÔME") == 1
    assert table.lookup("place vendôme") == 1
    assert table.lookup("kismet") == 2
    assert table.lookup("Brian") is None
    assert table.lookup("Place Vendome") is None  # accents are not folded


def test_entity_table_records_round_trip():
    table = EntityTable.from_names(["Brian Cox", "brian cox", "Kismet"])
    back = EntityTable.from_records(json.loads(json.dumps(table.to_records())))
    assert (back.names, back.aliases, back.keys) == (table.names, table.aliases, table.keys)
    assert back.lookup("BRIAN cox") == 0


def test_entities_from_kb():
    triples = [Triple("Kismet", "directed_by", "William Dieterle", 1), Triple("kismet", "has_tags", "Brian Cox", 2),
               Triple("The Shining", "has_tags", "brian cox", 3)]
    table = entities_from_kb(triples)
    assert table.names == ["Kismet", "William Dieterle", "Brian Cox", "The Shining"]
    assert table.aliases[0] == ["Kismet", "kismet"]


# ---------------------------------------------------------------------------------------------
# MetaQA questions


def test_parse_question_line():
    q = parse_question_line("what films did [Brian Cox] act in\tThe Escapist|Red Eye\n", "q.txt", 4)
    assert q == Question("what films did Brian Cox act in", "Brian Cox", ("The Escapist", "Red Eye"), 4)


def test_parse_question_line_strips_answers_and_topic():
    q = parse_question_line("who directed [ Kismet ]?\t William Dieterle | |\r\n")
    assert q.topic == "Kismet"
    assert q.answers == ("William Dieterle",)
    assert q.text == "who directed  Kismet ?"


def test_parse_question_line_without_brackets_has_no_topic():
    q = parse_question_line("what films did Brian Cox act in\tThe Escapist|Red Eye\r\n", "q.txt", 4)
    assert q == Question("what films did Brian Cox act in", None, ("The Escapist", "Red Eye"), 4)


@pytest.mark.parametrize("question,text,topic", [
    ("who directed [Kismet]", "who directed Kismet", "Kismet"),
    ("[ Kismet ] was directed by whom", "Kismet  was directed by whom", "Kismet"),
    ("who directed Kismet", "who directed Kismet", None),
    ("who directed [Kismet", "who directed [Kismet", None),  # an unmatched bracket is text
    ("who directed Kismet]?", "who directed Kismet]?", None),
    ("  who [directed] Kismet  ", "who directed Kismet", "directed"),
    ("[[Kismet]]", "[Kismet]", "Kismet"),  # the innermost pair is the mark
])
def test_split_topic(question, text, topic):
    assert split_topic(question) == (text, topic)


@pytest.mark.parametrize("question,what", [
    ("did [Brian Cox] act with [Kismet]", "2 bracketed entities; mark at most one"),
    ("[a] [b] [c]", "3 bracketed entities"),
    ("what films did [] act in", "empty [topic entity]"),
    ("what films did [ \t ] act in", "empty [topic entity]"),
    ("[] and [Kismet]", "2 bracketed entities"),
])
def test_split_topic_errors(question, what):
    with pytest.raises(QuestionError, match=re.escape(what)):
        split_topic(question)


@pytest.mark.parametrize("line,field,what", [
    ("did [Brian Cox] act with [Kismet]\tA", "question", "2 bracketed entities"),
    ("what films did [] act in\tA", "question", "empty [topic entity]"),
    ("what films did [  ] act in\tA", "question", "empty [topic entity]"),
    ("what films did [Brian Cox] act in\t", "answers", "no answer"),
    ("what films did [Brian Cox] act in\t | |", "answers", "no answer"),
])
def test_parse_question_line_errors(line, field, what):
    with pytest.raises(InputFormatError) as info:
        parse_question_line(line, "qa.txt", 12)
    assert (info.value.line, info.value.field) == (12, field)
    assert str(info.value).startswith(f"qa.txt:12 (field {field!r}): ")
    assert what in str(info.value)


@pytest.mark.parametrize("line,tabs", [("what films did [Brian Cox] act in A", 0), ("a [b]\tc\td", 2)])
def test_parse_question_line_tab_count(line, tabs):
    with pytest.raises(InputFormatError, match=rf"^qa.txt:3: .*found {tabs} tabs"):
        parse_question_line(line, "qa.txt", 3)


def test_read_questions(tmp_path):
    path = write(tmp_path, "qa_dev.txt", "who directed [Kismet]\tWilliam Dieterle\n\nwho acted in [Kismet]\tA|B\n",
                 newline="\r\n")
    qs = list(read_questions(path))
    assert qs == [Question("who directed Kismet", "Kismet", ("William Dieterle",), 1),
                  Question("who acted in Kismet", "Kismet", ("A", "B"), 3)]


def test_read_questions_error_names_file_and_line(tmp_path):
    path = write(tmp_path, "qa_dev.txt", "who directed [Kismet]\tWilliam Dieterle\n\nwho acted in [Kismet] [A]\tA\n")
    with pytest.raises(InputFormatError) as info:
        list(read_questions(path))
    assert info.value.line == 3
    assert str(info.value).startswith(f"{path}:3 (field 'question')")


def test_hops_from_path():
    assert hops_from_path("MetaQA/2-hop/vanilla/qa_dev.txt") == 2
    assert hops_from_path("1-hop/3-hop/qa.txt") == 3
    assert hops_from_path("qa_dev.txt") is None


# ---------------------------------------------------------------------------------------------
# load_questions: the items `drkit train` and `drkit evaluate` answer


ENTITIES = EntityTable.from_names(["Kismet", "William Dieterle", "Marlene Dietrich", "Moon Over Miami", "Walter Lang"])


def link_by_name(text: str):
    """A stand-in for `VirtualKB.parse` on a plain question: the first entity named in it, or QuestionError."""
    for name in ENTITIES.names:
        if name.lower() in text.lower():
            return SimpleNamespace(text=text, topic=ENTITIES.lookup(name), topic_name=name, how=f"linked ({name})")
    raise QuestionError(f"no entity of the index is named in the question {text!r}")


def test_load_questions_links_plain_questions_and_counts_what_it_cannot(tmp_path):
    path = write(tmp_path, "qa.txt", (
        "who directed [Kismet]\tWilliam Dieterle\n"          # 1 bracketed
        "who directed moon over miami\tWalter Lang\n"        # 2 plain, linked
        "\n"                                                  # 3 blank: skipped
        "who directed the film nobody saw\tWalter Lang\n"    # 4 plain, no entity named
        "who directed [Zorro]\tRouben Mamoulian\n"           # 5 bracketed, not an entity
        "did [Kismet] star [Marlene Dietrich]\tyes\n"        # 6 two brackets: malformed
        "this line has no tab\n"                              # 7 malformed
        "who starred in Kismet\tMarlene Dietrich|Nobody\n"   # 8 plain, linked
    ))
    items = load_questions(path, ENTITIES, link_by_name)
    got = [(it.line, it.text, it.topic_name, it.topic, it.how, it.answer_ids.tolist(), it.problem_kind) for it in items]
    assert got == [
        (1, "who directed Kismet", "Kismet", 0, "bracketed", [1], None),
        (2, "who directed moon over miami", "Moon Over Miami", 3, "linked (Moon Over Miami)", [4], None),
        (4, "who directed the film nobody saw", "", -1, "", [4], "unlinked_question_entity"),
        (5, "who directed Zorro", "Zorro", -1, "bracketed", [], "unknown_question_entity"),
        (6, "did [Kismet] star [Marlene Dietrich]\tyes", "", -1, "", [], "malformed_line"),
        (7, "this line has no tab", "", -1, "", [], "malformed_line"),
        (8, "who starred in Kismet", "Kismet", 0, "linked (Kismet)", [2], None),
    ]
    problems = {it.line: it.problem for it in items if it.problem}
    assert problems[4].startswith(f"{path}:4: ") and "no entity of the index is named" in problems[4]
    assert problems[5].startswith(f"{path}:5: ") and "[Zorro]" in problems[5]
    assert problems[6].startswith(f"{path}:6 (field 'question'): ") and "2 bracketed entities" in problems[6]


def test_load_questions_without_a_linker_counts_plain_questions(tmp_path):
    path = write(tmp_path, "qa.txt", "who directed [Kismet]\tWilliam Dieterle\nwho directed Kismet\tWilliam Dieterle\n")
    items = load_questions(path, ENTITIES)
    assert [(it.line, it.topic, it.problem_kind) for it in items] == [(1, 0, None), (2, -1, "unlinked_question_entity")]
    assert "no [question entity] and no linker" in items[1].problem


def test_jsonl_corpus_is_read_in_composed_form_with_its_links_moved(tmp_path):
    """A title or text typed in decomposed form ("Zoe" + a combining diaeresis) reads as the composed form, and a
    link's offsets, given in the decomposed text, cover the same words in the composed one."""
    import unicodedata

    text = unicodedata.normalize("NFD", "Zoë Müller met Léa Séydoux in Zürich.")
    name = unicodedata.normalize("NFD", "Léa Séydoux")
    start = text.index(name)
    mark = text.index("\u0308")  # a link over a combining mark alone covers its whole character
    rows = [{"id": 1, "title": unicodedata.normalize("NFD", "Zoë Müller"), "text": text,
             "links": [{"start": start, "end": start + len(name), "title": name},
                       {"start": mark, "end": mark + 1, "title": "e"}]},
            {"id": 2, "title": "Plain", "text": "ascii", "links": [{"start": 0, "end": 5, "title": "Plain"}]}]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    a, b = read_jsonl_corpus(path, WarningLog())
    assert a.title == "Zoë Müller" and unicodedata.is_normalized("NFC", a.text)
    assert a.text == "Zoë Müller met Léa Séydoux in Zürich."
    (s, e, target), (s2, e2, _) = a.links
    assert a.text[s:e] == "Léa Séydoux" == target and a.text[s2:e2] == "ë"
    assert b.links == ((0, 5, "Plain"),)


def test_names_in_either_unicode_form_are_one_entity(tmp_path):
    import unicodedata

    composed, decomposed = "Zoë Müller", unicodedata.normalize("NFD", "Zoë Müller")
    assert composed != decomposed
    table = EntityTable.from_names([composed, decomposed, "Other"])
    assert len(table) == 2 and table.lookup(decomposed) == table.lookup(composed) == 0
    path = tmp_path / "kb.txt"
    path.write_text(f"{decomposed}|born in|Graz\n", encoding="utf-8")
    (t,) = read_kb(path)
    assert t.subject == composed
    path = tmp_path / "entities.txt"
    path.write_text(decomposed + "\n", encoding="utf-8")
    assert list(read_entity_list(path)) == [composed]
