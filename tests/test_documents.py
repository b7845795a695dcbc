"""`drkit corpus`: a folder of .txt / .md / .html documents, or a JSONL file of long ones, as a JSONL corpus of passages
(drkit.data.documents)."""

from __future__ import annotations

import json
import random
import re

import pytest

from drkit.cli import main
from drkit.data.corpus import read_jsonl_corpus
from drkit.data.documents import DocumentsConfig, documents_corpus, read_document
from drkit.data.html_text import html_blocks
from drkit.errors import ConfigError, InputFormatError
from drkit.util.warnlog import WarningLog

MARKDOWN = """---
layout: post
title: "Not the title: the heading is"
---
# Marie Curie

Marie Curie was a Polish and naturalised-French physicist and chemist who conducted pioneering research on
radioactivity. She was the first woman to win a Nobel Prize.

## Early life

Maria Skłodowska was born in Warsaw. She studied at Warsaw's clandestine Flying University.
"""


def expected_words(text: str, markdown: bool) -> list[str]:
    """The words a document's passages must hold, in order, found the slow way: every word of the file but the
    front matter's, the first level-1 heading's and the heading marks."""
    lines = text.splitlines()
    if markdown and lines and lines[0].strip() == "---":
        lines = lines[lines.index("---", 1) + 1:]
    words, h1_seen = [], False
    for line in lines:
        if markdown and re.match(r"^# ", line) and not h1_seen:
            h1_seen = True
            continue
        if markdown and re.match(r"^#{1,6} ", line):
            line = line.lstrip("#")
        words += line.split()
    return words


def make_folder(tmp_path):
    d = tmp_path / "docs"
    (d / "people").mkdir(parents=True)
    (d / ".git").mkdir()
    (d / "marie_curie.md").write_text(MARKDOWN, encoding="utf-8")
    (d / "people" / "pierre-curie.txt").write_bytes(b"\xef\xbb\xbfPierre Curie was a French physicist.\r\n\r\n"
                                                    b"He married Marie Curie in 1895.\r\n")
    (d / "people" / "empty.txt").write_text("\n  \n", encoding="utf-8")
    (d / ".git" / "config").write_text("[core]\n", encoding="utf-8")
    (d / "photo.png").write_bytes(b"\x89PNG")
    return d


def test_a_folder_becomes_a_corpus_that_index_reads(tmp_path, capsys):
    d, out = make_folder(tmp_path), tmp_path / "corpus.jsonl"
    assert main(["corpus", "--docs", str(d), "--out", str(out)]) == 0
    said = capsys.readouterr()
    assert "3 passages of 3 documents (2 pages)" in said.out and "1 .png, 1 hidden" in said.out
    assert "document_without_text" in said.err and "empty.txt" in said.err
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["marie_curie.md#1", "marie_curie.md#2", "people/pierre-curie.txt#1"]
    assert [r["title"] for r in rows] == ["Marie Curie", "Marie Curie", "pierre curie"]
    assert rows[1]["text"].startswith("Early life\nMaria Skłodowska was born in Warsaw.")  # a heading opens a passage
    assert rows[2]["text"] == "Pierre Curie was a French physicist.\nHe married Marie Curie in 1895."  # no BOM, no CR
    assert " ".join(rows[0]["text"].split() + rows[1]["text"].split()) == " ".join(expected_words(MARKDOWN, True))
    # what drkit index reads: the same articles
    articles = list(read_jsonl_corpus(out, WarningLog()))
    assert [(a.key, a.title) for a in articles] == [(r["id"], r["title"]) for r in rows]
    assert main(["index", "--corpus", str(out), "--entities", "titles", "--out", str(tmp_path / "index")]) == 0
    manifest = json.loads((tmp_path / "index" / "manifest.json").read_text())
    assert manifest["inputs"]["corpus"]["path"].endswith("corpus.jsonl")
    # an existing output is kept unless --overwrite
    assert main(["corpus", "--docs", str(d), "--out", str(out)]) == 2
    assert "--overwrite" in capsys.readouterr().err
    assert main(["corpus", "--docs", str(d), "--out", str(out), "--overwrite", "--passage-words", "10"]) == 0
    assert len(out.read_text(encoding="utf-8").splitlines()) > 3


def test_titles_from_front_matter_and_file_names_and_one_page_for_one_title(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "a.md").write_text("---\ntitle: 'Paris'\n---\nParis is the capital of France.\n", encoding="utf-8")
    (d / "b.md").write_text("# Paris\n\nParis has 2 million people.\n", encoding="utf-8")
    (d / "new_york-city.txt").write_text("New York is large.\n", encoding="utf-8")
    (d / "c.md").write_text("---\nno closing line\n\nText.\n", encoding="utf-8")  # not front matter: text
    logged = []
    done = documents_corpus(d, tmp_path / "c.jsonl", log=logged.append)
    rows = [json.loads(line) for line in (tmp_path / "c.jsonl").read_text().splitlines()]
    assert {r["id"]: r["title"] for r in rows} == {"a.md#1": "Paris", "b.md#1": "Paris", "c.md#1": "c",
                                                  "new_york-city.txt#1": "new york city"}
    assert rows[2]["text"] == "no closing line\nText."  # without its closing line, the "---" is a horizontal rule
    assert done["pages"] == 3 and done["warnings"]["same_title"]["count"] == 1 and any("b.md" in x for x in logged)


