"""Run directories (`drkit.util.runs`) and seeded sampling (`drkit.util.sampling`): one helper each,
used by pretraining, training, the experiments and the benchmarks."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

import drkit

PACKAGE = Path(drkit.__file__).parent
ROOT = PACKAGE.parent


def _sources(*paths):
    for p in paths:
        yield from (sorted(p.rglob("*.py")) if p.is_dir() else [p])


def test_seeded_sampling_has_one_home():
    """Every seeded draw of rows (a sample of lines, a step's batch) goes through drkit.util.sampling."""
    home = PACKAGE / "util" / "sampling.py"
    found = [f"{p.relative_to(ROOT)}:{n}" for p in _sources(PACKAGE, ROOT / "benchmarks" / "bench_qa.py") if p != home
             for n, line in enumerate(p.read_text().splitlines(), 1) if re.search(r"default_rng|np\.random\.(?!Generator)", line)]
    assert not found, found


def test_sample_rows():
    from drkit.util.sampling import sample_rows

    rows = sample_rows(100, 10, seed=3)
    assert len(rows) == 10 and np.all(np.diff(rows) > 0) and rows.max() < 100
    assert np.array_equal(rows, sample_rows(100, 10, seed=3))
    assert not np.array_equal(rows, sample_rows(100, 10, seed=4))
    assert np.array_equal(sample_rows(5, None, seed=0), np.arange(5))
    assert np.array_equal(sample_rows(5, 9, seed=0), np.arange(5))
    assert len(sample_rows(5, 0, seed=0)) == 0
    # the same draw as before there was one helper (seeded dev samples and held-out queries are unchanged)
    assert np.array_equal(rows, np.sort(np.random.default_rng(3).choice(100, 10, replace=False)))


def test_step_rows_cover_each_pass_once():
    from drkit.util.sampling import step_rows

    seen = np.concatenate([step_rows(10, 3, s, seed=1) for s in range(3)])
    assert len(set(seen.tolist())) == 9
    assert np.array_equal(step_rows(10, 3, 4, seed=1), step_rows(10, 3, 4, seed=1))
    assert np.array_equal(step_rows(10, 3, 4, seed=1), np.random.default_rng([1, 1]).permutation(10)[3:6])


def test_grouped_step_rows_batch_each_group_apart_and_cover_it_once_a_pass():
    from drkit.util.sampling import group_batches, grouped_step_rows

    groups = [np.arange(0, 7), np.arange(7, 17)]  # 2 full batches of 3 in the first, 3 in the second
    per_pass = [grouped_step_rows(groups, 3, s, seed=1) for s in range(5)]
    assert all(len(b) == 3 and (set(b) <= set(groups[0]) or set(b) <= set(groups[1])) for b in per_pass)
    seen = np.concatenate(per_pass)
    assert len(set(seen.tolist())) == 15  # each row once, the leftover row of each group skipped
    assert sum(set(b) <= set(groups[0]) for b in per_pass) == 2
    assert np.array_equal(grouped_step_rows(groups, 3, 7, seed=1), grouped_step_rows(groups, 3, 7, seed=1))
    second = np.concatenate([grouped_step_rows(groups, 3, s, seed=1) for s in range(5, 10)])
    assert len(set(second.tolist())) == 15 and not np.array_equal(second, seen)  # the next pass: drawn again
    # a group smaller than a batch is one short batch (never left untrained), an empty one none
    small = [np.arange(0, 2), np.arange(2, 8), np.arange(0)]
    assert group_batches(small, 3) == [1, 2, 0]
    one_pass = [grouped_step_rows(small, 3, s, seed=0) for s in range(3)]
    assert sorted(np.concatenate(one_pass).tolist()) == list(range(8)) and sorted(map(len, one_pass)) == [2, 3, 3]
    with pytest.raises(ValueError):
        grouped_step_rows([np.arange(0)], 3, 0, seed=0)



def test_bucketed_step_rows_take_step_rows_rows_and_sort_each_pool_by_length():
    from drkit.util.sampling import bucketed_step_rows, step_rows

    n, bs, pool = 50, 4, 3
    lengths = np.random.default_rng(0).integers(1, 100, n)
    per_pass = n // bs
    got = [bucketed_step_rows(lengths, bs, s, seed=1, pool=pool) for s in range(per_pass)]
    drawn = [step_rows(n, bs, s, seed=1) for s in range(per_pass)]
    assert all(len(b) == bs for b in got)
    # the same rows as step_rows' pass (each once, the same leftovers skipped), in other batches
    assert sorted(np.concatenate(got).tolist()) == sorted(np.concatenate(drawn).tolist())
    # each batch is a run of its pool sorted longest first: a pool's batches do not overlap in length
    order = np.concatenate(drawn)
    pools = [set(order[i : i + pool * bs].tolist()) for i in range(0, len(order), pool * bs)]
    home = [next(k for k, p in enumerate(pools) if set(b.tolist()) <= p) for b in got]
    for a, pa in zip(got, home):
        for b, pb in zip(got, home):
            if pa == pb and a is not b:
                assert lengths[a].min() >= lengths[b].max() or lengths[b].min() >= lengths[a].max()
    assert sum(lengths[b].max() for b in got) < sum(lengths[b].max() for b in drawn)  # less padding
    # one batch a pool: step_rows' batches, in another order
    ones = [bucketed_step_rows(lengths, bs, s, seed=1, pool=1) for s in range(per_pass)]
    assert {frozenset(b.tolist()) for b in ones} == {frozenset(b.tolist()) for b in drawn}
    # a function of its arguments; the next pass is drawn again
    assert np.array_equal(bucketed_step_rows(lengths, bs, 5, seed=1, pool=pool), got[5])
    following = [bucketed_step_rows(lengths, bs, s, seed=1, pool=pool) for s in range(per_pass, 2 * per_pass)]
    assert not all(np.array_equal(a, b) for a, b in zip(got, following))
    # fewer rows than a batch: all of them, one short batch a pass, as step_rows gives
    assert sorted(bucketed_step_rows([3, 1, 2], 8, 0, seed=0, pool=16).tolist()) == sorted(step_rows(3, 8, 0, seed=0).tolist())
    assert sorted(bucketed_step_rows([3, 1, 2], 8, 1, seed=0, pool=16).tolist()) == [0, 1, 2]

# -- optimiser, schedule and checkpoints: one helper for pretraining and training -------------------------

def test_optimiser_schedule_and_resume_have_one_home():
    """pretrain.py and train.py build their optimiser, schedule and checkpoints through drkit.util.runs."""
    for p in (PACKAGE / "dense" / "pretrain.py", PACKAGE / "reason" / "train.py"):
        text = p.read_text()
        for what in ("torch.optim.AdamW", "linear_schedule(", "torch.load", "load_state_dict(state",
                     "set_rng_state", "truncate_log(", "clip_grad_norm_"):
            assert what not in text, f"{p.name} does its own {what}"


def _toy(seed=0):
    import torch

    from drkit.util.runs import adamw

    torch.manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Dropout(0.5), torch.nn.Linear(8, 1))
    opt, sched = adamw([{"params": list(model[0].parameters()), "lr": 1e-2},
                        {"params": list(model[2].parameters()), "lr": 1e-1, "weight_decay": 0.0}],
                       weight_decay=0.01, steps=6, warmup=0.2)
    return model, opt, sched


