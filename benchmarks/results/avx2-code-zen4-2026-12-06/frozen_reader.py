"""Train a reader with the transformer's embeddings and first N layers frozen on a reproduce-2wiki run's training
split, then read that run's drkit top 5 of its dev questions with it, as the run's read-drkit row does."""
import sys
from pathlib import Path

from drkit.experiments.twowiki import TwoWikiConfig
from drkit.experiments.twowiki_reader import _rows
from drkit.reader.examples import read_passages
from drkit.reader.model import Reader
from drkit.reader.train import ReaderTrainConfig, train_reader
from drkit.util.hardware import configure_threads

run, out, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
configure_threads(0)
data = Path("../shared/data/2wiki")
config = TwoWikiConfig()
path = train_reader(data / "corpus.jsonl", run / "split" / "train.jsonl", out / "train-reader", run / "kb-train.txt",
                    config.reader_config(), config=ReaderTrainConfig(epochs=config.reader_epochs, frozen_layers=n))
class T:  # timings stand-in
    def run(self, step, fn, log, **kw): fn()
found = _rows(Reader.load(path), read_passages(data / "corpus.jsonl"), run / "split" / "dev.jsonl", run, out, config,
              ("drkit",), T(), "read", print)
m = found["drkit"]
print({k: m.get(k) for k in ("em", "f1", "reader_ms_per_question_batch1")})