def test_random_documents_keep_every_word_in_order_within_the_limit(tmp_path):
    rng = random.Random(0)
    vocabulary = ["alpha", "Beta", "gamma", "Delta", "epsilon", "zeta", "Eta", "theta"]
    for trial in range(60):
        markdown = trial % 2 == 0
        paragraphs = []
        for _ in range(rng.randint(0, 6)):
            if markdown and rng.random() < 0.25:
                paragraphs.append("#" * rng.randint(1, 3) + " " + " ".join(rng.choices(vocabulary, k=rng.randint(1, 3))))
                continue
            sentences = [" ".join(rng.choices(vocabulary, k=rng.randint(1, 14))).capitalize() + "."
                         for _ in range(rng.randint(1, 6))]
            words = " ".join(sentences).split()
            paragraphs.append("\n".join(" ".join(words[i:i + 7]) for i in range(0, len(words), 7)))  # several lines
        text = "\n\n".join(paragraphs) + "\n"
        path = tmp_path / f"doc{trial}{'.md' if markdown else '.txt'}"
        path.write_text(text, encoding="utf-8")
        limit = rng.choice([5, 12, 30, 1000])
        got = read_document(path, path.name, DocumentsConfig(passage_words=limit))
        assert [p.id for p in got] == [f"{path.name}#{i}" for i in range(1, len(got) + 1)]
        assert [w for p in got for w in p.text.split()] == expected_words(text, markdown)  # no word lost, merged or moved
        for p in got:
            assert p.text.split(), p
            if len(p.text.split()) > limit:  # only a heading (no full stop) and what follows it, within the limit
                head, _, rest = p.text.partition("\n")
                assert "." not in head and "\n" not in rest and len(rest.split()) <= limit, (limit, p.text)


def test_bad_input_is_named(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "ok.txt").write_text("Fine.\n", encoding="utf-8")
    (d / "latin1.txt").write_bytes(b"first line\ncaf\xe9\n")
    with pytest.raises(InputFormatError, match=r"latin1\.txt:2: not UTF-8: byte 0xe9"):
        documents_corpus(d, tmp_path / "c.jsonl")
    assert not (tmp_path / "c.jsonl").exists() and not (tmp_path / "c.jsonl.tmp").exists()  # nothing half written
    with pytest.raises(ConfigError, match="neither a folder of documents .* nor a JSONL file"):
        documents_corpus(d / "latin1.csv", tmp_path / "c.jsonl")
    (tmp_path / "none").mkdir()
    (tmp_path / "none" / "a.pdf").write_bytes(b"%PDF")
    with pytest.raises(ConfigError, match=r"no \.txt, \.md, \.markdown, \.html or \.htm file.*\.pdf"):
        documents_corpus(tmp_path / "none", tmp_path / "c.jsonl")
    with pytest.raises(ConfigError, match="passage_words"):
        DocumentsConfig(passage_words=0)
    (tmp_path / "blank").mkdir()
    for name in ("empty.md", "spaces.txt"):
        (tmp_path / "blank" / name).write_text("  \n\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"no text in its 2 documents, so no passage to write"):
        documents_corpus(tmp_path / "blank", tmp_path / "c.jsonl")
    with pytest.raises(ConfigError, match=r"empty\.md: no text in it"):
        documents_corpus(tmp_path / "blank" / "empty.md", tmp_path / "c.jsonl")
    assert not (tmp_path / "c.jsonl").exists() and not (tmp_path / "c.jsonl.tmp").exists()


HTML = """<!doctype html>
<html><head><title>Curie family</title><style>p { color: red }</style>
<script>var x = "<p>not text</p>";</script></head>
<body>
<nav><a href="/">Home</a></nav>
<h1>The Curie <i>family</i></h1>
<p>Pierre and Marie Cu<b>rie</b> shared the 1903 Nobel Prize &amp; more.<br>Their daughter Ir&egrave;ne
also won one.</p>
<h2>Children</h2>
<ul><li>Irène Joliot-Curie</li><li>Ève Curie</li></ul>
</body></html>
"""


def test_html_pages(tmp_path):
    d = tmp_path / "docs"
    d.mkdir()
    (d / "curie.html").write_text(HTML, encoding="utf-8")
    (d / "untitled.htm").write_text("<html><head><title> Radium\n institute </title></head><p>Paris.</p></html>",
                                    encoding="utf-8")
    (d / "bare.html").write_text("<p>Just text.</p>", encoding="utf-8")
    documents_corpus(d, tmp_path / "c.jsonl")
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "c.jsonl").read_text(encoding="utf-8").splitlines())}
    assert rows["curie.html#1"]["title"] == "The Curie family"  # <h1>, its inline tag joined
    assert rows["curie.html#1"]["text"] == ("Home\nPierre and Marie Curie shared the 1903 Nobel Prize & more.\n"
                                            "Their daughter Irène also won one.")  # <br> ends a line, &amp; decoded
    assert rows["curie.html#2"]["text"] == "Children\nIrène Joliot-Curie\nÈve Curie"  # <h2> opens, each <li> a line
    assert rows["untitled.htm#1"]["title"] == "Radium institute" and rows["bare.html#1"]["title"] == "bare"
    assert "not text" not in json.dumps(rows) and "color" not in json.dumps(rows)
    (d / "bad.html").write_bytes(b"<p>ok</p>\n<p>\xff</p>\n")
    with pytest.raises(InputFormatError, match=r"bad\.html:2: not UTF-8"):
        documents_corpus(d, tmp_path / "c2.jsonl")


