"""The paragraphs and headings of a Markdown (or plain-text) document, for ``drkit corpus`` (`drkit.data.documents`).

Blocks (`text_blocks`): runs of non-blank lines are paragraphs, each run's lines joined by a space. In Markdown an
ATX heading ("## Life") or a setext underline ("Life" over "----" or "====") makes a heading; a line of three or
more "-", "*" or "_" alone is a horizontal rule, the front matter (YAML-like lines between "---" lines at the top,
`front_matter`) and a link reference definition ("[1]: https://...") are link targets and layout, not text; the
lines of a fenced code block (``` or ~~~) and of an indented one (4 spaces or a tab, where no paragraph or list
item goes on) are text as written, a "#" in them included, the fences themselves markup; a table's rows are lines of
"header: cell" pairs (`drkit.data.tables`). A list item ("- milk", "* eggs", "+ tea", "1. Boil", "2) Stir") is a
paragraph of its own, a bullet and a task's "[ ]" or "[x]" being markup (a number stays: the page shows it), its
lines and the paragraphs indented under it included, a nested item too; under an item, code is indented 4 beyond
its text, and a fence may be indented as its text is. A numbered line interrupts a paragraph only from 1 or in a
numbered list, as CommonMark has it ("the year\n1999. It rained" and "- formed in\n1999. It rained" are one
paragraph each). A block quote's "> " marks are markup.

Inline markup (`inline`, everywhere but in code): what a reader of the rendered page sees is kept, the marks
around it are not: a link ``[Marie Curie](https://...)`` is "Marie Curie", as is ``[Marie Curie][1]`` where the
document defines the label "1" (``m[i][j]`` stays as it is where it does not), an image ``![Warsaw in
1867](a.png)`` its alt text, an autolink ``<https://x.org>`` the address, ``***both***``, ``**bold**``, ``*it*``,
``_it_`` and ``~~struck~~`` their words, a code span ```pip install``` its code as written, and a backslash escape
``\\*`` the character. Emphasis is read only at word edges (snake_case_names, foo__bar and 2*3*4 keep their marks)
and within 250 characters, so that any text is read in linear time.
"""

from __future__ import annotations

import re

from drkit.data.tables import Block, markdown_table

HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
FENCE = re.compile(r"^ {0,3}(`{3,}(?=[^`]*$)|~{3,})(.*)$")  # a backtick fence's info string holds no backtick
SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
INDENTED = re.compile(r"^(?: {4}|\t| {0,3}\t)")
RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
# a list item: its indentation, its bullet or number ("1." kept: a page shows it), a task's box, its text
ITEM = re.compile(r"^([ \t]*)(?:([-+*])|(\d{1,9}[.)]))(?:[ \t]+(?:\[[ xX]\](?:[ \t]+|$))?(.*))?$")
QUOTES = re.compile(r"^(?: {0,3}>[ \t]?)*")  # a block quote's marks, however deep (one match: linear time)
LINK_DEFINITION = re.compile(r"""^ {0,3}\[([^\[\]^][^\[\]]*)\]:[ \t]*\S+(?:[ \t]+(?:"[^"]*"|'[^']*'|\([^()]*\)))?[ \t]*$""")
_FRONT_TITLE = re.compile(r"^title\s*:\s*(.*?)\s*$", re.IGNORECASE)
_FRONT_KEY = re.compile(r"^[A-Za-z0-9_][\w.-]*\s*:(\s|$)")

_SPECIAL = re.compile(r"\\[!-/:-@\[-`{-~]|`+")  # where a backslash escape or a code span may start
_DEST = r"(?:<[^<>\n]*>|(?:[^()\s]|\([^()\s]*\))*)"  # a link's destination
_LINK_TITLE = r"""(?:\s+(?:"[^"]*"|'[^']*'|\([^()]*\)))?"""
_BRACKETS = r"\[((?:[^\[\]]|\[[^\[\]]*\])*)\]"  # a link's text (brackets inside it one deep)
_IMAGE = re.compile(r"!" + _BRACKETS + r"\(\s*" + _DEST + _LINK_TITLE + r"\s*\)")
_LINK = re.compile(_BRACKETS + r"\(\s*" + _DEST + _LINK_TITLE + r"\s*\)")
_REFERENCE = re.compile(r"\[([^\[\]]+)\]\[([^\[\]]*)\]")
_SHORTCUT = re.compile(r"\[([^\[\]]+)\](?!\()")
_AUTOLINK = re.compile(r"<((?:https?|ftp|mailto):[^<>\s]+|[\w.+-]+@[\w-]+(?:\.[\w-]+)+)>")
_SPAN = 250  # emphasis is read within so many characters: linear time on any text
_EMPHASIS = [re.compile(rf"(?<![\w{m[0]}]){re.escape(m)}(?=[^\s{m[0]}])(.{{1,{_SPAN}}}?)(?<=[^\s{m[0]}]){re.escape(m)}"
                        rf"(?![\w{m[0]}])", re.S) for m in ("***", "___", "**", "__", "~~", "*", "_")]  # at word edges only
