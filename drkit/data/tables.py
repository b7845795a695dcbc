"""Tables of a document as text (``drkit corpus``): each row a line that says what its cells are.

A table's words mean little joined as they stand ("| stage | package | 0 | drkit/errors.py |"); as lines of
"header: cell" pairs each row is a statement a passage can hold and a mention vector can read::

    | name  | born | place  |          name: Marie Curie; born: 1867; place: Warsaw
    |-------|------|--------|   ->     name: Pierre Curie; born: 1859; place: Paris
    | Marie Curie | 1867 | Warsaw |
    | Pierre Curie | 1859 | Paris |

* A row's cells are joined by "; ", each after its column's header and ": " where the table has a header row
  and the header cell is not empty; an empty cell is left out (there is nothing to say).
* A row that opens with a header cell and goes on with data cells (an HTML infobox's "<th>Born</th><td>7
  November 1867</td>") reads "Born: 7 November 1867".
* The header row is not a line of its own when a row below uses it (its words are in every such row); a header
  row no row uses (a table of one row, or rows of other widths) is a line, cells joined by "; ", where it stood.
* A cell's text is its words, whitespace runs read as one space. Nothing else is changed: every word of a
  table is kept, in the order of its rows (`drkit.data.documents`).

`Table` renders rows given as cells; `markdown_table` finds a GitHub-flavoured Markdown table (a header row,
then a delimiter row such as "|---|:--:|" of as many cells) and gives its rows; `drkit.data.html_text` reads
<table> elements into `Table`.
"""

from __future__ import annotations

import re

Block = tuple[int, str, int]  # (first line, text, heading level: 0 for a paragraph), as drkit.data.documents' blocks

_DELIMITER_CELL = re.compile(r"^\s*:?-+:?\s*$")


class Table:
    """The rows of one table as blocks (paragraphs of one line each), appended to `blocks` as they come."""

    def __init__(self, blocks: list[Block]):
        self.blocks = blocks
        self.header: list[str] | None = None
        self.header_line = 0
        self.header_said = False  # the header is a line of its own already, or some row used it

    def header_row(self, line: int, cells: list[str]) -> None:
        """Make `cells` the header of the rows after it (the first header row; a later one is a row)."""
        cells = [_words(c) for c in cells]
        if self.header is not None or not any(cells):
            self.row(line, cells, [True] * len(cells))
            return
        self.header, self.header_line = cells, line

    def row(self, line: int, cells: list[str], heads: list[bool] | None = None) -> None:
        """A row: its cells' texts and, per cell, whether it is a header cell (HTML's <th>; default none)."""
        cells = [_words(c) for c in cells]
        heads = heads if heads is not None else [False] * len(cells)
        if not any(cells):
            return
        lead = cells[0] if heads[0] and not all(heads) else None  # a row's own header: "Born: 1867"
        parts, used = [], False
        for i in range(1 if lead is not None else 0, len(cells)):
            if not cells[i]:
                continue
            name = self.header[i] if self.header is not None and i < len(self.header) and not heads[i] else ""
            used = used or bool(name)
            parts.append(f"{name}: {cells[i]}" if name else cells[i])
        if not used:
            self._say_header()
        self.header_said = self.header_said or used
        body = "; ".join(parts)
        text = (f"{lead}: {body}" if body else lead) if lead else body
        self.blocks.append((line, text, 0))

    def end(self) -> None:
        """The table is over: a header no row used is a line."""
        self._say_header()

    def _say_header(self) -> None:
        if self.header is not None and not self.header_said:
            self.blocks.append((self.header_line, "; ".join(c for c in self.header if c), 0))
            self.header_said = True


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


def markdown_table(lines: list[tuple[int, str]], i: int, ends_row) -> tuple[list[Block], int] | None:
    """The blocks of the Markdown table whose header row is ``lines[i]`` and the index of the line after it, or
    None where no table starts there. Its rows are the lines after the delimiter row up to a blank line or one
    that `ends_row` (a heading, a code fence, ...) says starts another block."""
    line_no, text = lines[i]
    if "|" not in text or i + 1 >= len(lines):
        return None
    header = split_row(text)
    if not is_delimiter_row(lines[i + 1][1], len(header)):
        return None
    blocks: list[Block] = []
    table = Table(blocks)
    table.header_row(line_no, header)
    j = i + 2
    while j < len(lines) and lines[j][1].strip() and not ends_row(lines[j][1]):
        table.row(lines[j][0], split_row(lines[j][1]))
        j += 1
    table.end()
    return blocks, j
