"""Hyperlinks as mentions (JSONL ``"links": [{"start", "end", "title"}]``, the paper's HotpotQA setting): when
a line has them, they are the mentions of its text, each of its target's entity; the title line is still
linked; a link to a non-entity or overlapping another is counted in the report; a malformed link is an
error naming file, line and field."""

import json

import numpy as np
import pytest

from drkit.errors import InputFormatError
from drkit.index.build import build_index

TEXT_A = "  Bob met Al in Paris, and Alice."  # leading spaces: offsets are into the text as written
ROWS = [
    {"id": "a", "title": "Meeting", "text": TEXT_A,
     "links": [{"start": 2, "end": 5, "title": "Bob Smith"}, {"start": 10, "end": 12, "title": "Alice"},
               {"start": 16, "end": 21, "title": "Paris"}]},
    {"id": "b", "title": "Bob Smith", "text": "Bob Smith is a painter who knows Alice."},  # no links: the linker
    {"id": "c", "title": "Alice", "text": "Alice paints.", "links": []},  # empty: no mention in the text
]


def write(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def mentions_by_article(index):
    out = {}
    for e, p, _, _, cs, ce in np.asarray(index.mentions):
        key = index.article_keys[int(index.passage_article[p])]
        out.setdefault(key, []).append((index.entities.names[int(e)], index.passage_text(int(p))[cs:ce]))
    return out


def test_links_are_the_mentions(tmp_path):
    write(tmp_path / "c.jsonl", ROWS)
    index = build_index(tmp_path / "c.jsonl", tmp_path / "index", entities="titles", log=lambda *a: None)
    got = mentions_by_article(index)
    # "Alice" at the end of a's text is not linked: with links, the linker only reads the title line
    assert got["a"] == [("Meeting", "Meeting"), ("Bob Smith", "Bob"), ("Alice", "Al")]
    assert sorted(got["b"]) == sorted([("Bob Smith", "Bob Smith"), ("Bob Smith", "Bob Smith"), ("Alice", "Alice")])
    assert got["c"] == [("Alice", "Alice")]  # the title line only
    warnings = json.loads((tmp_path / "index" / "report.json").read_text())["warnings"]
    assert warnings["link_target_not_entity"]["count"] == 1  # Paris


def test_overlapping_link_is_counted(tmp_path):
    rows = [{"id": "a", "title": "T", "text": "Bob Smith here", "links": [
        {"start": 0, "end": 9, "title": "Bob Smith"}, {"start": 4, "end": 9, "title": "Alice"}]},
        {"id": "b", "title": "Bob Smith", "text": "x"}, {"id": "c", "title": "Alice", "text": "y"}]
    write(tmp_path / "c.jsonl", rows)
    index = build_index(tmp_path / "c.jsonl", tmp_path / "index", entities="titles", log=lambda *a: None)
    assert mentions_by_article(index)["a"] == [("Bob Smith", "Bob Smith")]  # "T" is too short to link
    warnings = json.loads((tmp_path / "index" / "report.json").read_text())["warnings"]
    assert warnings["overlapping_link"]["count"] == 1


@pytest.mark.parametrize("links, message", [
    ("nope", "must be a list"),
    ([{"start": 0, "end": 3}], "link 0 must be an object with start, end and title"),
    ([{"start": 5, "end": 3, "title": "x"}], "link 0: start and end"),
    ([{"start": 0, "end": 99, "title": "x"}], "link 0: start and end"),
    ([{"start": 0.5, "end": 3, "title": "x"}], "link 0: start and end"),
    ([{"start": 0, "end": 3, "title": ""}], "link 0: title"),
    ([{"start": 0, "end": 1, "title": "x"}], "surrounding whitespace"),
])
def test_bad_links_name_file_line_and_field(tmp_path, links, message):
    rows = [{"id": "ok", "title": "Fine", "text": "fine"}, {"id": "a", "title": "T", "text": " Bob here", "links": links}]
    write(tmp_path / "c.jsonl", rows)
    with pytest.raises(InputFormatError, match=r"c\.jsonl:2 \(field 'links'\)") as exc:
        build_index(tmp_path / "c.jsonl", tmp_path / "index", entities="titles", log=lambda *a: None)
    assert message in str(exc.value)
