"""Profile the reader at batch 1 on the 50-question sample read-drkit times (drkit's top 5)."""
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

from drkit.qa.answer import AnswerConfig, passages_from_predictions
from drkit.reader.examples import ReaderExample, read_passages, read_questions
from drkit.reader.model import Reader
from drkit.util.hardware import choose, configure_threads

run = Path(sys.argv[1])
configure_threads(0)
passages = read_passages("../shared/data/2wiki/corpus.jsonl")
corpus = {p.id: p for p in passages}
records = read_questions(run / "split" / "dev.jsonl")
cfg = AnswerConfig()
by_id = passages_from_predictions(run / "retrieve-drkit" / "predictions.jsonl", corpus, cfg.passages)
reader = Reader.load(run / "train-reader" / "reader")
reader, compute = reader.for_reading(cfg.reader_quantize, cfg.precision)
compute = compute or choose(cfg.precision, "cpu")
rc = cfg.reading()
examples = [ReaderExample(r["id"], r["question"], tuple(by_id[r["id"]][: cfg.passages])) for r in records]
sample = examples[: cfg.qps_sample]
print("compute", compute.describe(), "sample", len(sample))
reader.read(sample[:2], 1, compute=compute, config=rc)
for rep in range(2):
    t = time.perf_counter(); reader.read(sample, 1, compute=compute, config=rc)
    print("ms/question", round(1000 * (time.perf_counter() - t) / len(sample), 1))
# transformer forward time alone: wrap reader.forward
fwd = {"n": 0, "s": 0.0, "pieces": 0}
orig = reader.forward
def timed(input_ids, attention_mask, content):
    t = time.perf_counter(); out = orig(input_ids, attention_mask, content); fwd["s"] += time.perf_counter() - t
    fwd["n"] += 1; fwd["pieces"] += int(input_ids.numel()); return out
reader.forward = timed
pr = cProfile.Profile(); pr.enable()
t = time.perf_counter(); reader.read(sample, 1, compute=compute, config=rc); total = time.perf_counter() - t
pr.disable()
print("total ms/q", round(1000 * total / len(sample), 1), "forward calls", fwd["n"], "forward ms/q", round(1000 * fwd["s"] / len(sample), 1),
      "pieces/call", fwd["pieces"] / max(1, fwd["n"]))
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("cumulative").print_stats(45); print(s.getvalue()[:9000])
s = io.StringIO(); pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(30); print(s.getvalue()[:6000])