def test_random_html_keeps_the_text_inline_tags_join_words(tmp_path):
    rng = random.Random(1)
    vocabulary = ["alpha", "Beta", "gamma", "Delta", "epsilon", "zeta"]
    for trial in range(40):
        plain, html = [], ["<html><body>"]
        for _ in range(rng.randint(1, 6)):
            tag = rng.choice(["p", "li", "div", "h2", "td"])
            words = rng.choices(vocabulary, k=rng.randint(1, 12))
            plain += words
            marked = []
            for w in words:
                cut = rng.randint(0, len(w))  # an inline tag inside a word, or around all of it (cut 0)
                marked.append(f"{w[:cut]}<b>{w[cut:]}</b>" if rng.random() < 0.4 else w)
            html.append(f"<{tag}>" + "\n".join(" ".join(marked[i:i + 3]) for i in range(0, len(marked), 3)) + f"</{tag}>")
            if rng.random() < 0.3:
                html.append("<script>if (a < b) { skipped(); }</script>")
        html.append("</body></html>")
        path = tmp_path / f"p{trial}.html"
        path.write_text("".join(html), encoding="utf-8")
        got = read_document(path, path.name, DocumentsConfig(passage_words=rng.choice([3, 10, 100])))
        assert " ".join(w for p in got for w in p.text.split()) == " ".join(plain)


def test_a_jsonl_file_of_long_documents_is_cut_into_passages(tmp_path):
    long_text = "First paragraph. It has two sentences.\n\nSecond paragraph,\nits lines joined.\n  \nThird."
    rows = [{"id": "a", "title": "Alpha", "text": long_text},
            {"id": 7, "title": "Seven", "text": "Line one.\nLine two."},  # no blank line: each line a paragraph
            {"id": "e", "title": "Empty", "text": ""}]
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    logged = []
    done = documents_corpus(src, tmp_path / "out.jsonl", DocumentsConfig(passage_words=6), log=logged.append)
    got = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [(r["id"], r["title"], r["text"]) for r in got] == [
        ("a#1", "Alpha", "First paragraph. It has two sentences."),
        ("a#2", "Alpha", "Second paragraph, its lines joined.\nThird."),
        ("7#1", "Seven", "Line one.\nLine two.")]
    assert done["documents"] == 3 and done["passages"] == 3 and any("document_without_text" in x for x in logged)
    # the reader of a corpus reads it; a document with links, or --out being --docs, is refused
    assert len(read_jsonl_corpus(tmp_path / "out.jsonl", WarningLog()).__next__().text) > 0
    with pytest.raises(ConfigError, match="would be --docs itself"):
        documents_corpus(src, src, overwrite=True)
    src.write_text(json.dumps({"id": "x", "title": "X", "text": "X is.", "links": []}) + "\n", encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"docs\.jsonl:1 \(field 'links'\)"):
        documents_corpus(src, tmp_path / "o2.jsonl")
    src.write_text('{"id": "x", "title": "X"}\n', encoding="utf-8")
    with pytest.raises(InputFormatError, match=r"docs\.jsonl:1 \(field 'text'\): missing field"):
        documents_corpus(src, tmp_path / "o3.jsonl")
    assert not (tmp_path / "o3.jsonl").exists()


def md_passages(tmp_path, text: str, name: str = "t.md", limit: int = 120) -> list[tuple[str, str]]:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return [(p.title, p.text) for p in read_document(path, name, DocumentsConfig(passage_words=limit))]


