"""How a reader's examples are routed (`drkit.reader.model.Reader.read`): a which-of-two date question or a
same-country question that the dates or countries in its passages settle is answered by the comparison rules
unread (`drkit.reader.compare`); a two-hop question the parser splits is read as two one-hop questions
(`drkit.reader.decompose`); every other example is read whole by the transformer, in batches, and decoded
(`drkit.reader.decode`)."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Sequence

from drkit.reader.compare import settled, settled_reading
from drkit.reader.decode import decode
from drkit.reader.decompose import Decomposer, read_in_two_steps
from drkit.reader.examples import ReaderExample
from drkit.reader.reading import ReadConfig, Reading


def read_examples(reader, examples: Sequence[ReaderExample], batch_size: int, compute, config: ReadConfig) -> list[Reading]:
    """Each example's `Reading` by `reader` (a `drkit.reader.model.Reader` in eval mode), routed as the module
    docstring says; `compute`: the precision's autocast (None: as the reader is)."""
    out: list[Reading | None] = [None] * len(examples)
    todo = []
    for i, e in enumerate(examples):
        found = settled(e) if config.compare else None
        if found is None:
            todo.append(i)
        else:
            out[i] = settled_reading(e, found)
    decomposer = Decomposer.shared() if config.decompose and todo else None
    plans = {i: plan for i in (todo if decomposer is not None else ())
             if (plan := decomposer(examples[i].question, [p.title for p in examples[i].passages])) is not None}
    whole = [i for i in todo if i not in plans]

    def read_all(chosen: Sequence[ReaderExample], hop: bool = False) -> list[Reading]:
        # a hop's question never skips the bridges' titles: the inner hop's answer is one
        hop_config = dataclasses.replace(config, skip_bridges=False) if hop else config
        return read_whole(reader, chosen, batch_size, compute, hop_config)

    two = list(plans)
    for i, reading in [*zip(whole, read_all([examples[i] for i in whole])),
                       *zip(two, read_in_two_steps(lambda chosen: read_all(chosen, hop=True),
                                                   [examples[i] for i in two], [plans[i] for i in two], read_all))]:
        out[i] = reading
    return out


def read_whole(reader, examples: Sequence[ReaderExample], batch_size: int, compute, config: ReadConfig) -> list[Reading]:
    """Each example read by `reader`'s transformer, in batches of `batch_size`, and decoded; in the examples' order.
    The batches take the examples by length (their word pieces, longest first), so that each is padded little:
    a batch of a two-step question's short hop and a whole reading of 512 pieces computed 30% padding before."""
    pieces = config.pieces(reader.config.max_pieces)
    features = [reader.featurize(e, max_pieces=pieces) for e in examples]
    order = sorted(range(len(examples)), key=lambda i: -len(features[i].ids))
    out: list[Reading | None] = [None] * len(examples)
    for s in range(0, len(order), batch_size):
        chunk = order[s : s + batch_size]
        with compute.autocast() if compute is not None else contextlib.nullcontext():
            logits = reader(**reader.batch([features[i] for i in chunk]))
        logits = {k: v.float().cpu() for k, v in logits.items()}
        for r, i in enumerate(chunk):
            out[i] = decode(examples[i], features[i], {k: v[r] for k, v in logits.items()}, config.support_threshold,
                            reader.config.max_answer_pieces, config.skip_bridges, config.span_checks)
    return out
