"""A folder of documents (or a JSONL file of long ones) as the JSONL corpus of passages `drkit index` and
`drkit add` read (``drkit corpus``).

Each plain-text (``.txt``), Markdown (``.md``, ``.markdown``) or HTML (``.html``, ``.htm``) file below the folder
is a page, cut into passages:

* **Title** (the page's entity with ``--entities titles``): its first level-1 heading ("# Marie Curie", a setext
  "====" underline, <h1>), else the ``title:`` of a Markdown file's front matter or the head's <title>, else the
  file name without its suffix, underscores and hyphens read as spaces ("marie_curie.txt": "marie curie"; the
  linker finds names whatever their case). Files with one title are one page (a counted warning names them).
* **Paragraphs**: runs of non-blank lines, each run's lines joined by a space. In Markdown an ATX or setext heading
  is a heading, a horizontal rule ("---", "***", "___" alone), the front matter (YAML-like lines between "---"
  lines at the top), link reference definitions, list bullets ("- ", "* ", a task's "[x]"; each item a paragraph, a number kept),
  block quotes' "> " and code fences are markup, not text, code blocks (fenced or indented) are text as written ("#"
  lines in them included), and inline markup is read as the page shows it: a link ``[Marie
  Curie](https://...)`` is "Marie Curie", ``**bold**`` and a code span's backticks lose their marks
  (`drkit.data.markdown`). In HTML a block element (<p>, <li>, <div>, ...) or <br> ends a paragraph, <h1> to <h6>
  are headings, inline tags join words ("Cu<b>rie</b>"), and what <script> and <style> hold is not text
  (`drkit.data.html_text`).
* **Tables** (Markdown's "| a | b |" over "|---|---|", HTML's <table>): each row a paragraph of "header: cell"
  pairs ("name: Marie Curie; born: 1867"; an HTML row opening with a <th>: "Born: 7 November 1867"), the
  delimiter row and the pipes being markup (`drkit.data.tables`).
* **Passages**: paragraphs joined in order, each a line of the passage's text, while the passage keeps to
  `DocumentsConfig.passage_words` words; a longer paragraph is cut between sentences
  (`drkit.data.text.split_sentences`; a sentence longer than that is cut between words). A heading (or
  headings in a row) ends the passage before it and opens the next one. Nothing else is changed: every word of a
  document's text, markup aside, is in its passages, in order (the title's heading is the title, not text; a
  table's column header is in each of its rows).
* **Ids**: ``<path below the folder>#<n>``, n counting the file's passages from 1 (``--docs`` one document:
  ``<its file name>#<n>``).
* A JSONL file of long documents (``{"id", "title", "text"}`` a line, as a corpus) instead of a folder: each
  document is a page, its paragraphs its text's blank-line-separated parts (each line one where there is no blank
  line; ``--jsonl-markup markdown``: read as Markdown), ids ``<id>#<n>`` (`jsonl_documents`; a document with
  ``links`` is refused: their offsets are the whole text's).
* UTF-8 (a byte-order mark allowed, Windows line endings too): a file that is not is an `InputFormatError`
  naming it, the line and the byte (`drkit.data.lines`), and nothing is written. A file with no text is a counted
  warning; hidden files and folders (names starting with "."), linked folders (not followed) and other suffixes
  are left out and counted.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from drkit.data.html_text import html_blocks
from drkit.data.lines import read_lines
from drkit.data.markdown import front_matter, text_blocks
from drkit.data.text import split_sentences
from drkit.errors import ConfigError, InputFormatError
from drkit.util.warnlog import WarningLog

SUFFIXES = (".txt", ".md", ".markdown", ".html", ".htm")
MARKDOWN = (".md", ".markdown")
HTML = (".html", ".htm")


@dataclass(frozen=True)
class DocumentsConfig:
    """Settings of ``drkit corpus``."""

    passage_words: int = field(default=120, metadata={
        "help": "paragraphs are joined into passages of at most this many words (whitespace-separated); a longer "
                "paragraph is cut between sentences, a longer sentence between words (2Wiki's passages: 44 words at the median, MuSiQue's 65)"})

    jsonl_markup: str = field(default="text", metadata={
        "help": "how the texts of a JSONL file of documents are read: text (paragraphs at blank lines) or markdown "
                "(headings, tables, inline markup and code as in a .md file)", "choices": ("text", "markdown")})

    def __post_init__(self):
        if self.passage_words < 1:
            raise ConfigError(f"passage_words must be at least 1, got {self.passage_words}")
        if self.jsonl_markup not in ("text", "markdown"):
            raise ConfigError(f"jsonl_markup must be 'text' or 'markdown', got {self.jsonl_markup!r}")


@dataclass(frozen=True)
class Passage:
    id: str
    title: str
    text: str
    line: int  # the line of the document where the passage's text starts


def document_files(folder: Path) -> tuple[list[Path], Counter]:
    """The documents below `folder` in path order, and what was left out, counted by suffix ("hidden": names
    starting with ".", with what is below them; "linked folder": a symbolic link to a folder, not followed)."""
    found, left_out = [], Counter()
    for root, dirs, files in os.walk(folder):
        hidden = [d for d in dirs if d.startswith(".")]
        left_out["hidden"] += sum(len(fs) for d in hidden for _, _, fs in os.walk(Path(root) / d))
        left_out["linked folder"] += sum((Path(root) / d).is_symlink() for d in dirs if not d.startswith("."))
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))  # (os.walk does not enter a linked folder)
        for name in files:
            path = Path(root) / name
            if name.startswith("."):
                left_out["hidden"] += 1
            elif path.suffix.lower() in SUFFIXES:
                found.append(path)
            else:
                left_out[path.suffix.lower() or "(no suffix)"] += 1
    return sorted(found, key=lambda p: p.relative_to(folder).as_posix()), Counter({k: v for k, v in left_out.items() if v})


def _pieces(text: str, limit: int) -> list[str]:
    """`text` cut between sentences into pieces of at most `limit` words (a longer sentence cut between words)."""
    pieces, current, words = [], [], 0
    for a, b in split_sentences(text):
        sentence = text[a:b]
        n = len(sentence.split())
        if n > limit:  # a sentence of its own too long (a list without full stops, a table row): cut between words
            if current:
                pieces.append(" ".join(current))
                current, words = [], 0
            chunks = [sentence.split()[i:i + limit] for i in range(0, n, limit)]
            pieces += [" ".join(c) for c in chunks[:-1]]
            sentence, n = " ".join(chunks[-1]), len(chunks[-1])  # the rest goes on as a sentence
        if current and words + n > limit:
            pieces.append(" ".join(current))
            current, words = [], 0
        current.append(sentence)
        words += n
    if current:
        pieces.append(" ".join(current))
    return pieces


def read_document(path: Path, name: str, config: DocumentsConfig = DocumentsConfig()) -> list[Passage]:
    """The passages of one document (module docstring); `name` is its path below the folder, for the ids."""
    suffix = path.suffix.lower()
    if suffix in HTML:
        blocks, other_title = html_blocks(path)
    else:
        lines = list(read_lines(path, "document"))
        start, other_title = front_matter(lines) if suffix in MARKDOWN else (0, None)
        blocks = text_blocks(lines[start:], suffix in MARKDOWN)
    h1 = next((i for i, (_, text, level) in enumerate(blocks) if level == 1 and text), None)
    title = blocks[h1][1] if h1 is not None else other_title
    if not title:
        title = " ".join(re.sub(r"[_-]+", " ", path.stem).split()) or path.stem
    return _assemble([b for i, b in enumerate(blocks) if i != h1], title, name, config.passage_words)


def _assemble(blocks: list[tuple[int, str, int]], title: str, name: str, limit: int) -> list[Passage]:
    """The passages `name`#1, #2, ... of a page's blocks (`drkit.data.markdown.text_blocks`,
    `drkit.data.html_text.html_blocks`; its title's heading taken out)."""
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
        if level:  # a heading ends the passage before it and opens the next (headings in a row open it together)
            if headed:
                current = f"{current}\n{text}"
                continue
            flush()
            current, first_line, headed = text, line_no, True
            continue
        for k, piece in enumerate(_pieces(text, limit) if len(text.split()) > limit else [text]):
            if current and not headed and len(current.split()) + len(piece.split()) > limit:
                flush()  # (a heading stays with what follows it: alone, it is a passage only at the end)
            if not current:
                first_line = line_no
            current = f"{current}{' ' if k else chr(10)}{piece}" if current else piece  # a paragraph starts a line
            headed = False
    flush()
    return passages


