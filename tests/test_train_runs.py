"""A training run directory stays consistent through crashes: the best model in ``model/`` and the
last checkpoint always go together."""

import json
import shutil

import numpy as np
import pytest
from test_model import SMALL, films_kb  # noqa: F401  (films_kb is a fixture)

from drkit.reason.follow import FollowConfig
from drkit.reason.train import TrainConfig, train
from drkit.util.runs import checkpoints


class Crash(Exception):
    pass


def _best_of_model(run):
    return json.loads((run / "model" / "manifest.json").read_text())["training"]["best"]


def _best_of_checkpoint(ckpt):
    return json.loads((ckpt / "state.json").read_text())["best"]


def test_crash_between_best_model_and_checkpoint(films_kb, tmp_path, monkeypatch):  # noqa: F811
    """Killed after the step-4 best model is saved but before the step-4 checkpoint: the run directory
    still pairs model/ with the last checkpoint, and resuming ends with the best model the log records."""
    import drkit.reason.train as train_module

    d, _ = films_kb
    scores = iter(np.linspace(0.1, 0.9, 50))  # every dev evaluation is better than the last
    monkeypatch.setattr(train_module, "hits", lambda ids, items, k: np.full(len(items), next(scores)))
    real_save, calls = train_module.save_checkpoint, []

    def save_then_crash(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # the step-4 checkpoint
            raise Crash("killed")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(train_module, "save_checkpoint", save_then_crash)
    cfg = TrainConfig(steps=6, batch_size=8, eval_every=2, checkpoint_every=2, dev_sample=0, precision="fp32")
    args = (d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "run")
    kw = dict(model_config=SMALL, follow_config=FollowConfig(top_k=50), config=cfg, log=lambda *a: None)
    with pytest.raises(Crash):
        train(*args, **kw)
    run = tmp_path / "run"
    last = checkpoints(run)[-1]
    assert last.name.startswith("step-2")
    assert _best_of_model(run) == _best_of_checkpoint(last)  # model/ is the best model of the last checkpoint

    monkeypatch.setattr(train_module, "save_checkpoint", real_save)
    messages = []
    train(*args, **{**kw, "log": messages.append})
    assert any("resuming" in m and "step 2" in m for m in messages)
    done = json.loads((run / "done.json").read_text())
    assert _best_of_model(run) == done["best"] == _best_of_checkpoint(checkpoints(run)[-1])
    assert done["best"]["step"] == 6
    dev = [json.loads(line) for line in (run / "dev_log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in dev] == [0, 2, 4, 6]


def test_resume_puts_back_a_lost_best_model(films_kb, tmp_path):  # noqa: F811
    """Killed while model/ was being replaced (after the checkpoint's commit): resuming puts the
    checkpoint's best model back."""
    from safetensors.torch import load_file

    d, _ = films_kb
    cfg = TrainConfig(steps=2, batch_size=8, eval_every=2, checkpoint_every=2, dev_sample=0, precision="fp32")
    args = (d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "run")
    kw = dict(model_config=SMALL, follow_config=FollowConfig(top_k=50), config=cfg, log=lambda *a: None)
    run = train(*args, **kw).parent
    want = load_file(str(run / "model" / "model.safetensors"))
    shutil.rmtree(run / "model")
    (run / "done.json").unlink()
    messages = []
    train(*args, **{**kw, "log": messages.append})
    assert any("put back" in m for m in messages), messages
    got = load_file(str(run / "model" / "model.safetensors"))
    assert all(got[k].equal(v) for k, v in want.items())
    assert _best_of_model(run) == _best_of_checkpoint(checkpoints(run)[-1])


def test_zero_steps_publishes_the_starting_model(films_kb, tmp_path):  # noqa: F811
    d, _ = films_kb
    cfg = TrainConfig(steps=0, dev_sample=0, precision="fp32")
    model = train(d / "index", d / "mentions", d / "train.txt", d / "dev.txt", tmp_path / "run", model_config=SMALL,
                  config=cfg, log=lambda *a: None)
    assert (model / "manifest.json").exists() and _best_of_model(tmp_path / "run")["step"] == 0
    assert [p.name for p in checkpoints(tmp_path / "run")] == ["step-0"]