def _steps(model, opt, sched, lo, hi):
    import torch

    from drkit.util.runs import optimizer_step

    for s in range(lo, hi):
        x = torch.arange(8 * 4, dtype=torch.float32).reshape(8, 4) / (s + 1)
        optimizer_step(opt, model(x).pow(2).mean())
        sched.step()


def test_the_fused_update_is_adamws():
    """`adamw` steps with torch's fused kernel and reaches the values of torch's loop over tensors (both AdamW, two
    groups, weight decay, the schedule), to rounding."""
    import torch

    from drkit.util.runs import linear_schedule

    a, opt_a, sched_a = _toy()
    assert all(g["fused"] for g in opt_a.param_groups)
    b, _, _ = _toy()
    opt_b = torch.optim.AdamW([{"params": list(b[0].parameters()), "lr": 1e-2},
                               {"params": list(b[2].parameters()), "lr": 1e-1, "weight_decay": 0.0}],
                              weight_decay=0.01, foreach=False)
    sched_b = linear_schedule(opt_b, 6, 0.2)
    start = {k: v.clone() for k, v in a.state_dict().items()}
    for model, opt, sched in ((a, opt_a, sched_a), (b, opt_b, sched_b)):
        torch.manual_seed(5)  # the same dropout draws
        _steps(model, opt, sched, 0, 6)
    for k, v in a.state_dict().items():
        assert not torch.equal(v, start[k]), k  # it trained
        torch.testing.assert_close(v, b.state_dict()[k], rtol=1e-5, atol=1e-6, msg=k)


