"""Tables of a document as text (``drkit corpus``): each row a line that says what its cells are.

A table's words mean little joined as they stand ("| stage | package | 0 | drkit/errors.py |"); as lines of
"header: cell" pairs each row is a statement a passage can hold and a mention vector can read::

    | name  | born | place  |          name: Marie Curie; born: 1867; place: Warsaw
    |-------|------|--------|   ->     name: Pierre Curie; born: 1859; place: Paris
    | Marie Curie | 1867 | Warsaw |
    | Pierre Curie | 1859 | Paris |

* A row's cells are joined by "; ", each after its column's header and ": " where the table has a header row
  and the header cell is not empty; an empty cell is left out (there is nothing to say).
* A row that opens with a header cell where the column has no header and goes on with data cells (an HTML
  infobox's "<th>Born</th><td>7 November 1867</td>") reads "Born: 7 November 1867"; under a column header it is
  a cell as any other ("Year: 1999; Film: The Matrix").
* HTML's colspan and rowspan place each cell under its column's header.
* The header row is not a line of its own when every header cell is said before some row's cell (its words are
  in those rows); otherwise (a table of one row, a column no row fills) it is a line, cells joined by "; ",
  where it stood.
* A cell's text is its words, whitespace runs read as one space. Nothing else is changed: every word of a
  table is kept, in the order of its rows (`drkit.data.documents`).

`Table` renders rows given as cells; `markdown_table` finds a GitHub-flavoured Markdown table (a header row,
then a delimiter row such as "|---|:--:|" of as many cells) and gives its rows; `drkit.data.html_text` reads
<table> elements into `Table`.
"""

from __future__ import annotations

import re

Block = tuple[int, str, int]  # (first line, text, heading level: 0 for a paragraph), as drkit.data.documents' blocks
Cell = tuple[int, int, str, bool]  # (column, columns spanned, text, a header cell), see `Table`

_DELIMITER_CELL = re.compile(r"^\s*:?-+:?\s*$")


class Table:
    """The rows of one table as blocks (paragraphs of one line each), appended to `blocks` as they come. A cell is
    ``(column, columns spanned, text, header cell)``: the column where it starts counts the columns of the cells
    before it and of the cells of rows above that span down into this row (HTML's colspan and rowspan)."""

    def __init__(self, blocks: list[Block]):
        self.blocks = blocks
        self.names: dict[int, tuple[int, str]] | None = None  # column -> (header cell, its text)
        self.header: list[str] = []  # the header cells' texts
        self.header_line, self.header_at = 0, 0  # its line, and where in `blocks` its own line goes if it needs one
        self.used: set[int] = set()  # header cells some row's cell was said after

    def header_row(self, line: int, cells: list[Cell]) -> None:
        """Make `cells` the header of the rows after it (the first header row; a later one is a row)."""
        if self.names is not None or not any(_words(c[2]) for c in cells):
            self.row(line, [(col, span, text, True) for col, span, text, _ in cells])
            return
        self.names, self.header = {}, [_words(c[2]) for c in cells]
        for k, (col, span, _, _) in enumerate(cells):
            for c in range(col, col + max(span, 1)):
                self.names[c] = (k, self.header[k])
        self.header_line, self.header_at = line, len(self.blocks)

    def row(self, line: int, cells: list[Cell]) -> None:
        """A row of cells (see the class)."""
        cells = [(col, span, _words(text), head) for col, span, text, head in cells]
        if not any(c[2] for c in cells):
            return
        heads = all(c[3] for c in cells)  # a row of header cells only: its cells are said as they are
        names = self.names if self.names is not None and not heads else {}
        lead = None  # a row's own header ("<th>Born</th><td>1867</td>": "Born: 1867") where no column header names it
        if cells[0][3] and not heads and not names.get(cells[0][0], (0, ""))[1]:
            lead, cells = cells[0][2], cells[1:]
        parts = []
        for col, _, text, _ in cells:
            if not text:
                continue
            k, name = names.get(col, (-1, ""))
            if name:
                self.used.add(k)
            parts.append(f"{name}: {text}" if name else text)
        body = "; ".join(parts)
        self.blocks.append((line, (f"{lead}: {body}" if body else lead) if lead else body, 0))

    def end(self) -> None:
        """The table is over: a header with a cell no row's cell was said after is a line of its own, where it
        stood (so that none of its words is lost)."""
        if self.names is not None and any(text and k not in self.used for k, text in enumerate(self.header)):
            self.blocks.insert(self.header_at, (self.header_line, "; ".join(t for t in self.header if t), 0))


def _words(text: str) -> str:
    return " ".join(text.split())


def split_row(text: str) -> list[str]:
    """The cells of a Markdown table row: split at each "|" not escaped by a backslash (in code spans too, as
    GitHub does), the row's leading and trailing "|" dropped, ``\\|`` read as "|"."""
    text = text.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return [c.replace("\\|", "|").strip() for c in re.split(r"(?<!\\)\|", text)]


def is_delimiter_row(text: str, cells: int) -> bool:
    """Whether `text` is a Markdown table's delimiter row ("|---|:--:|") for a header of `cells` cells: it holds a
    "|", and each of its cells is hyphens with an optional colon at either end."""
    if "|" not in text:
        return False
    parts = split_row(text)
    return len(parts) == cells and all(_DELIMITER_CELL.match(p) for p in parts)


def markdown_table(lines: list[tuple[int, str]], i: int, ends_row, clean=lambda text: text) -> tuple[list[Block], int] | None:
    """The blocks of the Markdown table whose header row is ``lines[i]`` and the index of the line after it, or
    None where no table starts there. Its rows are the lines after the delimiter row up to a blank line or one
    that `ends_row` (a heading, a code fence, ...) says starts another block; `clean` maps each cell's text (e.g.
    to drop its inline markup)."""
    line_no, text = lines[i]
    if "|" not in text or i + 1 >= len(lines):
        return None
    header = split_row(text)
    if not is_delimiter_row(lines[i + 1][1], len(header)):
        return None
    blocks: list[Block] = []
    table = Table(blocks)
    table.header_row(line_no, [(k, 1, clean(text), True) for k, text in enumerate(header)])
    j = i + 2
    while j < len(lines) and lines[j][1].strip() and not ends_row(lines[j][1]):
        table.row(lines[j][0], [(k, 1, clean(text), False) for k, text in enumerate(split_row(lines[j][1]))])
        j += 1
    table.end()
    return blocks, j