_MARK = "\x00"  # brackets a kept piece (a code span, an escaped character, an address) while the rules run
_KEPT = re.compile(f"{_MARK}(\\d+){_MARK}")


def inline(text: str, labels: frozenset = frozenset()) -> str:
    """`text` without its inline markup (the module's docstring); `labels`: the link reference definitions' labels of
    the document (lower case, spaces collapsed), the only ones a reference link ``[text][label]`` is read with."""
    if _MARK in text or not any(c in text for c in "`[]<*_~\\!"):
        return text
    kept: list[str] = []

    def keep(piece: str) -> str:  # out of the rules' way until the end
        kept.append(piece)
        return f"{_MARK}{len(kept) - 1}{_MARK}"

    out, at = [], 0
    while (m := _SPECIAL.search(text, at)) is not None:
        out.append(text[at:m.start()])
        at = m.end()
        if m.group(0)[0] == "\\":
            out.append(keep(m.group(0)[1]))  # an escaped character is itself
            continue
        close = re.compile(f"(?<!`){m.group(0)}(?!`)").search(text, at)  # a code span ends at as many backticks
        if close is None:
            out.append(m.group(0))  # no end: the backticks are text
            continue
        code = text[at:close.start()]
        if code.startswith(" ") and code.endswith(" ") and code.strip():
            code = code[1:-1]
        out.append(keep(code))  # code as written: no escape, no emphasis inside
        at = close.end()
    out.append(text[at:])
    text = _AUTOLINK.sub(lambda a: keep(a.group(1)), "".join(out))
    text = _LINK.sub(r"\1", _IMAGE.sub(r"\1", text))
    known = lambda label: _label(label) in labels  # noqa: E731
    text = _REFERENCE.sub(lambda r: r.group(1) if known(r.group(2) or r.group(1)) else r.group(0), text)
    text = _SHORTCUT.sub(lambda r: r.group(1) if known(r.group(1)) else r.group(0), text)
    for rule in _EMPHASIS:
        for _ in range(3):  # nested emphasis ("***both***") takes a second pass
            text, n = rule.subn(r"\1", text)
            if not n:
                break
    for _ in range(2):  # an address may hold an escaped character
        text = _KEPT.sub(lambda k: kept[int(k.group(1))], text)
    return text


def _label(text: str) -> str:
    """A link label as references and definitions match it: lower case, spaces collapsed."""
    return " ".join(text.lower().split())