def test_checkpoint_round_trip_is_exact_and_pickle_free(tmp_path):
    import torch

    from drkit.util.runs import checkpoints, load_checkpoint, save_checkpoint

    a, opt_a, sched_a = _toy()
    _steps(a, opt_a, sched_a, 0, 6)
    b, opt_b, sched_b = _toy()
    _steps(b, opt_b, sched_b, 0, 3)
    save_checkpoint(tmp_path, 3, b, opt_b, sched_b, {"best": {"hits@1": 0.25, "step": 2}})
    c, opt_c, sched_c = _toy(seed=1)  # other weights and dropout draws until the checkpoint is loaded
    state = load_checkpoint(checkpoints(tmp_path)[-1], c, opt_c, sched_c)
    assert state["step"] == 3 and state["best"] == {"hits@1": 0.25, "step": 2}
    _steps(c, opt_c, sched_c, 3, 6)
    for k, v in a.state_dict().items():
        torch.testing.assert_close(c.state_dict()[k], v, rtol=0, atol=0, msg=k)
    assert sched_c.get_last_lr() == sched_a.get_last_lr()
    _assert_no_pickle(tmp_path / "checkpoints")


def _assert_no_pickle(d):
    files = [p for p in Path(d).rglob("*") if p.is_file()]
    assert files
    for p in files:
        assert p.suffix in (".json", ".safetensors"), p
        if p.suffix == ".json":
            json.loads(p.read_text())
        else:  # 8 bytes of header length, then the JSON header
            assert p.read_bytes()[8:9] == b"{", p


def test_checkpoints_keep_the_last_two(tmp_path):
    from drkit.util.runs import checkpoints, save_checkpoint

    model, opt, sched = _toy()
    for step in (1, 2, 3):
        save_checkpoint(tmp_path, step, model, opt, sched, {})
    assert [p.name for p in checkpoints(tmp_path)] == ["step-2", "step-3"]
    assert not [p for p in (tmp_path / "checkpoints").iterdir() if p.name.startswith(".")]


def test_old_pickled_checkpoints_are_refused(tmp_path):
    import pytest

    from drkit.errors import ArtifactError
    from drkit.util.runs import resume

    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "step-2.pt").write_bytes(b"PK\x03\x04")
    model, opt, sched = _toy()
    with pytest.raises(ArtifactError, match="step-2.pt"):
        resume(tmp_path, model, opt, sched, log=lambda *a: None)


def test_a_mixing_run_made_before_the_objective_setting_reads_as_the_objective_it_had(tmp_path):
    """A hop-mixing run.json without `objective` was trained with answers among Z*'s targets: it reads as
    pages+answers, so the default (pages) names the setting that differs instead of reusing the old model."""
    import dataclasses
    import json

    import pytest

    from drkit.errors import ConfigError
    from drkit.reason.train_mixing import MixTrainConfig
    from drkit.util.runs import prepare_run, upgrade_run_settings

    old = {k: v for k, v in dataclasses.asdict(MixTrainConfig()).items() if k != "objective"}
    (tmp_path / "run.json").write_text(json.dumps({"train": old}))
    upgrade_run_settings(tmp_path, {"train": MixTrainConfig})
    assert json.loads((tmp_path / "run.json").read_text())["train"]["objective"] == "pages+answers"
    with pytest.raises(ConfigError, match="objective"):
        prepare_run(tmp_path, {"train": dataclasses.asdict(MixTrainConfig())}, False, "training")


