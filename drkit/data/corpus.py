"""Corpus readers: WikiMovies ``wiki.txt`` and JSONL, both yielding `Article`s.

WikiMovies format (``movieqa/knowledge_source/wiki.txt``): articles separated by blank lines;
every line starts with its number within the article, counting from 1; line 1 is the title::

    1 Kismet
    2 Kismet is a 1944 film directed by William Dieterle.

JSONL format, for users' own corpora: one object per line, ``{"id": str, "title": str, "text": str}``.

Both are UTF-8 (`drkit.data.lines`: a byte-order mark is allowed, CRLF line endings too). Lines of only
whitespace are skipped: in ``wiki.txt`` they end an article, in JSONL they are nothing. Anything else
that cannot be read is an `InputFormatError` naming the file, the line and, where one is at fault,
the field; what is read but not indexed (an empty article) is a counted warning. Titles and texts are put in
Unicode's composed form (NFC; a JSONL line's ``links`` offsets moved with them), as are entity lists, KB triples
and, where names are matched, questions: "Zoë" is one name however it was typed.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from drkit.data.lines import read_lines
from drkit.data.text import nfc, nfc_spans
from drkit.errors import ConfigError, InputFormatError
from drkit.util.warnlog import WarningLog

CORPUS_FORMATS = ("wikimovies", "jsonl")
_NUMBERED_LINE = re.compile(r"^([0-9]+)(?:[ \t]+(.*))?$")


@dataclass(frozen=True)
class Article:
    """One document. `key` is its external id; `content` is what gets linked and indexed."""

    key: str
    title: str
    text: str
    source_line: int  # 1-based line in the corpus file where the article starts
    # hyperlinks (start, end, target title), character offsets into `text`: when given (JSONL "links", even
    # empty), they are the mentions of the text, and the entity linker only links the title line
    links: tuple[tuple[int, int, str], ...] | None = None

    @property
    def content(self) -> str:
        """The title as the first line, then the body; mention offsets refer to this string."""
        return f"{self.title}\n{self.text}" if self.text else self.title


def guess_corpus_format(path: str | Path) -> str:
    """``jsonl`` for ``*.jsonl``/``*.json``, ``wikimovies`` otherwise."""
    return "jsonl" if str(path).endswith((".jsonl", ".json")) else "wikimovies"


def read_corpus(path: str | Path, fmt: str | None = None, warnings: WarningLog | None = None) -> Iterator[Article]:
    """Yield the articles of `path` in file order. `fmt` is one of `CORPUS_FORMATS` (guessed if None)."""
    fmt = fmt or guess_corpus_format(path)
    warnings = warnings if warnings is not None else WarningLog()
    if fmt == "wikimovies":
        return read_wikimovies(path, warnings)
    if fmt == "jsonl":
        return read_jsonl_corpus(path, warnings)
    raise ConfigError(f"unknown corpus format {fmt!r}; expected one of {', '.join(CORPUS_FORMATS)}")


def read_wikimovies(path: str | Path, warnings: WarningLog) -> Iterator[Article]:
    """Read a WikiMovies ``wiki.txt``. A line numbered 1 always starts a new article."""
    path = Path(path)
    title: str | None = None
    body: list[str] = []
    start_line = 0
    last_number = 0

    def finish() -> Article | None:
        if title is None:
            return None
        if not body:
            warnings.add("article_without_text", f"{path}:{start_line}: article {title!r} has a title and no text")
        return Article(key=str(start_line), title=nfc(title), text=nfc("\n".join(body)), source_line=start_line)

    for line_no, line in read_lines(path, "corpus"):
        if not line.strip():
            article = finish()
            if article is not None:
                yield article
            title, body = None, []
            continue
        match = _NUMBERED_LINE.match(line)
        if match is None:
            raise InputFormatError(
                path, line_no, f"expected '<line number> <text>' (WikiMovies format), got {line[:60]!r}"
            )
        number, content = int(match.group(1)), (match.group(2) or "").strip()
        if number == 1 or title is None:
            article = finish()
            if article is not None:
                yield article
            if number != 1:
                warnings.add("article_not_numbered_from_1", f"{path}:{line_no}: article starts at line number {number}")
            if not content:
                raise InputFormatError(path, line_no, "empty article title", field="title")
            title, body, start_line, last_number = content, [], line_no, number
            continue
        if number != last_number + 1:
            warnings.add(
                "line_number_gap", f"{path}:{line_no}: line number {number} follows {last_number}"
            )
        last_number = number
        if content:
            body.append(content)
        else:
            warnings.add("empty_line_text", f"{path}:{line_no}: numbered line with no text")
    article = finish()
    if article is not None:
        yield article


def plain_id(value) -> bool:
    """Whether a JSON value may be an id or an answer: a string or a whole number (not a bool, which JSON's true
    and false would be)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def iter_json_objects(path: str | Path, what: str = "JSONL file", bad: list | None = None) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSONL file; a line that is not a JSON
    object (or holds a string that is not text: an unpaired surrogate escape such as ``"\\ud800"``)
    is an `InputFormatError` naming the file and line, or with `bad` (a list) its message appended there and the
    line passed over."""
    path = Path(path)
    for line_no, line in read_lines(path, what):
        if not line.strip():
            continue
        try:
            obj = _json_object(line, path, line_no)
        except InputFormatError as exc:
            if bad is None:
                raise
            bad.append(str(exc))
            continue
        yield line_no, obj


def _json_object(line: str, path: Path, line_no: int) -> dict:
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        raise InputFormatError(path, line_no, f"not valid JSON: {exc.msg} at column {exc.colno}") from None
    except (ValueError, RecursionError) as exc:  # an integer of over 4300 digits; nesting too deep
        reason = "nested too deeply" if isinstance(exc, RecursionError) else str(exc).split(";")[0]
        raise InputFormatError(path, line_no, f"not valid JSON: {reason}") from None
    if not isinstance(obj, dict):
        raise InputFormatError(path, line_no, f"expected a JSON object, got {type(obj).__name__}")
    if "\\u" in line and not _is_text(obj):
        raise InputFormatError(path, line_no, "a string holds an unpaired surrogate escape (\\ud800-\\udfff), "
                               "which is not a character")
    return obj


def _is_text(obj) -> bool:
    """True when every string in `obj` (keys too) can be written as UTF-8."""
    try:
        json.dumps(obj, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def read_jsonl_corpus(path: str | Path, warnings: WarningLog) -> Iterator[Article]:
    """Read ``{"id", "title", "text"}`` objects, one per line. Blank lines are allowed."""
    path = Path(path)
    seen: dict[str, int] = {}
    for line_no, obj in iter_json_objects(path):
        for field in ("id", "title", "text"):
            if field not in obj:
                raise InputFormatError(path, line_no, "missing field", field=field)
        if not isinstance(obj["id"], (str, int)) or isinstance(obj["id"], bool):
            raise InputFormatError(path, line_no, "must be a string or an integer", field="id")
        for field in ("title", "text"):
            if not isinstance(obj[field], str):
                raise InputFormatError(path, line_no, f"must be a string, got {type(obj[field]).__name__}", field=field)
        key = str(obj["id"])
        if not key.strip():
            raise InputFormatError(path, line_no, "empty", field="id")
        if key in seen:
            raise InputFormatError(path, line_no, f"duplicate id {key!r} (first on line {seen[key]})", field="id")
        seen[key] = line_no
        links = _read_links(obj, path, line_no) if "links" in obj else None
        title, text = obj["title"].strip(), obj["text"].strip()
        if links is not None:  # offsets into the stripped text
            lead = len(obj["text"]) - len(obj["text"].lstrip())
            for i, (start, end, _) in enumerate(links):
                if start < lead or end - lead > len(text):
                    raise InputFormatError(path, line_no, f"link {i} [{start}, {end}) covers only surrounding "
                                           "whitespace of the text", field="links")
            links = tuple((start - lead, end - lead, target) for start, end, target in links)
        title, (text, starts) = nfc(title), nfc_spans(text)  # composed form: "Zoë" is one name however typed
        if links is not None and starts is not None:  # offsets into the normal form, widened to whole characters
            links = tuple((bisect.bisect_right(starts, start) - 1, bisect.bisect_left(starts, end), target)
                          for start, end, target in links)
        if links is not None:
            links = tuple((start, end, nfc(target)) for start, end, target in links)
        if not title and not text:
            warnings.add("empty_article", f"{path}:{line_no}: article {key!r} has no title and no text; not indexed")
            continue
        if not text:
            warnings.add("article_without_text", f"{path}:{line_no}: article {key!r} has a title and no text")
        yield Article(key=key, title=title, text=text, source_line=line_no, links=links)


def _read_links(obj: dict, path: Path, line_no: int) -> list[tuple[int, int, str]]:
    """The ``"links": [{"start", "end", "title"}, ...]`` of a JSONL article, checked: integer offsets with
    0 <= start < end <= len(text), a non-empty target title."""
    links = obj["links"]
    if not isinstance(links, list):
        raise InputFormatError(path, line_no, f"must be a list of {{start, end, title}} objects, got "
                               f"{type(links).__name__}", field="links")
    out = []
    n = len(obj["text"])
    for i, link in enumerate(links):
        if not isinstance(link, dict) or not {"start", "end", "title"} <= set(link):
            raise InputFormatError(path, line_no, f"link {i} must be an object with start, end and title", field="links")
        start, end, target = link["start"], link["end"], link["title"]
        if not all(isinstance(x, int) and not isinstance(x, bool) for x in (start, end)) or not 0 <= start < end <= n:
            raise InputFormatError(path, line_no, f"link {i}: start and end must be integers with 0 <= start < end <= "
                                   f"{n} (the text's length), got {start!r}, {end!r}", field="links")
        if not isinstance(target, str) or not target.strip():
            raise InputFormatError(path, line_no, f"link {i}: title must be a non-empty string", field="links")
        out.append((start, end, target.strip()))
    return out
