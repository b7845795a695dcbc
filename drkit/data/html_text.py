"""The paragraphs, headings, tables and <title> of an HTML page, for ``drkit corpus`` (`drkit.data.documents`).

A block element (`BLOCK_TAGS`) or <br> ends a paragraph (inside a heading, <br> is a space and a block changes
nothing); inline tags join words ("Cu<b>rie</b>"); the text of <script> and <style> is not text; the <title> is
that of the head (one in the body or in an <svg> is text); character references are decoded. A <table>'s rows are
lines of "header: cell" pairs (`drkit.data.tables`): a row of one <th> across several columns (an infobox's name, a
table's title) is a line; the first other row, when every cell of it is a <th>, is the header of the rows below; a
row that opens with a <th> before <td>s reads "th: td; td"; colspan and rowspan place cells under their columns;
inside a cell a block or <br> is a space and a table within it is its words, but a heading ends the row and is a
heading (a layout table's). Text inside a table but in no cell comes before the table's rows that follow it, as a
browser shows it. A <td> or <tr> outside a <table> is a block as before.
"""

from __future__ import annotations

from html.parser import HTMLParser
from pathlib import Path

from drkit.data.lines import read_lines
from drkit.data.tables import Block, Table

SKIP_TAGS = frozenset({"script", "style"})
HEADINGS = {f"h{i}": i for i in range(1, 7)}
BLOCK_TAGS = frozenset({"p", "div", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "td", "th", "caption", "thead",
                        "tbody", "tfoot", "blockquote", "pre", "section", "article", "header", "footer", "nav",
                        "aside", "main", "figure", "figcaption", "address", "hr", "body", "html", "head", "details",
                        "summary", "select", "option", "optgroup", "fieldset", "legend", "form", "menu", "dialog",
                        "textarea", "noscript", "template", *HEADINGS})
CELLS = ("td", "th")
COLUMNS = 1000  # columns a rowspan is followed in (a wider table's cells beyond are placed as if none spanned there)


class _OpenTable:
    """A <table> being read: its rows so far (`Table`), the open row's cells, the open cell, and the cells of rows
    above that span down (rowspan)."""

    def __init__(self, blocks: list[Block]):
        self.table = Table(blocks)
        self.cells: list[tuple[str, bool, int, int]] | None = None  # the open row's (text, th, colspan, rowspan)
        self.cell: list[str] | None = None  # the open cell's text
        self.span = (False, 1, 1)  # the open cell's th, colspan and rowspan
        self.line = 0  # the open row's first line
        self.rows = 0  # rows read, title rows aside
        self.down: dict[int, int] = {}  # column -> rows below the last one that a cell above still covers

    def open_row(self, line: int):
        self.close_row()
        self.cells, self.line = [], line

    def open_cell(self, tag: str, attrs, line: int):
        if self.cells is None:
            self.open_row(line)
        self.close_cell()
        self.cell = []
        self.span = (tag == "th", _span(attrs, "colspan"), _span(attrs, "rowspan"))

    def close_cell(self):
        if self.cell is not None:
            self.cells.append(("".join(self.cell), *self.span))
            self.cell = None

    def close_row(self):
        self.close_cell()
        if self.cells:
            placed, col, below = [], 0, {c: n - 1 for c, n in self.down.items() if n > 1}
            for text, head, colspan, rowspan in self.cells:
                while self.down.get(col, 0) > 0:  # taken by a cell of a row above
                    col += 1
                placed.append((col, colspan, text, head))
                for c in range(col, min(col + colspan, COLUMNS)) if rowspan > 1 else ():
                    below[c] = rowspan - 1
                col += colspan
            self.down = below
            title = len(placed) == 1 and placed[0][1] > 1  # one <th> across the table (an infobox's name): a line
            if self.rows == 0 and all(c[3] for c in placed) and not title:
                self.table.header_row(self.line, placed)
            else:
                self.table.row(self.line, placed)
            self.rows += not title  # (a header row may follow a title row)
        self.cells = None

    def close(self):
        self.close_row()
        self.table.end()


def _span(attrs, name: str) -> int:
    """A cell's colspan or rowspan: its whole number from 1 to 1,000, else 1 (as a browser reads a bad one)."""
    value = dict(attrs).get(name)
    try:
        return min(max(int(str(value).strip()), 1), 1000)
    except ValueError:
        return 1


