"""The reader's batched reading: batches taken by length (`drkit.reader.routing.read_whole`), each reading as the
example read alone, returned in the examples' order."""

import pytest

from drkit.reader.examples import ReaderExample, ReaderPassage
from drkit.reader.reading import ReadConfig


def test_batches_by_length_read_as_alone_and_in_order(tiny_reader):
    config = ReadConfig(compare=False, decompose=False)  # every example read whole by the transformer
    texts = ["Kismet is a 1944 film.", "Tom Hill (born 1950) is a singer from Leeds. " * 4,
             "Ann Lee was a singer.", "Bob Ray is a painter. He lives in Rome. " * 2, "Oslo is a city."]
    examples = [ReaderExample(f"q{i}", "Who is a singer?", (ReaderPassage(f"p{i}", f"Page {i}", t),
                                                             ReaderPassage("x", "Kismet", texts[0])))
                for i, t in enumerate(texts)]
    widths = []
    batch = tiny_reader.batch
    tiny_reader.batch = lambda features: (widths.append([len(f.ids) for f in features]), batch(features))[1]
    try:
        together = tiny_reader.read(examples, batch_size=2, config=config)
    finally:
        del tiny_reader.batch
    alone = [tiny_reader.read([e], config=config)[0] for e in examples]
    lengths = sorted((w for ws in widths for w in ws), reverse=True)
    assert [w for ws in widths for w in ws] == lengths and len(widths) == 3  # longest first, two a batch
    assert len(set(lengths)) == len(examples)  # the examples differ in length, so the order was changed
    for got, want in zip(together, alone):  # in the examples' order, each as read alone
        assert (got.answer, got.answer_type, got.span.text if got.span else None) == (
            want.answer, want.answer_type, want.span.text if want.span else None)
        assert got.type_prob == pytest.approx(want.type_prob, abs=1e-5)
        assert [(s.passage_id, s.sentence) for s in got.supporting] == [(s.passage_id, s.sentence) for s in want.supporting]