def test_markdown_code_fences_rules_setext_headings_and_front_matter(tmp_path):
    # a "#" line inside a fenced code block is text, not a heading (nor the title)
    assert md_passages(tmp_path, "Intro.\n\n```bash\n# install it\npip install x\n```\n\nMore.\n", "readme.md") == [
        ("readme", "Intro.\n# install it pip install x\nMore.")]  # the fences are markup, the code as written
    assert md_passages(tmp_path, "~~~\n# a\n```\n# b\n~~~\n# Title\n") == [("Title", "# a ``` # b")]
    # a horizontal rule at the top is not front matter: nothing after it is lost
    assert md_passages(tmp_path, "---\n\nSome text that matters.\n\n---\n\nMore text.\n") == [
        ("t", "Some text that matters.\nMore text.")]
    assert md_passages(tmp_path, "---\nA poem begins here.\nIt trails off\n...\nand continues.\n") == [
        ("t", "A poem begins here. It trails off ... and continues.")]
    assert md_passages(tmp_path, "---\ntitle: 'FM'\ntags:\n  - a\n---\nBody.\n") == [("FM", "Body.")]
    # setext headings: "====" the title, "----" a heading that opens a passage
    assert md_passages(tmp_path, "Marie Curie\n===\n\nShe was.\n\nLife\n----\n\nBorn in Warsaw.\n") == [
        ("Marie Curie", "She was."), ("Marie Curie", "Life\nBorn in Warsaw.")]
    # headings in a row open one passage together; a heading alone is a passage only at the end
    assert md_passages(tmp_path, "# T\n\n## A\n\n## B\n\ntext here.\n\n## C\n") == [("T", "A\nB\ntext here."), ("T", "C")]


def test_html_titles_headings_and_blocks_lose_no_text(tmp_path):
    def html(text: str) -> list[tuple[str, str]]:
        path = tmp_path / "t.html"
        path.write_text(text, encoding="utf-8")
        return [(p.title, p.text) for p in read_document(path, "t.html")]

    assert html("<p>a</p><title>unclosed title<p>Lost?</p><p>Also?</p>") == [("t", "a\nunclosed title\nLost?\nAlso?")]
    assert html("<body><title>Body</title><p>Text.</p></body>") == [("t", "Body\nText.")]  # a body's title is text
    assert html("<body><svg><title>Close icon</title></svg><p>Text.</p></body>") == [("t", "Close icon\nText.")]
    assert html("<head><title>Never closed</head><body><p>w</p>") == [("Never closed", "w")]
    assert html("<p>Before</p><noscript>Enable JS<p>After</p>") == [("t", "Before\nEnable JS\nAfter")]
    assert html("<details><summary>More</summary>Hidden</details><select><option>A</option><option>B</option></select>") \
        == [("t", "More\nHidden\nA\nB")]
    assert html("<h1>Marie<br>Curie</h1><h2><div>Early</div> life</h2><p>Born.</p>") == [("Marie Curie", "Early life\nBorn.")]


def test_out_may_not_be_a_document_nor_a_folder_and_linked_folders_are_counted(tmp_path):
    d = make_folder(tmp_path)
    before = (d / "marie_curie.md").read_text(encoding="utf-8")
    for out in (d / "marie_curie.md", d / "corpus.txt"):
        with pytest.raises(ConfigError, match="would be a document of --docs"):
            documents_corpus(d, out, overwrite=True)
    assert (d / "marie_curie.md").read_text(encoding="utf-8") == before
    with pytest.raises(ConfigError, match="is a folder"):
        documents_corpus(d, tmp_path, overwrite=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "linked.txt").write_text("Linked.\n", encoding="utf-8")
    (d / "link").symlink_to(other, target_is_directory=True)
    done = documents_corpus(d, d / "corpus.jsonl", log=lambda line: None)  # inside --docs, but not a document
    assert done["left_out"]["linked folder"] == 1 and done["documents"] == 3


def test_markdown_tables_are_rows_of_header_cell_pairs(tmp_path):
    table = "| name | born | place |\n|------|:----:|------:|\n| Marie Curie | 1867 | Warsaw |\n| Pierre Curie | | Paris |\n"
    assert md_passages(tmp_path, "# Curies\n\nIntro.\n\n" + table + "\nAfter.\n") == [
        ("Curies", "Intro.\nname: Marie Curie; born: 1867; place: Warsaw\nname: Pierre Curie; place: Paris\nAfter.")]
    # a table may follow a paragraph's last line; a heading ends it; extra cells and escaped pipes are kept
    assert md_passages(tmp_path, "Intro\na | b\n--|--\n1 | 2 | 3\n\\| x | y\n## Next\ntext\n") == [
        ("t", "Intro\na: 1; b: 2; 3\na: | x; b: y"), ("t", "Next\ntext")]
    # a header no row uses is a line; pipes without a delimiter row of as many cells are text
    assert md_passages(tmp_path, "| only | header |\n|---|---|\n\na | b\n|---|---|---|\n\nx | y\n") == [
        ("t", "only; header\na | b |---|---|---|\nx | y")]
    # a column no row fills: the header is a line; an ATX heading is never a table's header
    assert md_passages(tmp_path, "| a | b |\n|---|---|\n| 1 |\n| 2 | |\n") == [("t", "a; b\na: 1\na: 2")]
    assert md_passages(tmp_path, "# R | 2024\n|---|---|\n| a | b |\n") == [("R | 2024", "|---|---| | a | b |")]
    # inside a code block a table is text; "x | y" over "---" is a setext heading, as before
    assert md_passages(tmp_path, "```\n| a | b |\n|---|---|\n```\n\nx | y\n---\ntext\n") == [
        ("t", "| a | b | |---|---|"), ("t", "x | y\ntext")]


