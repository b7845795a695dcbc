"""A folder of documents (or a JSONL file of long ones) as the JSONL corpus of passages `drkit index` and
`drkit add` read (``drkit corpus``).

Each plain-text (``.txt``), Markdown (``.md``, ``.markdown``) or HTML (``.html``, ``.htm``) file below the folder
is a page, cut into passages:

* **Title** (the page's entity with ``--entities titles``): its first level-1 heading ("# Marie Curie", <h1>), else
  the ``title:`` of a Markdown file's front matter or an HTML page's <title>, else the file name without its
  suffix, underscores and hyphens read as spaces ("marie_curie.txt": "marie curie"; the linker finds names whatever their case). Files with one
  title are one page of several passages (a counted warning names them).
* **Passages**: paragraphs (runs of non-blank lines, each run's lines joined by a space) joined in order, each a line
  of the passage's text, while the passage keeps to `DocumentsConfig.passage_words` words; a longer paragraph is cut between sentences
  (`drkit.data.text.split_sentences`; a sentence longer than that is a passage of its own). In Markdown, a
  heading ends the passage before it and its text opens the next one; the title's heading and the front matter
  are not text. Nothing else is changed: every word of a document's text is in its passages, in order. In HTML
  a block element (<p>, <li>, <td>, <div>, ...) or <br> ends a paragraph, <h1> to <h6> are headings, and what
  <script>, <style>, <template> and <noscript> hold is not text.
* **Ids**: ``<path below the folder>#<n>``, n counting the file's passages from 1.
* A JSONL file of long documents (``{"id", "title", "text"}`` a line, as a corpus) instead of a folder: each
  document is a page, its paragraphs its text's blank-line-separated parts (each line one where there is no blank
  line), ids ``<id>#<n>`` (`jsonl_documents`; a document with ``links`` is refused: their offsets are the whole
  text's).
* UTF-8 (a byte-order mark allowed, Windows line endings too): a file that is not is an `InputFormatError`
  naming it, the line and the byte (`drkit.data.lines`). A file with no text is a counted warning; hidden files
  and folders (names starting with ".") and other suffixes are left out and counted by suffix.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from drkit.data.lines import read_lines
from drkit.data.text import split_sentences
from drkit.errors import ConfigError, InputFormatError
from drkit.util.warnlog import WarningLog

SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm")
MARKDOWN = (".md", ".markdown")
HTML = (".html", ".htm")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_FRONT_TITLE = re.compile(r"^title\s*:\s*(.*?)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class DocumentsConfig:
    """Settings of ``drkit corpus``."""

    passage_words: int = field(default=120, metadata={
        "help": "paragraphs are joined into passages of at most this many words (whitespace-separated); a longer "
                "paragraph is cut between sentences (2Wiki's passages: 44 words at the median, MuSiQue's 65)"})

    def __post_init__(self):
        if self.passage_words < 1:
            raise ConfigError(f"passage_words must be at least 1, got {self.passage_words}")


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    line: int  # the line of the document where the passage's text starts


def document_files(folder: Path) -> tuple[list[Path], Counter]:
    """The documents below `folder` in path order, and what was left out, counted by suffix ("hidden": names
    starting with ".", with what is below them)."""
    found, left_out = [], Counter()
    for root, dirs, files in os.walk(folder):
        hidden = [d for d in dirs if d.startswith(".")]
        left_out["hidden"] += sum(len(fs) for d in hidden for _, _, fs in os.walk(Path(root) / d))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in files:
            path = Path(root) / name
            if name.startswith("."):
                left_out["hidden"] += 1
            elif path.suffix.lower() in SUFFIXES:
                found.append(path)
            else:
                left_out[path.suffix.lower() or "(no suffix)"] += 1
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix()), Counter({k: v for k, v in left_out.items() if v})


def _front_matter(lines: list[tuple[int, str]]) -> tuple[int, str | None]:
    """Where a Markdown file's text starts after its front matter ("---" ... "---" or "...") and the title it
    gives; (0, None) without one."""
    if not lines or lines[0][1].strip() != "---":
        return 0, None
    for i in range(1, len(lines)):
        if lines[i][1].strip() in ("---", "..."):
            titles = [m.group(1).strip("\"'") for _, t in lines[1:i] if (m := _FRONT_TITLE.match(t))]
            return i + 1, titles[0] if titles and titles[0] else None
    return 0, None  # no closing line: not front matter


def _blocks(lines: list[tuple[int, str]], markdown: bool) -> list[tuple[int, str, int]]:
    """(first line, text, heading level: 0 for a paragraph) of each paragraph and Markdown heading."""
    out, run = [], []

    def close():
        if run:
            out.append((run[0][0], " ".join(t.strip() for _, t in run), 0))
            run.clear()

    for line_no, text in lines:
        heading = _HEADING.match(text) if markdown else None
        if heading:
            close()
            out.append((line_no, (heading.group(2) or "").strip(), len(heading.group(1))))
        elif text.strip():
            run.append((line_no, text))
        else:
            close()
    close()
    return out


def _pieces(text: str, limit: int) -> list[str]:
    """`text` cut between sentences into pieces of at most `limit` words (a longer sentence is a piece alone)."""
    pieces, current = [], []
    for a, b in split_sentences(text):
        sentence = text[a:b]
        if current and len(" ".join(current + [sentence]).split()) > limit:
            pieces.append(" ".join(current))
            current = []
        current.append(sentence)
    if current:
        pieces.append(" ".join(current))
    return pieces


class _HTMLBlocks(HTMLParser):
    """The paragraphs and headings of an HTML page as `_blocks` gives them, and its <title>: a block element
    (`_BLOCK_TAGS`) or <br> ends a paragraph; the text of <script>, <style>, <template> and <noscript> is not
    text; character references are decoded."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[tuple[int, str, int]] = []
        self.title: str | None = None
        self._text: list[str] = []  # the paragraph being read (as written: inline tags join, not split, words),
        self._start = self._level = self._skip = 0  # from line _start, a heading of _level (0: none); _skip: how deep
        self._in_title, self._title_text = False, []  # inside <script>, <style>, ...

    def _close(self):
        text = " ".join("".join(self._text).split())
        if text:
            self.blocks.append((self._start, text, self._level))
        self._text, self._level = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in _SKIP_TAGS:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif tag in _BLOCK_TAGS or tag == "br":
            self._close()
            if tag in _HEADINGS:
                self._level = _HEADINGS[tag]

    def handle_endtag(self, tag):
        if tag in _SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == "title":
            self._in_title = False
            self.title = self.title or " ".join("".join(self._title_text).split()) or None
        elif tag in _BLOCK_TAGS:
            self._close()

    def handle_data(self, data):
        if self._skip:
            return
        if self._in_title:
            self._title_text.append(data)
        elif data.strip() or self._text:
            if not "".join(self._text).strip():
                self._start = self.getpos()[0]
            self._text.append(data)

    def close(self):
        super().close()
        self._close()


