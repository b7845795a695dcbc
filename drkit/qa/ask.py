"""``drkit ask``: a `drkit.qa.pipeline.Result` as text for a terminal."""

from __future__ import annotations

from dataclasses import dataclass, field

from drkit.errors import ConfigError
from drkit.qa.results import Result


@dataclass(frozen=True)
class AskConfig:
    """What ``drkit ask`` prints."""

    top: int = field(default=5, metadata={"help": "answers to print"})
    chain_top: int = field(default=3, metadata={"help": "entities shown per hop of the reasoning chain (0: no chain)"})
    passages: int | None = field(default=None, metadata={
        "help": "passages to print (default: 5 for a hop-mixing model, its best passages; none for a multi-hop "
                "model, whose passages are those holding each hop's best entities' mentions)", "type": int})
    json: bool = field(default=False, metadata={"help": "print one JSON object per question instead of text"})

    def __post_init__(self):
        if self.top < 1 or self.chain_top < 0 or (self.passages is not None and self.passages < 0):
            raise ConfigError(f"top must be at least 1, chain_top and passages at least 0, got {self.top}, "
                              f"{self.chain_top} and {self.passages}")


def format_result(result: Result) -> list[str]:
    """The answers with their probabilities, then per hop the top entities with their supporting mention."""
    lines = [f"Q: {result.question}",
             f"   question entity: {result.question_entity} ({result.found_by}); {result.hops} hop(s)"]
    if result.pi is not None:
        lines.append("   pi (weight of 0, 1, .. hops): " + ", ".join(f"{x:.3f}" for x in result.pi))
    if not result.answers:
        lines.append("   no answer: no retrieved mention co-occurs with the question entity")
    for i, a in enumerate(result.answers, 1):
        lines.append(f"  {i}. {a.entity}  ({a.prob:.3f})")
    if result.chain:
        lines.append("  reasoning chain:")
    for hop in result.chain:
        lines.append(f"   hop {hop.hop}{' (linked, rescored)' if hop.hop == 0 else ''} ({hop.n_entities} entities):")
        for e in hop.top:
            if e.evidence is None:
                lines.append(f"     {e.entity} ({e.prob:.3f})")
                continue
            via = f" via {e.evidence.via}" if e.evidence.via else ""
            lines.append(f"     {e.entity} ({e.prob:.3f}){via}, in \"{e.evidence.title}\":")
            lines.append(f"        {e.evidence.snippet()}")
    if result.passages:
        lines.append("  passages:")
    for i, p in enumerate(result.passages, 1):
        how = f"hop {p.hop}, {p.entity}" if p.reached else "not reached: the question linker's"
        lines.append(f"  {i}. {p.title}  [{p.id}]  ({p.score:.3f}; {how})")
    if result.reading is not None:
        lines += format_reading(result.reading)
    return lines


def format_reading(r) -> list[str]:
    """The reader's answer (`drkit.qa.results.ReaderAnswer`): how it was found, then its supporting sentences."""
    how = ("the dates or countries read, compared" if r.comparison else
           f"{r.type}, p = {r.prob:.3f}" if r.prob is not None else r.type)
    lines = [f"  reader: {r.text or '(no answer)'}  ({how})"]
    if r.steps:
        lines.append(f"   read in two steps: \"{r.steps['inner']}\" -> {r.steps['bridge']} -> \"{r.steps['outer']}\"")
    for s in r.supporting:
        lines.append(f"   evidence, in \"{s.title}\": {s.text}")
    return lines