def test_random_markdown_and_html_tables_against_a_slow_reading(tmp_path):
    rng = random.Random(2)
    vocabulary = ["alpha", "Beta", "gamma", "Delta 7", "epsilon", "1867"]
    for trial in range(40):
        width = rng.randint(1, 4)
        header = [" ".join(rng.choices(vocabulary, k=rng.randint(1, 2))) for _ in range(width)]
        rows = [[" ".join(rng.choices(vocabulary, k=rng.randint(0, 3))) for _ in range(width)]
                for _ in range(rng.randint(0, 4))]
        said = [r for r in rows if any(r)]
        expected = ["; ".join(f"{h}: {c}" for h, c in zip(header, r) if c) for r in said]
        if any(not any(r[k] for r in said) for k in range(width)):  # a header cell no row said: the header's words
            expected.insert(0, "; ".join(header))
        md = "Before.\n\n| " + " | ".join(header) + " |\n|" + "---|" * width + "\n"
        md += "".join("| " + " | ".join(r) + " |\n" for r in rows)
        assert md_passages(tmp_path, md + "\nAfter.\n", limit=1000) == [("t", "\n".join(["Before.", *expected, "After."]))]
        html = "<p>Before.</p><table><tr>" + "".join(f"<th>{h}</th>" for h in header) + "</tr>"
        html += "".join("<tr>" + "".join(f"<td>{c.replace(' ', ' <b>', 1)}</td>" if rng.random() < 0.5 else f"<td>{c}"
                                         for c in r) + "</tr>" for r in rows)
        path = tmp_path / "t.html"
        path.write_text(html + "</table><p>After.</p>", encoding="utf-8")
        got = read_document(path, "t.html", DocumentsConfig(passage_words=1000))
        assert [p.text for p in got] == ["\n".join(["Before.", *expected, "After."])], html


def test_html_tables_infoboxes_nested_and_unclosed(tmp_path):
    def html(text: str) -> list[str]:
        path = tmp_path / "t.html"
        path.write_text(text, encoding="utf-8")
        return [p.text for p in read_document(path, "t.html")]

    infobox = ("<table class=infobox><tr><th colspan=2>Marie Curie</th></tr><tr><th>Born</th><td>7 November 1867"
               "<br>Warsaw</td></tr><tr><th>Spouse</th><td><a href=x>Pierre</a> Curie</td></tr></table><p>Text.</p>")
    assert html(infobox) == ["Marie Curie\nBorn: 7 November 1867 Warsaw\nSpouse: Pierre Curie\nText."]
    nested = ("<table><caption>Prizes</caption><thead><tr><th>Year</th><th>Prize</th></tr></thead><tbody><tr><td>1903"
              "</td><td>Physics</td></tr><tr><td>1911<td>Chemistry <table><tr><td>alone</td></tr></table></td></tbody>")
    assert html(nested) == ["Prizes\nYear: 1903; Prize: Physics\nYear: 1911; Prize: Chemistry alone"]  # never closed
    assert html("<td>a</td><tr><td>b</td></tr>") == ["a\nb"]  # cells outside a table are blocks, as before
    # a header row over rows that open with a <th> (a filmography): every cell under its column
    assert html("<table><tr><th>Year</th><th>Film</th></tr><tr><th>1999</th><td>The Matrix</td></tr></table>") == [
        "Year: 1999; Film: The Matrix"]
    assert html("<table><tr><th colspan=2>Films</th></tr><tr><th>Year</th><th>Film</th></tr><tr><td>1999</td><td>The "
                "Matrix</td></tr></table>") == ["Films\nYear: 1999; Film: The Matrix"]  # a title row, then the header
    assert html("<table><tr><th></th><th>2019</th></tr><tr><th>Revenue</th><td>10</td></tr></table>") == [
        "Revenue: 2019: 10"]  # an empty corner: the row's own header leads
    # colspan and rowspan; a column no row fills keeps its header as a line
    assert html("<table><tr><th>A</th><th>B</th><th>C</th></tr><tr><td rowspan=2>x</td><td>1</td><td>2</td></tr>"
                "<tr><td>3</td><td>4</td></tr></table>") == ["A: x; B: 1; C: 2\nB: 3; C: 4"]
    assert html("<table><tr><th>A</th><th>B</th><th>C</th></tr><tr><td colspan=2>x</td><td>y</td></tr></table>") == [
        "A; B; C\nA: x; C: y"]
    assert html("<table><tr><td colspan='x'>a</td><td rowspan=99999>b</td></tr><tr><td>c</td></tr></table>") == ["a; b\nc"]
    # a heading in a cell (a layout table) is a heading: the row ends there; an <h1> there is the title
    assert html("<table><tr><td>1</td><td>2<h2>Next</h2><p>after</p>") == ["1; 2", "Next\nafter"]
    path = tmp_path / "t.html"
    path.write_text("<table><tr><td><h1>Site</h1><p>Body text.</p></td></tr></table>", encoding="utf-8")
    assert [(p.title, p.text) for p in read_document(path, "t.html")] == [("Site", "Body text.")]


