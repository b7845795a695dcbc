"""Plain questions (no [bracketed] entity) in question files: `drkit index --questions`, `drkit train` and
`drkit evaluate` link their question entity as `drkit ask` does; one that names no entity is counted."""

from __future__ import annotations

import json

from test_model import SMALL, films_kb  # noqa: F401  (films_kb is a fixture)

from drkit.index.build import build_index
from drkit.reason.model import ModelConfig
from drkit.reason.train import TrainConfig, train


def test_index_reachability_links_plain_questions(toy_files, tmp_path):
    questions = tmp_path / "qa.txt"
    questions.write_text("who directed [Kismet]\tWilliam Dieterle\n"
                         "who directed Kismet\tWilliam Dieterle\n"
                         "who directed the film nobody saw\tWilliam Dieterle\n", encoding="utf-8")
    index = build_index(toy_files / "wiki.txt", tmp_path / "index", kb=toy_files / "kb.txt",
                        questions=[f"1:{questions}"], log=lambda *a: None)
    [result] = json.loads((index.path / "report.json").read_text())["reachability"].values()
    assert (result["questions"], result["reachable"], result["topic_not_an_entity"]) == (3, 2, 1)


def test_train_accepts_plain_questions(films_kb, tmp_path):  # noqa: F811
    d, films = films_kb
    train_file = tmp_path / "train.txt"
    lines = [f"who directed {f['title']}\t{f['director']}" for f in films[:6]]  # plain
    lines += [f"when was [{f['title']}] released\t{f['year']}" for f in films[6:9]]  # bracketed
    lines += ["who directed the film nobody saw\tSomebody"]  # plain, naming no entity
    train_file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    dev_file = tmp_path / "dev.txt"
    dev_file.write_text("".join(f"who directed {f['title']}\t{f['director']}\n" for f in films[36:40]), encoding="utf-8")
    logged = []
    train(d / "index", d / "mentions", train_file, dev_file, tmp_path / "run",
          model_config=ModelConfig(hops=1, shared_layers=SMALL.shared_layers, hop_layers=SMALL.hop_layers),
          config=TrainConfig(steps=1, batch_size=4, precision="fp32", eval_every=1), log=logged.append)
    assert any("training questions: 9 of 10 lines usable (1 without a known question entity" in m for m in logged), logged
    assert any("dev Hits@1 before training" in m and "(4 questions)" in m for m in logged), logged
