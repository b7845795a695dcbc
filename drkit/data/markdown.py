"""The paragraphs and headings of a Markdown (or plain-text) document, for ``drkit corpus`` (`drkit.data.documents`).

Blocks (`text_blocks`): runs of non-blank lines are paragraphs, each run's lines joined by a space. In Markdown an
ATX heading ("## Life") or a setext underline ("Life" over "----" or "====") makes a heading; a line of three or
more "-", "*" or "_" alone is a horizontal rule, the front matter (YAML-like lines between "---" lines at the top,
`front_matter`) and a link reference definition ("[1]: https://...") are link targets and layout, not text; the
lines of a fenced code block (``` or ~~~) are text as written, a "#" in them included; a table's rows are lines
of "header: cell" pairs (`drkit.data.tables`).

Inline markup (`inline`, everywhere but in code): what a reader of the rendered page sees is kept, the marks
around it are not: a link ``[Marie Curie](https://...)`` or ``[Marie Curie][1]`` is "Marie Curie", an image
``![Warsaw in 1867](a.png)`` its alt text, an autolink ``<https://x.org>`` the address, ``**bold**``, ``*it*``,
``_it_`` and ``~~struck~~`` their words, a code span ```pip install``` its code, and a backslash escape ``\\*`` the
character. Emphasis by "_" or "*" is read only at word edges, so snake_case_names and 2*3*4 keep theirs.
"""

from __future__ import annotations

import re

from drkit.data.tables import Block, markdown_table

HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
LINK_DEFINITION = re.compile(r"""^ {0,3}\[[^\[\]^][^\[\]]*\]:[ \t]*\S+(?:[ \t]+(?:"[^"]*"|'[^']*'|\([^()]*\)))?[ \t]*$""")
_FRONT_TITLE = re.compile(r"^title\s*:\s*(.*?)\s*$", re.IGNORECASE)
_FRONT_KEY = re.compile(r"^[A-Za-z0-9_][\w.-]*\s*:(\s|$)")