def test_markdown_inline_markup_is_read_as_shown(tmp_path):
    from drkit.data.markdown import inline

    assert inline('See [Marie Curie](https://en.wikipedia.org/wiki/Marie_Curie "t") and ![Warsaw, 1867](w.png).') == \
        "See Marie Curie and Warsaw, 1867."
    assert inline("**Bold**, *it*, _it_, ~~gone~~, ***both***; snake_case_name, 2*3*4, a * b * c, *.md") == \
        "Bold, it, it, gone, both; snake_case_name, 2*3*4, a * b * c, *.md"
    assert inline("`pip install [x](y)`, ``a ` b``, \\*not it\\*, \\[x\\](y)") == "pip install [x](y), a ` b, *not it*, [x](y)"
    assert inline("[Curie][1], [Curie][], <https://x.org/a_b_c>, <me@x.org>, <b>html</b>, [a (b)](https://x.org/a_(b))",
                  frozenset({"1", "curie"})) == "Curie, Curie, https://x.org/a_b_c, me@x.org, <b>html</b>, a (b)"
    # a reference whose label the document does not define is text (m[i][j], a citation [1][2])
    assert inline("m[i][j], Warsaw.[1][2] [x]") == "m[i][j], Warsaw.[1][2] [x]"
    # code inside a link's text; a code span ending in a backslash; an address keeps its marks; intraword __ and **
    assert inline("[`pip install`](https://pip.pypa.io), `C:\\Users\\` and `\\`, <http://x.org/_a_*b*>") == \
        "pip install, C:\\Users\\ and \\, http://x.org/_a_*b*"
    assert inline("foo__bar__baz, _Class__attr, 2**10, *a `b` c*, [a [b] c](http://u.org)") == \
        "foo__bar__baz, _Class__attr, 2**10, a b c, a [b] c"
    # in a document: a link across lines, headings, table cells; code blocks and link definitions
    text = ("# [Marie Curie](https://x.org)\n\nShe was [born in\nWarsaw](https://x.org/w) in **1867**.\n\n"
            "| name | link |\n|---|---|\n| *Pierre* | [page](https://x.org/p) |\n\n```\n**kept** [as](written)\n```\n\n"
            "[1]: https://x.org/definition\n[^1]: A footnote.\n\n## ![](icon.png) Life\n\nSee [Curie][1].\n\n"
            "    def f(*args, **kw): m[i][j] = a__b\n")
    assert md_passages(tmp_path, text) == [
        ("Marie Curie", "She was born in Warsaw in 1867.\nname: Pierre; link: page\n**kept** [as](written)\n"
                        "[^1]: A footnote."), ("Marie Curie", "Life\nSee Curie.\ndef f(*args, **kw): m[i][j] = a__b")]


def test_random_markdown_markup_keeps_every_word_shown(tmp_path):
    rng = random.Random(3)
    vocabulary = ["alpha", "Beta", "gamma_delta", "2*3", "epsilon", "Zeta"]
    marks = [lambda w: f"**{w}**", lambda w: f"*{w}*", lambda w: f"_{w}_", lambda w: f"[{w}](https://x.org/{w}_(1))",
             lambda w: f"`{w}`", lambda w: f"![{w}](img/{w}.png)", lambda w: f"~~{w}~~", lambda w: w]
    for trial in range(60):
        words = rng.choices(vocabulary, k=rng.randint(1, 30))
        marked = [rng.choice(marks)(w) for w in words]
        lines = [" ".join(marked[i:i + 5]) for i in range(0, len(marked), 5)]
        got = md_passages(tmp_path, "\n".join(lines) + "\n", limit=1000)
        assert [w for _, text in got for w in text.split()] == words, lines


