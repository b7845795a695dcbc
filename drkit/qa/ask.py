"""``drkit ask``: a `drkit.qa.pipeline.Result` as text for a terminal."""

from __future__ import annotations

from dataclasses import dataclass, field

from drkit.errors import ConfigError
from drkit.qa.pipeline import Result


@dataclass(frozen=True)
class AskConfig:
    """What ``drkit ask`` prints."""

    top: int = field(default=5, metadata={"help": "answers to print"})
    chain_top: int = field(default=3, metadata={"help": "entities shown per hop of the reasoning chain (0: no chain)"})
    json: bool = field(default=False, metadata={"help": "print one JSON object per question instead of text"})

    def __post_init__(self):
        if self.top < 1 or self.chain_top < 0:
            raise ConfigError(f"top must be at least 1 and chain_top at least 0, got {self.top} and {self.chain_top}")


def format_result(result: Result) -> list[str]:
    """The answers with their probabilities, then per hop the top entities with their supporting mention."""
    lines = [f"Q: {result.question}",
             f"   question entity: {result.question_entity} ({result.found_by}); {result.hops} hop(s)"]
    if not result.answers:
        lines.append("   no answer: no retrieved mention co-occurs with the question entity")
    for i, a in enumerate(result.answers, 1):
        lines.append(f"  {i}. {a.entity}  ({a.prob:.3f})")
    if result.chain:
        lines.append("  reasoning chain:")
    for hop in result.chain:
        lines.append(f"   hop {hop.hop} ({hop.n_entities} entities):")
        for e in hop.top:
            via = f" via {e.evidence.via}" if e.evidence.via else ""
            lines.append(f"     {e.entity} ({e.prob:.3f}){via}, in \"{e.evidence.title}\":")
            lines.append(f"        {e.evidence.snippet()}")
    return lines


def format_retrieved(question: str, r, keys: list[str], titles: list[str], top: int) -> list[str]:
    """A hop-mixing model's answer (`drkit.qa.retrieve.Retrieved`): the mixing weights pi, the chain (the best
    entities of Z_0 .. Z_T), the last hop's best entity and the best passages."""
    lines = [f"Q: {question}", "   pi (weight of 0, 1, .. hops): " + ", ".join(f"{x:.3f}" for x in r.pi)]
    for t, hop in enumerate(r.chain):
        lines.append(f"   Z_{t}{' (linked, rescored)' if t == 0 else ''}:" + ("" if hop else " (empty)"))
        for e in hop:
            where = f", as \"{e['mention']}\" in \"{e['title']}\" [{e['passage']}]" if "mention" in e else ""
            lines.append(f"     {e['entity']} ({e['score']:.3f}){where}")
    if r.answer is not None:
        lines.append(f"   answer (best entity of the last hop): {r.answer}")
    lines.append("   passages:")
    for i, (a, s) in enumerate(zip(r.articles[:top], r.scores[:top]), 1):
        lines.append(f"  {i}. {titles[a]}  [{keys[a]}]  ({s:.3f})")
    return lines