def _shown(text: str, labels: frozenset) -> str:
    """`inline`, with the spaces a dropped mark leaves ("[](x) end") read as one where it changed anything."""
    shown = inline(text, labels)
    return text if shown == text else " ".join(shown.split())


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
    fence_indent, fence_quoted = 0, False  # the opening fence's columns of indentation, and whether in a quote
    content = None  # in a list: the column of its last item's text (None: no list)
    opened: list[tuple[int, bool]] = []  # the list's open items: (indentation, whether numbered), outermost first
    labels = frozenset(_label(m.group(1)) for _, t in lines if (m := LINK_DEFINITION.match(t))) if markdown else frozenset()

    def close(level: int = 0):
        if run:
            parts, k = [], 0
            while k < len(run):  # consecutive lines of prose read as one text for inline markup, code as written
                code = run[k][2]
                group = []
                while k < len(run) and run[k][2] == code:
                    group.append(run[k][1].strip())
                    k += 1
                parts.append(" ".join(group) if code or not markdown else _shown(" ".join(group), labels))
            out.append((run[0][0], " ".join(p for p in parts if p), level))
            run.clear()

    i = 0
    while i < len(lines):
        line_no, text = lines[i]
        i += 1
        if markdown:
            if fence is not None:  # inside a code block: text, until the fence closes (the fences are markup)
                body = _dedent(text[QUOTES.match(text).end():] if fence_quoted else text, fence_indent)
                marker = FENCE.match(body)
                if marker and marker.group(1)[0] == fence[0] and len(marker.group(1)) >= len(fence) and not marker.group(2).strip():
                    fence = None
                elif body.strip():
                    run.append((line_no, body, True))
                else:
                    close()
                continue
            quote = QUOTES.match(text).end()
            text = text[quote:]
            indent = _columns(text)
            marker = FENCE.match(_dedent(text, content) if content is not None and indent >= content else text)
            if marker:  # (under a list item, indented as its text may be)
                fence, fence_indent, fence_quoted = marker.group(1), indent, quote > 0
                continue
            table = None if HEADING.match(text) else markdown_table(lines, i - 1, ends_row, lambda cell: inline(cell, labels))
            if table is not None:  # (a table may follow a paragraph's last line: that paragraph ends there)
                close()
                out += table[0]
                i = table[1]
                continue
            underline = SETEXT.match(text)
            if underline and run and not (content is not None and ITEM.match(text)):
                close(1 if underline.group(1)[0] == "=" else 2)
                continue
            if RULE.match(text) or (LINK_DEFINITION.match(text) and not run):  # a rule ends a paragraph
                close()
                continue
            heading = HEADING.match(text)
            if heading:
                close()
                content = None
                out.append((line_no, _shown((heading.group(2) or "").strip(), labels), len(heading.group(1))))
                continue
            item = ITEM.match(text)
            if item and _opens_item(item, content, opened, bool(run) and not run[-1][2]):
                close()  # an item opens a paragraph of its own
                number, rest = item.group(3), (item.group(4) or "").strip()
                opened = [o for o in (opened if content is not None else []) if o[0] < indent] + [(indent, number is not None)]
                content = indent + len(item.group(2) or number) + 1
                if number or rest:
                    run.append((line_no, f"{number} {rest}" if number and rest else number or rest, False))
                continue
            if content is not None and text.strip():
                if run and run[-1][2] and indent < content + 4:
                    close()  # the code under an item ends where a line is indented less
                if not run and indent == 0:
                    content = None  # a paragraph after the list, not under its last item
        if text.strip():  # indented by 4 or a tab where no paragraph goes on: an indented code block, as written
            if not markdown or content is None:
                code = markdown and INDENTED.match(text) is not None and (not run or run[-1][2])
            else:  # under a list item: 4 beyond its text
                code = (not run or run[-1][2]) and _columns(text) >= content + 4
            run.append((line_no, text, code))
        else:
            close()
    close()
    return out


def _columns(text: str) -> int:
    """The columns of a line's indentation (a tab to the next multiple of 4)."""
    lead = len(text) - len(text.lstrip(" \t"))
    return len(text[:lead].expandtabs(4))


def _dedent(text: str, columns: int) -> str:
    """`text` with up to `columns` columns of its indentation taken off."""
    lead = len(text) - len(text.lstrip(" \t"))
    spaces = text[:lead].expandtabs(4)
    return spaces[min(columns, len(spaces)):] + text[lead:]


def _opens_item(item: re.Match, content: int | None, opened: list[tuple[int, bool]], in_prose: bool) -> bool:
    """Whether a line matching `ITEM` opens a list item: outside a list (`content` None) indented at most 3, in one
    less than 4 beyond its last item's text (deeper is code, or goes on its paragraph); a numbered line interrupts a
    paragraph (`in_prose`) only from 1 or as the next of a numbered item open at its indentation (`opened`). (A rule
    never gets here: `text_blocks` reads it first.)"""
    indent = len(item.group(1).expandtabs(4))
    if indent > (3 if content is None else content + 3):
        return False
    number = item.group(3)
    if not in_prose or number is None or int(number[:-1]) == 1:
        return True
    level = [o for o in (opened if content is not None else []) if o[0] <= indent]
    return bool(level) and level[-1] == (indent, True)


def ends_row(text: str) -> bool:
    """Whether a Markdown line starts another block than a table's rows: a heading, a code fence or a rule."""
    return bool(HEADING.match(text) or FENCE.match(text) or RULE.match(text))