def test_one_document_and_a_missing_path(tmp_path):
    d = make_folder(tmp_path)
    done = documents_corpus(d / "marie_curie.md", tmp_path / "one.jsonl", log=lambda line: None)
    rows = [json.loads(line) for line in (tmp_path / "one.jsonl").read_text(encoding="utf-8").splitlines()]
    assert done["documents"] == 1 and [r["id"] for r in rows] == ["marie_curie.md#1", "marie_curie.md#2"]
    assert rows[0]["title"] == "Marie Curie"
    with pytest.raises(ConfigError, match="does not exist"):
        documents_corpus(tmp_path / "nowhere", tmp_path / "x.jsonl")
    with pytest.raises(ConfigError, match="neither a folder"):
        documents_corpus(d / "photo.png", tmp_path / "x.jsonl")


def test_random_tag_soup_loses_no_word(tmp_path):
    """Tables, cells, headings and blocks opened and closed at random (unclosed, stray, nested): no error, and
    every word outside <script> is in the passages."""
    rng = random.Random(4)
    tags = ["table", "tr", "td", "th", "p", "h2", "h1", "div", "thead", "caption", "li", "b"]
    for trial in range(200):
        parts, words, in_script = [], [], False
        for k in range(rng.randint(1, 40)):
            roll = rng.random()
            if roll < 0.35:
                word = f"w{trial}x{k}"
                parts.append(f" {word} ")
                words += [] if in_script else [word]
            elif roll < 0.4:
                parts.append("</script>" if in_script else "<script>")
                in_script = not in_script
            elif roll < 0.45:
                parts.append("<br>")
            else:
                tag = rng.choice(tags)
                span = f" colspan={rng.randint(0, 3)}" if tag in ("td", "th") and rng.random() < 0.3 else ""
                span += f" rowspan={rng.choice(['2', 'x', '0'])}" if tag in ("td", "th") and rng.random() < 0.3 else ""
                parts.append(f"</{tag}>" if rng.random() < 0.4 else f"<{tag}{span}>")
        path = tmp_path / "soup.html"
        path.write_text("".join(parts), encoding="utf-8")
        blocks, _ = html_blocks(path)  # (an unclosed <h1> that takes the rest is the title: read_document's choice)
        shown = {w for _, text, _ in blocks for w in re.findall(r"w\d+x\d+", text)}
        assert set(words) <= shown, "".join(parts)


def test_random_markdown_soup_loses_no_word(tmp_path):
    """Lines of tables, pipes, headings, rules, fences, indented code and inline marks in random order: every
    word a reader of the page sees (not a link's address) is in the blocks."""
    from drkit.data.markdown import text_blocks

    rng = random.Random(5)
    for trial in range(200):
        lines, words = [], []
        for k in range(rng.randint(1, 25)):
            word = f"w{trial}x{k}"
            words.append(word)
            lines.append(rng.choice([
                word, f"| {word} | b |", "|---|---|", f"a | {word}", "---", f"## {word}", "```", f"    {word} *x*",
                f"**{word}**", f"[{word}](http://x.org/{word}_(1))", f"`{word}`", f"*{word} [t](u)*", f"{word}\\*", "",
                f"> {word}", f"- {word}", f"{word} | c |", "====", f"[{word}]: http://x.org"]))
            if "]: http" in lines[-1] or word not in lines[-1]:
                words.pop()  # a link reference definition is markup; a line without the word
        blocks = text_blocks(list(enumerate(lines, 1)), True)
        shown = {w for _, text, _ in blocks for w in re.findall(r"w\d+x\d+", text)}
        assert set(words) <= shown, "\n".join(lines)


def test_a_jsonl_file_of_markdown_documents(tmp_path):
    text = "## Life\nBorn in [Warsaw](https://x.org).\n\n| year | prize |\n|---|---|\n| 1903 | **Physics** |\n"
    src = tmp_path / "docs.jsonl"
    src.write_text(json.dumps({"id": "mc", "title": "Marie Curie", "text": text}) + "\n", encoding="utf-8")
    documents_corpus(src, tmp_path / "md.jsonl", DocumentsConfig(jsonl_markup="markdown"))
    got = [json.loads(line) for line in (tmp_path / "md.jsonl").read_text().splitlines()]
    assert [(r["id"], r["title"], r["text"]) for r in got] == [
        ("mc#1", "Marie Curie", "Life\nBorn in Warsaw.\nyear: 1903; prize: Physics")]
    documents_corpus(src, tmp_path / "plain.jsonl", DocumentsConfig())  # text, as before: nothing read as markup
    assert "[Warsaw](https://x.org)" in (tmp_path / "plain.jsonl").read_text()
    with pytest.raises(ConfigError, match="jsonl_markup"):
        DocumentsConfig(jsonl_markup="html")