_SKIP_TAGS = frozenset({"script", "style", "template", "noscript"})
_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_BLOCK_TAGS = frozenset({"p", "div", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "td", "th", "blockquote", "pre",
                         "section", "article", "header", "footer", "nav", "aside", "main", "figure", "figcaption",
                         "address", "hr", "body", "html", "head", *_HEADINGS})


def _html(path: Path) -> tuple[list[tuple[int, str, int]], str | None]:
    """The blocks and the <title> of an HTML file (UTF-8, as every document)."""
    parser = _HTMLBlocks()
    for _, line in read_lines(path, "document"):
        parser.feed(line + "\n")
    parser.close()
    return parser.blocks, parser.title


def read_document(path: Path, name: str, config: DocumentsConfig = DocumentsConfig()) -> list[Passage]:
    """The passages of one document (module docstring); `name` is its path below the folder, for the ids."""
    suffix = path.suffix.lower()
    if suffix in HTML:
        blocks, other_title = _html(path)
    else:
        lines = list(read_lines(path, "document"))
        start, other_title = _front_matter(lines) if suffix in MARKDOWN else (0, None)
        blocks = _blocks(lines[start:], suffix in MARKDOWN)
    h1 = next((i for i, (_, text, level) in enumerate(blocks) if level == 1 and text), None)
    title = blocks[h1][1] if h1 is not None else other_title
    if not title:
        title = " ".join(re.sub(r"[_-]+", " ", path.stem).split()) or path.stem
    return _assemble([b for i, b in enumerate(blocks) if i != h1], title, name, config.passage_words)


