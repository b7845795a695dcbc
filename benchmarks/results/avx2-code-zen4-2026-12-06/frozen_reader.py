"""Train a reader with the transformer's embeddings and first N layers frozen on a reproduce-2wiki run's training
split, then read that run's dev questions with it as the run's rows do: its drkit top 5 (read-drkit) and, with a fourth
argument "gold", also their gold passages (read-gold). OUT/timings.json gets the training's seconds and OUT/split is
the run's, so that scripts/reader_runs_compare.py can set OUT beside the run.

    python frozen_reader.py RUN OUT N [gold]"""
import json
import sys
from pathlib import Path

from drkit.experiments.twowiki import TwoWikiConfig
from drkit.experiments.twowiki_reader import _rows
from drkit.reader.examples import read_passages
from drkit.reader.model import Reader
from drkit.reader.train import ReaderTrainConfig, train_reader
from drkit.util.hardware import configure_threads

run, out, n = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
rows = ("gold", "drkit") if sys.argv[4:] == ["gold"] else ("drkit",)
configure_threads(0)
data = Path("../shared/data/2wiki")
config = TwoWikiConfig()
path = train_reader(data / "corpus.jsonl", run / "split" / "train.jsonl", out / "train-reader", run / "kb-train.txt",
                    config.reader_config(), config=ReaderTrainConfig(epochs=config.reader_epochs, frozen_layers=n))
class T:  # timings stand-in
    def run(self, step, fn, log, **kw): fn()
found = _rows(Reader.load(path), read_passages(data / "corpus.jsonl"), run / "split" / "dev.jsonl", run, out, config,
              rows, T(), "read", print)
done = json.loads((out / "train-reader" / "done.json").read_text())
(out / "timings.json").write_text(json.dumps({"train-reader": done["seconds_this_session"]}, indent=2) + "\n")
if not (out / "split").exists():
    (out / "split").symlink_to((run / "split").resolve())
for row in rows:
    m = found[row]
    print(row, {k: m.get(k) for k in ("em", "f1", "reader_ms_per_question_batch1")})