_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_CODE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)
_DEST = r"(?:<[^<>\n]*>|(?:[^()\s]|\([^()\s]*\))*)"  # a link's destination
_LINK_TITLE = r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?"""
_IMAGE = re.compile(r"!\[([^\[\]]*)\]\(\s*" + _DEST + _LINK_TITLE + r"\s*\)")
_LINK = re.compile(r"\[([^\[\]]*)\]\(\s*" + _DEST + _LINK_TITLE + r"\s*\)")
_REFERENCE = re.compile(r"\[([^\[\]]+)\]\[[^\[\]]*\]")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^<>\s]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>")
_STRONG = re.compile(r"(\*\*|__)(?=[^\s*_])(.+?)(?<=[^\s*_])\1")
_STAR = re.compile(r"(?<![\w*\\])\*(?=[^\s*])(.+?)(?<=[^\s*])\*(?![\w*])")
_UNDERSCORE = re.compile(r"(?<![\w_])_(?=[^\s_])(.+?)(?<=[^\s_])_(?![\w_])")
_STRIKE = re.compile(r"~~(?=\S)(.+?)(?<=\S)~~")
_MARK = "\x00"  # brackets an escaped character while the rules run (a text holding it is left as it is)


def inline(text: str) -> str:
    """`text` without its inline markup (the module's docstring)."""
    if _MARK in text or not any(c in text for c in "`[]<*_~\\!"):
        return text
    escaped: list[str] = []

    def keep(m):  # an escaped character: out of the rules' way until the end
        escaped.append(m.group(1))
        return f"{_MARK}{len(escaped) - 1}{_MARK}"

    text = _ESCAPE.sub(keep, text)
    out, at = [], 0
    for m in _CODE.finditer(text):
        out.append(_marks(text[at:m.start()]))
        code = m.group(2)
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out.append(re.sub(f"{_MARK}(\\d+){_MARK}", lambda e: "\\" + escaped[int(e.group(1))], code))  # code as written
        at = m.end()
    out.append(_marks(text[at:]))
    return re.sub(f"{_MARK}(\\d+){_MARK}", lambda e: escaped[int(e.group(1))], "".join(out))


def _shown(text: str) -> str:
    """`inline`, with the spaces a dropped mark leaves ("[](x) end") read as one where it changed anything."""
    shown = inline(text)
    return text if shown == text else " ".join(shown.split())


def _marks(text: str) -> str:
    """`inline` outside code spans: links, images and emphasis to their words."""
    text = _IMAGE.sub(r"\1", text)
    text = _LINK.sub(r"\1", text)
    text = _REFERENCE.sub(r"\1", text)
    text = _AUTOLINK.sub(r"\1", text)
    for rule in (_STRONG, _STRIKE):
        while True:
            done = rule.sub(lambda m: m.group(2) if rule is _STRONG else m.group(1), text)
            if done == text:
                break
            text = done
    return _UNDERSCORE.sub(r"\1", _STAR.sub(r"\1", text))


def front_matter(lines: list[tuple[int, str]]) -> tuple[int, str | None]:
    """Where a Markdown file's text starts after its front matter and the title it gives; (0, None) without one.
    Front matter is a first line "---", then YAML-like lines ("key: value", indented or "- " continuations; no blank
    line, at least one key) up to a line "---" or "...": a file that opens with a horizontal rule is not one."""
    if not lines or lines[0][1].strip() != "---":
        return 0, None
    for i in range(1, len(lines)):
        if lines[i][1].strip() in ("---", "..."):
            body = [t for _, t in lines[1:i]]
            keys = [t for t in body if _FRONT_KEY.match(t)]
            if not keys or any(not (_FRONT_KEY.match(t) or t[:1] in (" ", "\t") or t.startswith("- ")) for t in body):
                return 0, None
            titles = [m.group(1).strip("\"'") for t in keys if (m := _FRONT_TITLE.match(t))]
            return i + 1, titles[0] if titles and titles[0] else None
    return 0, None  # no closing line: not front matter


def text_blocks(lines: list[tuple[int, str]], markdown: bool) -> list[Block]:
    """(first line, text, heading level: 0 for a paragraph) of each paragraph and, in Markdown, heading and table
    row (the module's docstring); plain text is paragraphs alone, as written."""
    out: list[Block] = []
    run: list[tuple[int, str, bool]] = []  # the paragraph's lines: (line, text, in a code block)
    fence = None  # the opening fence's marker while inside a fenced code block

    def close(level: int = 0):
        if run:
            parts, k = [], 0
            while k < len(run):  # consecutive lines of prose read as one text for inline markup, code as written
                code = run[k][2]
                group = []
                while k < len(run) and run[k][2] == code:
                    group.append(run[k][1].strip())
                    k += 1
                parts.append(" ".join(group) if code or not markdown else _shown(" ".join(group)))
            out.append((run[0][0], " ".join(p for p in parts if p), level))
            run.clear()

    i = 0
    while i < len(lines):
        line_no, text = lines[i]
        i += 1
        if markdown:
            marker = FENCE.match(text)
            if fence is not None:  # inside a code block: text, until the fence closes
                if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence) and not marker.group(2).strip():
                    fence = None
                if text.strip():
                    run.append((line_no, text, True))
                else:
                    close()
                continue
            if marker:
                fence = marker.group(1)
                run.append((line_no, text, True))
                continue
            table = None if HEADING.match(text) else markdown_table(lines, i - 1, ends_row, inline)
            if table is not None:  # (a table may follow a paragraph's last line: that paragraph ends there)
                close()
                out += table[0]
                i = table[1]
                continue
            underline = SETEXT.match(text)
            if underline and run:
                close(1 if underline.group(1)[0] == "=" else 2)
                continue
            if (RULE.match(text) or LINK_DEFINITION.match(text)) and not run:
                continue
            heading = HEADING.match(text)
            if heading:
                close()
                out.append((line_no, _shown((heading.group(2) or "").strip()), len(heading.group(1))))
                continue
        if text.strip():
            run.append((line_no, text, False))
        else:
            close()
    close()
    return out


def ends_row(text: str) -> bool:
    """Whether a Markdown line starts another block than a table's rows: a heading, a code fence or a rule."""
    return bool(HEADING.match(text) or FENCE.match(text) or RULE.match(text))