def test_a_run_resumes_and_a_result_stands_on_another_device(tmp_path):
    """The device is where a run computes, not what: a run made before --device (or on another device) resumes
    with the same settings, and a result made with another device setting is not made again; any other
    setting still differs."""
    import dataclasses

    import pytest

    from drkit.errors import ConfigError
    from drkit.experiments.steps import made_again, write_json
    from drkit.reason.train import TrainConfig
    from drkit.util.runs import prepare_run, settings_diff, upgrade_run_settings

    old = {k: v for k, v in dataclasses.asdict(TrainConfig()).items() if k != "device"}
    (tmp_path / "run.json").write_text(json.dumps({"train": old}))
    upgrade_run_settings(tmp_path, {"train": TrainConfig})
    prepare_run(tmp_path, {"train": dataclasses.asdict(TrainConfig(device="cpu"))}, False, "training")  # resumes
    assert settings_diff({"a": {"device": "cuda", "x": 1}}, {"a": {"device": "cpu", "x": 2}}) == [
        "a.x: 1 in the run, 2 asked"]
    # a file recorded with its checksum is the same file wherever it lies; another checksum is another file
    kb = {"path": "runs/a/kb.txt", "bytes": 3, "sha256": "ab"}
    assert settings_diff({"inputs": {"kb": kb}}, {"inputs": {"kb": {**kb, "path": "runs/b/kb.txt"}}}) == []
    assert settings_diff({"inputs": {"kb": kb}}, {"inputs": {"kb": {**kb, "path": "b", "sha256": "cd"}}}) == [
        "inputs.kb.path: runs/a/kb.txt in the run, b asked", "inputs.kb.sha256: ab in the run, cd asked"]
    with pytest.raises(ConfigError, match="steps"):
        prepare_run(tmp_path, {"train": dataclasses.asdict(TrainConfig(steps=7))}, False, "training")
    write_json(tmp_path / "metrics.json", {"hits": 1, "made_with": {"retrieve": {"device": "auto", "top": 20}}})
    assert not made_again(tmp_path / "metrics.json", {"retrieve": {"top": 20}}, log=lambda *a: None)
    assert made_again(tmp_path / "metrics.json", {"retrieve": {"top": 5}}, log=lambda *a: None)


def test_a_step_made_again_records_its_own_time_and_a_resumed_one_adds(tmp_path, monkeypatch):
    """timings.json: a step made whole again (its output removed, or its inputs changed) replaces the seconds
    recorded; an interrupted step's seconds are recorded, and a step that continues it from its own folder adds
    to them."""
    import drkit.experiments.steps as steps

    clock = iter([0.0, 5.0, 10.0, 12.0, 20.0, 23.0, 30.0, 37.0, 40.0, 41.0])
    monkeypatch.setattr(steps.time, "perf_counter", lambda: next(clock))
    timings = steps.Timings(tmp_path / "timings.json")
    timings.run("read", lambda: None, log=lambda *a: None)  # 5 s
    timings.run("read", lambda: None, log=lambda *a: None)  # made again: 2 s, not 7
    assert json.loads((tmp_path / "timings.json").read_text()) == {"read": 2.0}
    run = tmp_path / "train"

    def cut():
        run.mkdir()
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        timings.run("train", cut, log=lambda *a: None, resumes=run)  # interrupted after 3 s: recorded
    assert steps.Timings(tmp_path / "timings.json").data == {"read": 2.0, "train": 3.0}
    timings.run("train", lambda: None, log=lambda *a: None, resumes=run)  # continued from its folder: 3 + 7 s
    assert steps.Timings(tmp_path / "timings.json").data == {"read": 2.0, "train": 10.0}

    def refused():
        raise ValueError("bad input")

    with pytest.raises(ValueError):  # a step that does not resume and fails leaves no entry: it is made whole again
        timings.run("index", refused, log=lambda *a: None)
    assert steps.Timings(tmp_path / "timings.json").data == {"read": 2.0, "train": 10.0}
