"""Fold 1's reader trained again with the yes/no labelling fix (and this release's sentence splitting), then
the same three rows read as reproduce-2wiki reads them, into runs/2wiki-f1/labelfix/."""
import json
from pathlib import Path
from types import SimpleNamespace

from drkit.experiments.steps import Timings
from drkit.experiments.twowiki_reader import _rows
from drkit.reader.examples import read_passages
from drkit.reader.model import Reader
from drkit.reader.train import ReaderTrainConfig, train_reader

data, out = Path("../shared/data/2wiki"), Path("runs/2wiki-f1")
new = out / "labelfix"
new.mkdir(exist_ok=True)
timings = Timings(new / "timings.json")
log = print
timings.run("train-reader", lambda: train_reader(data / "corpus.jsonl", out / "split" / "train.jsonl", new / "train-reader",
                                                 out / "kb-train.txt", config=ReaderTrainConfig(epochs=2), log=log), log,
            resumes=new / "train-reader")
reader = Reader.load(new / "train-reader" / "reader")
rows = _rows(reader, read_passages(data / "corpus.jsonl"), out / "split" / "dev.jsonl", out, new,
             SimpleNamespace(reader_passages=5), ("gold", "drkit", "bm25"), timings, "read", log)
print(json.dumps({k: {m: v[m] for m in ("em", "f1")} for k, v in rows.items()}))