def test_markdown_lists_quotes_and_rules_are_markup(tmp_path):
    from drkit.data.markdown import text_blocks

    def blocks(text: str) -> list[str]:
        return [b for _, b, _ in text_blocks(list(enumerate(text.split("\n"), 1)), True)]

    # each item a paragraph without its marker; a task's box, a lazy line, an indented paragraph under it included
    assert blocks("Shopping:\n\n- milk\n- [x] eggs\n  and ham\n* tea\n\n    more on tea\n+ jam\n\nAfter the list.") == [
        "Shopping:", "milk", "eggs and ham", "tea", "more on tea", "jam", "After the list."]
    # numbered items keep their numbers (the page shows them); nested items; an empty item is nothing, a deeper
    # "- " right after a line goes on its paragraph (CommonMark's lazy line)
    assert blocks("Steps:\n1. Boil\n2) Stir\n   well\n   - deeper\n      - deepest\n-\n3. Serve\n          - lazy") == [
        "Steps:", "1. Boil", "2) Stir well", "deeper", "deepest", "3. Serve - lazy"]
    # a number interrupts a paragraph only from 1 or in a numbered list: "1999." goes on the sentence
    assert blocks("It was the year\n1999. It rained.\n\nthe year\n1. one\n\n- formed in\n1999. It rained\n2004.") == [
        "It was the year 1999. It rained.", "the year", "1. one", "formed in 1999. It rained 2004."]
    assert blocks("1. a\n   - sub\n2. b\n   - sub\n   3) c") == ["1. a", "sub", "2. b", "sub 3) c"]  # 3) is no "1." item
    # code under an item is indented 4 beyond its text, a fence as its text is; the fence's lines are code
    assert blocks("- Define it:\n\n        def __init__(self):\n\n  after\n\n1. Add:\n\n    ```yaml\n    steps:\n"
                  "      - uses: x@v4\n    ```\n\n   *Then* run.\n- [ ]\n- [x] done") == [
        "Define it:", "def __init__(self):", "after", "1. Add:", "steps: - uses: x@v4", "Then run.", "done"]
    # after the list, an indented block is code again; block quotes lose their marks; rules end paragraphs
    assert blocks("- a\n\nprose\n\n    x = *y*\n\n> quoted *text*\n> > deeper\n\ntext\n* * *\nmore\n- - -\n___") == [
        "a", "prose", "x = *y*", "quoted text deeper", "text", "more"]
    # a fence in a quote closes in it; a line of code spans is no fence; a quote of a million marks reads at once
    assert blocks("> ```\n> x = *1*\n> ```\n\n# Usage\n\n```pip install drkit``` then *run*") == [
        "x = *1*", "Usage", "pip install drkit then run"]
    assert blocks(">" * 1_000_000 + " deep") == ["deep"]
    # emphasis and numbers that are not markers stay words
    assert blocks("*it* and -5 degrees\n1.5 million, 2*3") == ["it and -5 degrees 1.5 million, 2*3"]


def test_random_markdown_lists_against_a_slow_reading(tmp_path):
    """Random lists (markers, nesting, task boxes, lazy and indented continuation lines, blank lines between items)
    after an intro paragraph: the blocks are the intro, then each item's words (its number first) and each indented
    paragraph's, in order."""
    from drkit.data.markdown import text_blocks

    rng = random.Random(11)
    vocabulary = ["alpha", "Beta", "gamma", "Delta", "epsilon", "zeta", "Eta", "theta", "iota."]
    for trial in range(300):
        lines, expected = ["Intro line.", ""], ["Intro line."]
        content = 0  # the column of the last item's text: a nested item is indented less than 4 beyond it
        for k in range(rng.randint(1, 8)):
            marker = rng.choice(["-", "*", "+", "1.", "2.", "10)", "3)"])
            indent = 0 if k == 0 else rng.choice([0, 0, 2, content, content + 2])
            box = rng.choice(["", "", "[ ] ", "[x] "])
            words = rng.choices(vocabulary, k=rng.randint(1, 5))
            if marker[0].isdigit() and int(marker[:-1]) != 1 and lines[-1]:
                lines.append("")  # a numbered line but 1 may go on a paragraph (the exact cases say where)
            lines.append(f"{' ' * indent}{marker} {box}{' '.join(words)}")
            content = indent + len(marker) + 1
            if marker[0].isdigit():
                words = [marker] + words  # a number stays, a bullet and a box do not
            if rng.random() < 0.3:  # a lazy line, or one indented under the item
                more = rng.choices(vocabulary, k=rng.randint(1, 4))
                lines.append(rng.choice(["", "  ", "    ", "\t"]) + " ".join(more))
                words += more
            expected.append(" ".join(words))
            if rng.random() < 0.3:  # a paragraph of its own under the item, after a blank line
                under = rng.choices(vocabulary, k=rng.randint(1, 4))
                lines += ["", rng.choice(["  ", "    ", "     ", "\t"]) + " ".join(under)]
                expected.append(" ".join(under))
            if rng.random() < 0.3:
                lines.append("")
        got = [b for _, b, _ in text_blocks(list(enumerate(lines, 1)), True)]
        assert got == expected, "\n".join(lines)
