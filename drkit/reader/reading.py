"""What the reader returns for one example: its answer, the span it was read from and the supporting sentences."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from drkit.dense.quantize import QUANTIZE
from drkit.errors import ConfigError

TITLE = -1  # the sentence number of a passage's title
READ_PIECES = 320  # the word pieces read by default (or fewer, where the reader was trained with fewer)
SKIP_BRIDGES_HELP = ("a span answer is never the title of a passage read that the question does not name (in \"the "
                     "director of film X\", the director's page: a hop on the way, not the answer); the reader's next "
                     "best span is taken instead")
COMPARE_HELP = ("answer a which-of-two date question (\"Who was born first, A or B?\") or a same-country one (\"Are A "
                "and B in the same country?\") by comparing the dates or countries read in the options' passages, where "
                "they settle it (drkit.reader.compare); --no-compare: the reader's answer alone")
READER_QUANTIZE_HELP = ("int8: the reader's transformer layers as int8 dynamic quantisation, read on the CPU in fp32: "
                        "on 2 AVX2 cores about a third less time a question read, answer EM 0.619 against 0.628 and "
                        "F1 0.673 against 0.687 on 2Wiki (no difference called; docs/reader.md)")
DECOMPOSE_HELP = ("read a two-hop question (\"Where was the director of film X born?\") as two one-hop questions, the "
                  "inner one in the named entity's passage, its answer (the bridge) put in the outer one, read in the "
                  "bridge's passage (drkit.reader.decompose; needs spaCy's English pipeline); --no-decompose: read "
                  "every question whole")
SPAN_CHECKS_HELP = ("a span answer is the reader's best of its 64 best spans that has its brackets balanced and is a date "
                    "where the question asks \"when\", and a name, not a date, where it asks \"where\", \"who\" or a "
                    "nationality, where one does (drkit.reader.decode.fits; its effect on 2Wiki: docs/reader.md); "
                    "--no-span-checks: the best span as it is")


@dataclass(frozen=True)
class ReadConfig:
    """How questions are read: `passages` read per question (N; used where the passages are chosen for the reader,
    `drkit.DrKIT`), the supporting-sentence threshold, the word pieces read (None: `READ_PIECES`, or what the reader
    was trained with where that is fewer: `pieces`), whether the comparison rules settle a which-of-two or same-country question before the reader
    (`drkit.reader.compare`; False: the reader's answer alone), whether a span answer skips the titles of the
    passages read that the question does not name (`drkit.reader.decode.bridge_names`), whether a two-hop
    question is read as two one-hop questions (`drkit.reader.decompose`), whether a span answer is checked for
    its form (`span_checks`: brackets balanced, a date or a name as the question asks), and the reader's transformer
    as int8 (`reader_quantize`; applied where a reader is bound to its reading settings:
    `drkit.reader.model.Reader.quantized`)."""

    passages: int = field(default=5, metadata={"help": "passages the reader reads (N), the top ones"})
    support_threshold: float = field(default=0.5, metadata={"help": "a sentence whose supporting probability is "
                                                                    "above this is evidence"})
    max_pieces: int | None = field(default=None, metadata={
        "help": "word pieces the reader reads, question and passages (fewer: faster, passages cut shorter)",
        "type": int, "default_help": f"{READ_PIECES}, or the reader's own where it was trained with fewer"})
    compare: bool = field(default=True, metadata={"help": COMPARE_HELP})
    skip_bridges: bool = field(default=False, metadata={"help": SKIP_BRIDGES_HELP})
    decompose: bool = field(default=True, metadata={"help": DECOMPOSE_HELP})
    span_checks: bool = field(default=True, metadata={"help": SPAN_CHECKS_HELP})
    reader_quantize: str = field(default="none", metadata={"help": READER_QUANTIZE_HELP, "choices": QUANTIZE})

    def __post_init__(self):
        if self.reader_quantize not in QUANTIZE:
            raise ConfigError(f"reader_quantize must be one of {', '.join(QUANTIZE)}, got {self.reader_quantize!r}")
        if self.passages < 1:
            raise ConfigError(f"passages must be at least 1, got {self.passages}")
        if not 0 < self.support_threshold < 1:
            raise ConfigError(f"support_threshold must be in (0, 1), got {self.support_threshold}")
        if self.max_pieces is not None and self.max_pieces < 1:
            raise ConfigError(f"max_pieces must be at least 1, got {self.max_pieces}")

    def pieces(self, trained: int) -> int:
        """The word pieces read by a reader trained with `trained` (its ``config.max_pieces``). Reading 320 of a
        512-piece reader's pieces gave the same answers on 2Wiki, 19% faster (docs/reader.md, the reading budget)."""
        return self.max_pieces if self.max_pieces is not None else min(READ_PIECES, trained)

    @classmethod
    def of(cls, settings) -> "ReadConfig":
        """The reading settings among the fields of a command's `settings` that have a reading setting's name
        (`drkit answer`'s, `drkit serve`'s; the others keep their defaults)."""
        return cls(**{f.name: getattr(settings, f.name) for f in dataclasses.fields(cls) if hasattr(settings, f.name)})


def read_field(name: str, prefix: str = ""):
    """A command's settings field that is `ReadConfig`'s `name`: its default and its help (after `prefix`)."""
    f = next(f for f in dataclasses.fields(ReadConfig) if f.name == name)
    return field(default=f.default, metadata={**f.metadata, "help": prefix + f.metadata["help"]})


@dataclass(frozen=True)
class Span:
    text: str
    passage: int  # its passage's number in the example
    sentence: int  # its sentence's number in the passage (`TITLE`: in the title)
    start: int  # character offsets in the title or in the passage text
    end: int
    score: float  # start + end logit


@dataclass(frozen=True)
class Supporting:
    passage: int  # the passage's number in the example
    sentence: int  # the sentence's number in the passage
    passage_id: str
    text: str
    prob: float | None  # None: a sentence the comparison rules read (`drkit.reader.compare.settled_reading`)


@dataclass(frozen=True)
class Reading:
    """What the reader read from one example."""

    answer: str  # the span's text, "yes" / "no", or what a comparison of dates or countries chose
    answer_type: str  # span | yes | no
    type_prob: float | None  # the reader's probability of its own type; None when a comparison answered unread
    span: Span | None  # the best span (also when the type is yes or no; None when a comparison answered)
    supporting: tuple[Supporting, ...]  # when a comparison answered: the sentences it read
    type_probs: dict  # {} when a comparison answered
    comparison: object = None  # a `drkit.reader.compare.Comparison` when the dates or countries read settled it
    steps: object = None  # a `drkit.reader.decompose.Steps` when read as two one-hop questions
