"""Bad input as a new user would give it: an empty corpus, a file that is not UTF-8, a byte-order mark,
a missing file. Every reader answers with a typed error naming the file and line, or parses correctly."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from drkit.cli import main
from drkit.data.corpus import read_corpus
from drkit.data.kb import read_entity_list, read_kb
from drkit.data.questions import load_questions, read_questions
from drkit.errors import ConfigError, DrkitError, InputFormatError
from drkit.index.build import build_index

KB = "Kismet|directed_by|William Dieterle\n"


def write(tmp_path, name, data: bytes):
    path = tmp_path / name
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------------------------
# An empty corpus is refused


@pytest.mark.parametrize("name,data", [
    ("wiki.txt", b""),
    ("wiki.txt", b"\n\n  \r\n"),
    ("c.jsonl", b""),
    ("c.jsonl", b'{"id": "a", "title": " ", "text": ""}\n'),  # every article empty: none indexed
])
def test_an_empty_corpus_is_refused(tmp_path, name, data):
    corpus = write(tmp_path, name, data)
    kb = write(tmp_path, "kb.txt", KB.encode())
    with pytest.raises(InputFormatError) as info:
        build_index(corpus, tmp_path / "index", kb=kb, log=lambda *a: None)
    assert info.value.path == str(corpus)
    assert "no article" in str(info.value)
    assert not (tmp_path / "index").exists()


def test_a_corpus_without_word_pieces_is_refused(tmp_path):
    corpus = write(tmp_path, "wiki.txt", "1 \u200b\n\n1 \u200b\u200b\n".encode())
    kb = write(tmp_path, "kb.txt", KB.encode())
    with pytest.raises(InputFormatError, match="no passage") as info:
        build_index(corpus, tmp_path / "index", kb=kb, log=lambda *a: None)
    assert info.value.path == str(corpus)
    assert not (tmp_path / "index").exists()


def test_a_bad_line_after_runs_were_written_leaves_nothing(tmp_path):
    """The build streams (runs of 2 articles written before line 5 is read): a bad line there still fails with
    its file and line, leaves no index and no work folder, and an index it was to overwrite as it was."""
    rows = [json.dumps({"id": f"a{i}", "title": f"Title {i}", "text": f"Title {(i + 1) % 6} is here."}) for i in range(6)]
    entities = write(tmp_path, "entities.txt", "".join(f"Title {i}\n" for i in range(6)).encode())
    good = write(tmp_path, "good.jsonl", ("\n".join(rows) + "\n").encode())
    rows[4] = '{"id": "a4", "title": "Title 4", "text": '  # cut off
    corpus = write(tmp_path, "c.jsonl", ("\n".join(rows) + "\n").encode())
    build_index(good, tmp_path / "index", entities=entities, log=lambda *a: None)
    before = {f.name: f.read_bytes() for f in (tmp_path / "index").iterdir()}
    for out, overwrite in ((tmp_path / "new", False), (tmp_path / "index", True)):
        with pytest.raises(InputFormatError) as info:
            build_index(corpus, out, entities=entities, overwrite=overwrite, shard_articles=2, log=lambda *a: None)
        assert info.value.path == str(corpus) and info.value.line == 5
    assert {f.name: f.read_bytes() for f in (tmp_path / "index").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.jsonl", "entities.txt", "good.jsonl", "index"]


def test_cli_index_of_an_empty_corpus_fails_with_the_file_name(tmp_path, capsys):
    corpus = write(tmp_path, "wiki.txt", b"")
    kb = write(tmp_path, "kb.txt", KB.encode())
    assert main(["index", "--corpus", str(corpus), "--kb", str(kb), "--out", str(tmp_path / "index")]) == 2
    err = capsys.readouterr().err
    assert f"{corpus}: no article" in err and "Traceback" not in err


def test_cli_index_of_a_pipe_says_to_give_a_file(tmp_path, capsys):
    import os

    kb = write(tmp_path, "kb.txt", KB.encode())
    fifo = tmp_path / "corpus.fifo"
    os.mkfifo(fifo)  # as --corpus /dev/stdin would be: a stream that can be read only once
    assert main(["index", "--corpus", str(fifo), "--kb", str(kb), "--out", str(tmp_path / "index")]) == 2
    err = capsys.readouterr().err
    assert "is not a regular file" in err and "save a stream to one first" in err and "Traceback" not in err
    assert not (tmp_path / "index").exists()


# ---------------------------------------------------------------------------------------------
# Not UTF-8: file, line and column, for every reader


def read_all(reader: str, path):
    if reader == "wikimovies":
        return list(read_corpus(path, "wikimovies"))
    if reader == "jsonl":
        return list(read_corpus(path, "jsonl"))
    if reader == "kb":
        return list(read_kb(path))
    if reader == "entities":
        return list(read_entity_list(path))
    if reader == "questions":
        return list(read_questions(path))
    raise AssertionError(reader)


GOOD_LINE = {
    "wikimovies": "1 Kismet\n2 Kismet is a film.\n",
    "jsonl": json.dumps({"id": "k", "title": "Kismet", "text": "Kismet is a film."}) + "\n",
    "kb": KB,
    "entities": "Kismet\nWilliam Dieterle\n",
    "questions": "who directed [Kismet]\tWilliam Dieterle\n",
}
READERS = sorted(GOOD_LINE)


@pytest.mark.parametrize("reader", READERS)
def test_a_line_that_is_not_utf8_is_named_by_file_line_and_column(tmp_path, reader):
    good = GOOD_LINE[reader].encode()
    n_good = good.count(b"\n")
    bad = "Amélie".encode("latin-1")  # é as one byte 0xe9: not UTF-8
    data = good + b"\n" + (b"3 " if reader == "wikimovies" else b"") + bad + b"|x|y\n"
    path = write(tmp_path, "input.txt", data)
    with pytest.raises(InputFormatError) as info:
        read_all(reader, path)
    assert (info.value.path, info.value.line) == (str(path), n_good + 2)
    message = str(info.value)
    assert message.startswith(f"{path}:{n_good + 2}: ")
    assert "not UTF-8" in message and "0xe9" in message
    assert f"column {3 + (2 if reader == 'wikimovies' else 0)}" in message  # the é


@pytest.mark.parametrize("reader", READERS)
def test_a_utf16_file_gets_a_hint(tmp_path, reader):
    path = write(tmp_path, "input.txt", GOOD_LINE[reader].encode("utf-16"))
    with pytest.raises(InputFormatError, match=r":1: .*UTF-16.*save it as UTF-8") as info:
        read_all(reader, path)
    assert info.value.line == 1


@pytest.mark.parametrize("reader", READERS)
def test_a_byte_order_mark_is_not_part_of_the_first_line(tmp_path, reader):
    plain = write(tmp_path, "plain.txt", GOOD_LINE[reader].encode())
    with_bom = write(tmp_path, "bom.txt", GOOD_LINE[reader].encode("utf-8-sig"))
    crlf = write(tmp_path, "crlf.txt", GOOD_LINE[reader].replace("\n", "\r\n").encode("utf-8-sig"))
    assert read_all(reader, with_bom) == read_all(reader, plain) == read_all(reader, crlf)


@pytest.mark.parametrize("reader", READERS)
def test_a_missing_file_is_a_typed_error(tmp_path, reader):
    with pytest.raises(DrkitError, match="missing.txt"):
        read_all(reader, tmp_path / "missing.txt")
    with pytest.raises(DrkitError, match="cannot read"):
        read_all(reader, tmp_path)  # a directory


def test_cli_index_of_a_non_utf8_corpus_names_file_and_line(tmp_path, capsys):
    corpus = write(tmp_path, "wiki.txt", b"1 Kismet\n2 ok\n\n1 Am\xe9lie\n")
    kb = write(tmp_path, "kb.txt", KB.encode())
    assert main(["index", "--corpus", str(corpus), "--kb", str(kb), "--out", str(tmp_path / "index")]) == 2
    err = capsys.readouterr().err
    assert f"{corpus}:4: not UTF-8" in err and "codec can't decode" not in err


def test_load_questions_counts_a_non_utf8_line(tmp_path):
    from drkit.data.kb import EntityTable

    path = write(tmp_path, "q.txt", b"who directed [Kismet]\tW\n\nwho directed [Am\xe9lie]\tW\n")
    items = load_questions(path, EntityTable.from_names(["Kismet", "W"]))
    assert [(it.line, it.problem_kind) for it in items] == [(1, None), (3, "malformed_line")]
    assert f"{path}:3: not UTF-8" in items[1].problem
    assert items[0].answer_ids.tolist() == [1] and np.all(items[0].topic == 0)
    with pytest.raises(ConfigError, match="cannot read"):
        load_questions(tmp_path / "missing.txt", EntityTable.from_names(["Kismet"]))


def test_question_types_not_utf8_are_named_by_file_and_line(tmp_path):
    from drkit.qa.evaluate import read_qtypes

    questions = write(tmp_path, "q.txt", b"who directed [Kismet]\tW\r\nwho [A]\tB\n")
    types = write(tmp_path, "qtypes.txt", b"movie_to_director\nmovie_to_\xff\n")
    with pytest.raises(InputFormatError, match=r"qtypes.txt:2: not UTF-8: byte 0xff at column 10"):
        read_qtypes(types, questions)
    types = write(tmp_path, "qtypes.txt", "\ufeffmovie_to_director\r\nactor_to_movie\n\n".encode())
    assert read_qtypes(types, questions) == {1: "movie_to_director", 2: "actor_to_movie"}


@pytest.mark.parametrize("data,what", [
    (b'["directed_by"]', "expected a JSON object"),
    (b'{"directed_by": ["directed by", "directed"]}\xff', "not UTF-8: byte 0xff"),
    (b'{"directed_by": "directed by"}', "expected [forward text, inverse text]"),
])
def test_relation_descriptions_file_errors_name_the_file(tmp_path, data, what):
    from drkit.dense.distant import relation_descriptions
    from drkit.util.warnlog import WarningLog

    path = write(tmp_path, "relations.json", data)
    with pytest.raises(InputFormatError, match=re.escape(what)) as info:
        relation_descriptions(["directed_by"], path, WarningLog())
    assert info.value.path == str(path)