def _assemble(blocks: list[tuple[int, str, int]], title: str, name: str, limit: int) -> list[Passage]:
    """The passages `name`#1, #2, ... of a page's blocks (`_blocks`; its title's heading taken out)."""
    passages = []
    current = ""  # the passage being made: its heading (if it opens with one) and paragraphs, one a line
    first_line, headed = 0, False  # where it starts; whether it holds a heading alone so far

    def flush():
        nonlocal current
        if current:
            passages.append(Passage(f"{name}#{len(passages) + 1}", title, current, first_line))
        current = ""

    for line_no, text, level in blocks:
        if not text:
            continue
        if level:  # a heading ends the passage before it and opens the next
            flush()
            current, first_line, headed = text, line_no, True
            continue
        for k, piece in enumerate(_pieces(text, limit) if len(text.split()) > limit else [text]):
            if current and not headed and len(current.split()) + len(piece.split()) > limit:
                flush()  # (a heading alone is never a passage: it stays with what follows it)
            if not current:
                first_line = line_no
            current = f"{current}{' ' if k else chr(10)}{piece}" if current else piece  # a paragraph starts a line
            headed = False
    flush()
    return passages


def jsonl_documents(path: Path, config: DocumentsConfig, warnings: WarningLog):
    """(article, its passages) for each document of a JSONL corpus of long documents (``{"id", "title", "text"}``
    a line, read as `drkit.data.corpus.read_jsonl_corpus` reads a corpus): its text's paragraphs are its lines
    separated by blank lines (each line a paragraph where it has no blank line), ids ``<id>#<n>``."""
    from drkit.data.corpus import read_jsonl_corpus

    for article in read_jsonl_corpus(path, warnings):
        if article.links is not None:
            raise InputFormatError(path, article.source_line, "a document with links cannot be cut into passages "
                                   "(the links' offsets are the whole text's): index this file as it is", field="links")
        text = article.text.replace("\r\n", "\n")
        parts = re.split(r"\n[ \t]*\n", text) if re.search(r"\n[ \t]*\n", text) else text.split("\n")
        blocks = [(article.source_line, " ".join(part.split()), 0) for part in parts]
        yield article, _assemble(blocks, article.title, article.key, config.passage_words)


def documents_corpus(docs: str | Path, out: str | Path, config: DocumentsConfig = DocumentsConfig(),
                     overwrite: bool = False, log=print) -> dict:
    """Write the documents of `docs` (a folder of them, or a JSONL corpus of long documents: `jsonl_documents`) as a
    JSONL corpus of passages `out` (``{"id", "title", "text"}`` a line) and return what was done: documents,
    passages, pages (titles), what was left out and the warnings. Nothing is written where a document is bad."""
    from drkit.util.progress import progress

    docs, out = Path(docs), Path(out)
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists; pass --overwrite to replace it")
    warnings, left_out = WarningLog(), Counter()
    if docs.is_file() and docs.suffix.lower() in (".jsonl", ".json"):
        if out.resolve() == docs.resolve():
            raise ConfigError(f"--out {out} is --docs itself: write the passages to another file")
        documents = ((a.key, found) for a, found in jsonl_documents(docs, config, warnings))
        total = None
    elif docs.is_dir():
        files, left_out = document_files(docs)
        if not files:
            raise ConfigError(f"{docs} holds no .txt, .md, .markdown, .html or .htm file"
                              + (f" (left out: {dict(left_out)})" if left_out else ""))
        documents = ((str(f), read_document(f, f.relative_to(docs).as_posix(), config)) for f in files)
        total = len(files)
    else:
        raise ConfigError(f"{docs} is neither a folder of documents (.txt, .md, .markdown, .html, .htm files) nor a "
                          "JSONL file of documents (.jsonl)")
    pages, passages, n_documents = {}, 0, 0
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            for where, found in progress(documents, total=total, desc="documents", unit="document"):
                n_documents += 1
                if not found:
                    warnings.add("document_without_text", f"{where}: no text; no passage written")
                    continue
                title = found[0].title
                if title in pages and pages[title] != where:
                    warnings.add("same_title", f"{where}: its title {title!r} is also {pages[title]}'s: one page of both")
                pages.setdefault(title, where)
                for p in found:
                    f.write(json.dumps({"id": p.id, "title": p.title, "text": p.text}, ensure_ascii=False) + "\n")
                passages += len(found)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    for line in warnings.lines():
        log(line)
    return {"documents": n_documents, "passages": passages, "pages": len(pages), "left_out": dict(left_out),
            "warnings": warnings.to_dict()}