def jsonl_documents(path: Path, config: DocumentsConfig, warnings: WarningLog):
    """(article, its passages) for each document of a JSONL corpus of long documents (``{"id", "title", "text"}``
    a line, read as `drkit.data.corpus.read_jsonl_corpus` reads a corpus): its text's paragraphs are its lines
    separated by blank lines (each line a paragraph where it has no blank line), or with ``jsonl_markup="markdown"``
    its Markdown blocks (`drkit.data.markdown.text_blocks`; a heading there is a heading, not the title); ids
    ``<id>#<n>``."""
    from drkit.data.corpus import read_jsonl_corpus

    for article in read_jsonl_corpus(path, warnings):
        if not article.title:
            warnings.add("document_without_title", f"{path}:{article.source_line}: document {article.key!r} has no "
                         "title: its passages name no entity of --entities titles")
        if article.links is not None:
            raise InputFormatError(path, article.source_line, "a document with links cannot be cut into passages "
                                   "(the links' offsets are the whole text's): index this file as it is", field="links")
        text = article.text.replace("\r\n", "\n")
        if config.jsonl_markup == "markdown":  # (every block is on the document's line of the file)
            blocks = text_blocks([(article.source_line, line) for line in text.split("\n")], True)
        else:
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
    if out.resolve() == docs.resolve() or (docs.is_dir() and out.resolve().is_relative_to(docs.resolve())
                                           and out.suffix.lower() in SUFFIXES):
        raise ConfigError(f"--out {out} would be {'--docs itself' if out.resolve() == docs.resolve() else 'a document of --docs'}"
                          ": write the passages to another file")
    if out.is_dir():
        raise ConfigError(f"--out {out} is a folder: give the file to write, e.g. {out / 'corpus.jsonl'}")
    if out.exists() and not overwrite:
        raise ConfigError(f"{out} exists; pass --overwrite to replace it")
    warnings, left_out = WarningLog(), Counter()
    if docs.is_file() and docs.suffix.lower() in (".jsonl", ".json"):
        documents = ((a.key, found) for a, found in jsonl_documents(docs, config, warnings))
        total = None
    elif docs.is_dir():
        files, left_out = document_files(docs)
        if not files:
            raise ConfigError(f"{docs} holds no .txt, .md, .markdown, .html or .htm file"
                              + (f" (left out: {dict(left_out)})" if left_out else ""))
        documents = ((str(f), read_document(f, f.relative_to(docs).as_posix(), config)) for f in files)
        total = len(files)
    elif docs.is_file() and docs.suffix.lower() in SUFFIXES:  # one document: its passages are <file name>#<n>
        documents, total = iter([(str(docs), read_document(docs, docs.name, config))]), 1
    else:
        raise ConfigError(f"{docs} is neither a folder of documents (.txt, .md, .markdown, .html, .htm files), nor one "
                          "such document, nor a JSONL file of documents (.jsonl)"
                          + ("" if docs.exists() else ": it does not exist"))
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
        if not passages:
            raise ConfigError(f"{docs}: no text in {'it' if n_documents == 1 else f'its {n_documents} documents'}, "
                              f"so no passage to write (nothing was written to {out})")
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    for line in warnings.lines():
        log(line)
    return {"documents": n_documents, "passages": passages, "pages": len(pages), "left_out": dict(left_out),
            "warnings": warnings.to_dict()}