class HTMLBlocks(HTMLParser):
    """`feed` an HTML page, `close`, then `blocks` holds its (first line, text, heading level) blocks in order and
    `title` its head's <title> (the module's docstring says how)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.blocks: list[Block] = []
        self.title: str | None = None
        self._text: list[str] = []  # the paragraph being read, as written (inline tags join words, not split them)
        self._has_text = False
        self._start = 0  # its first line
        self._heading = None  # the heading tag open ("h2"), if any
        self._skip = self._svg = 0  # how deep inside <script>/<style>, and inside <svg>
        self._body = False  # a body tag or a block was seen: a <title> now is text
        self._title: list[str] | None = None  # the head's <title> being read
        self._tables: list[_OpenTable] = []  # the tables open, innermost last
        self._inner = 0  # tables open inside the innermost table's open cell (their words are the cell's)

    def _close(self):
        if self._has_text:
            level = int(self._heading[1]) if self._heading else 0
            self.blocks.append((self._start, " ".join("".join(self._text).split()), level))
        self._text, self._has_text = [], False

    def _end_title(self):
        if self._title is not None:
            self.title = self.title or " ".join("".join(self._title).split()) or None
            self._title = None

    def _cell(self) -> list[str] | None:
        """The open cell's text, if a cell of the innermost table is open."""
        return self._tables[-1].cell if self._tables else None

    def _table_start(self, tag: str, attrs) -> bool:
        """Handle a start tag inside a table (True) or leave it to the paragraph rules (False)."""
        cell = self._cell()
        if cell is not None:
            if tag in HEADINGS and not self._inner:  # a heading in a cell (a layout table) is a heading: the row ends
                self._tables[-1].close_row()
                return False
            if tag == "table":
                self._inner += 1
            elif tag in CELLS and not self._inner:
                self._tables[-1].open_cell(tag, attrs, self.getpos()[0])
                return True
            elif tag == "tr" and not self._inner:
                self._tables[-1].open_row(self.getpos()[0])
                return True
            if tag in BLOCK_TAGS or tag == "br":
                cell.append(" ")  # inside a cell a block is a space
                return True
            return False
        if tag == "table":
            self._end_title()
            self._close()
            self._body = True
            self._tables.append(_OpenTable(self.blocks))
            return True
        if self._tables and tag == "tr":
            self._close()
            self._tables[-1].open_row(self.getpos()[0])
            return True
        if self._tables and tag in CELLS:
            self._close()
            self._tables[-1].open_cell(tag, attrs, self.getpos()[0])
            return True
        return False

    def _table_end(self, tag: str) -> bool:
        """Handle an end tag inside a table (True) or leave it to the paragraph rules (False)."""
        if not self._tables:
            return False
        cell = self._cell()
        if cell is not None and self._inner:
            if tag == "table":
                self._inner -= 1
            if tag in BLOCK_TAGS:
                cell.append(" ")
                return True
            return False
        table = self._tables[-1]
        if tag in CELLS:
            table.close_cell()
        elif tag == "tr":
            table.close_row()
        elif tag == "table":
            table.close()
            self._tables.pop()
        elif cell is not None and tag in BLOCK_TAGS:
            cell.append(" ")
        else:
            return False
        return True

    def handle_starttag(self, tag, attrs):
        if tag in SKIP_TAGS:
            self._skip += 1
        elif tag == "svg":
            self._svg += 1
        elif tag == "title" and not self._body and not self._svg:
            self._title = []
        elif self._table_start(tag, attrs):
            pass
        elif tag in BLOCK_TAGS or tag == "br":
            self._end_title()  # a title is never open across a block: an unclosed one ends here
            self._body = self._body or tag not in ("html", "head")
            if self._heading:
                if tag == "br":
                    self._text.append(" ")
                return
            self._close()
            if tag in HEADINGS:
                self._heading = tag

    def handle_endtag(self, tag):
        if tag in SKIP_TAGS:
            self._skip = max(0, self._skip - 1)
        elif tag == "svg":
            self._svg = max(0, self._svg - 1)
        elif tag == "title":
            self._end_title()
        elif self._table_end(tag):
            pass
        elif tag in BLOCK_TAGS:
            if self._heading and tag != self._heading:
                return
            self._close()
            self._heading = None

    def handle_data(self, data):
        if self._skip:
            return
        cell = self._cell()
        if self._title is not None:
            self._title.append(data)
        elif cell is not None:
            cell.append(data)
        elif data.strip() or self._has_text:
            if not self._has_text:
                self._start, self._has_text = self.getpos()[0], True
            self._text.append(data)

    def close(self):
        super().close()
        if self._title is not None:  # a <title> never closed: its words are the page's text, not lost
            self._text, self._has_text = self._title, any(t.strip() for t in self._title)
            self._title = None
        self._close()
        while self._tables:  # tables never closed: their rows are text, not lost
            self._tables.pop().close()


def html_blocks(path: Path) -> tuple[list[Block], str | None]:
    """The blocks and the <title> of an HTML file (UTF-8, as every document)."""
    parser = HTMLBlocks()
    for _, line in read_lines(path, "document"):
        parser.feed(line + "\n")
    parser.close()
    return parser.blocks, parser.title
