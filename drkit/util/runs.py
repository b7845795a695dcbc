"""Resumable run directories, shared by pretraining and training.

A run directory holds ``run.json`` (the settings), ``checkpoints/step-N/`` (the last few) and
whatever the run writes. Running the same command again resumes it; other settings are refused
unless the caller overwrites, and overwriting deletes only a directory that holds a run.

A checkpoint is a directory (format ``drkit.checkpoint``) written under a temporary name and renamed
when complete, never a pickle: ``model.safetensors`` (the model's state dict), ``optimizer.safetensors``
(each parameter's optimiser tensors, keyed ``state.{parameter}.{name}``) and ``state.json`` (the
step, the optimiser's parameter groups, the schedule, the torch RNG state as a list of bytes, and
what the run adds, e.g. its best dev score).

A run that selects a model on dev (`drkit.reason.train`) publishes it as ``model/``, paired with a
checkpoint: a new best model is saved into `best_staging`; the next checkpoint moves it inside itself
(``best/``) in the same rename that commits the checkpoint, records it (``best_model`` in
``state.json``), then copies it to ``model/``. On resume, a staged model of a crashed run is dropped
and ``model/`` is restored from the checkpoint unless it is the one the checkpoint records, so
``model/`` is always the best model of the last checkpoint.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path

import torch

from drkit.errors import ArtifactError, ConfigError
from drkit.util.artifact import swap_in

CHECKPOINT_FORMAT = "drkit.checkpoint"
CHECKPOINT_VERSION = 1
BEST_MODEL = "model"  # where a run publishes its selected model


NOT_IDENTITY = ("device",)  # where a run computes, not what: a run resumes (a result stands) on another device


def settings_diff(previous: dict, settings: dict, prefix: str = "", paths: tuple[str, ...] = ()) -> list[str]:
    """The settings that differ, nested keys dotted: ``["follow.min_weight: 0.01 in the run, 0.001 asked"]``.
    The dotted keys in `paths` are file paths: the same file spelt differently is no difference. Keys named in
    `NOT_IDENTITY` (the device) are no difference either, nor is the path of a file recorded with its checksum
    (``{"path", "sha256", ...}``, `drkit.util.artifact.file_checksum`) when the checksums are equal: a run
    copied or moved with its inputs resumes."""
    out = []
    for k in sorted(previous.keys() | settings.keys()):
        if k in NOT_IDENTITY:
            continue
        old, new = previous.get(k), settings.get(k)
        if isinstance(old, dict) and isinstance(new, dict):
            if "path" in old and "path" in new and old.get("sha256") and old.get("sha256") == new.get("sha256"):
                old, new = {**old, "path": None}, {**new, "path": None}  # the same file, wherever it lies
            out += settings_diff(old, new, f"{prefix}{k}.", paths)
        elif old != new and not (f"{prefix}{k}" in paths and isinstance(old, str) and isinstance(new, str)
                                 and os.path.realpath(old) == os.path.realpath(new)):
            out.append(f"{prefix}{k}: {old} in the run, {new} asked")
    return out


def as_saved(cls, section: dict):
    """The settings dataclass `cls` of a saved `section`: a field added after it was saved takes what its absence
    meant (``cls.ABSENT_MEANT``), else its default."""
    return cls(**{**getattr(cls, "ABSENT_MEANT", {}), **section})


def upgrade_run_settings(run: Path, classes: dict, absent: dict | None = None) -> None:
    """Rewrite ``run.json`` of a run made before a settings field existed (or was a bool) as the settings it
    meant: each section named in `classes` (``{"train": TrainConfig, ...}``) read through its settings
    class, absent fields as `as_saved` reads them, or as `absent` (``{section: {field: value}}``) says where the
    caller knows what this run's absence meant. Left alone when a section does not read (unknown field, bad
    value): `prepare_run` then names what differs."""
    path = run / "run.json"
    if not path.exists():
        return
    settings = json.loads(path.read_text())
    upgraded = dict(settings)
    for key, cls in classes.items():
        if isinstance(settings.get(key), dict):
            section = dict(settings[key])
            if "bf16" in section and "precision" in {f.name for f in dataclasses.fields(cls)}:
                section["precision"] = "bf16" if section.pop("bf16") else "fp32"  # what the bool meant
            for name, meant in (absent or {}).get(key, {}).items():
                section.setdefault(name, meant)
            try:
                upgraded[key] = dataclasses.asdict(as_saved(cls, section))
            except (TypeError, ConfigError):
                return
    if upgraded != settings:
        path.write_text(json.dumps(upgraded, indent=2) + "\n")


def prepare_run(run: Path, settings: dict, overwrite: bool, what: str, paths: tuple[str, ...] = ()) -> None:
    """Create `run` for `settings`, or check that it holds a run with the same settings (to resume); the
    settings named in `paths` are file paths, compared as files (see `settings_diff`)."""
    if run.exists() and overwrite:
        if any(run.iterdir()) and not (run / "run.json").exists():
            raise ConfigError(f"{run} is not empty and holds no {what} run; --overwrite deletes only a run directory")
        shutil.rmtree(run)
    if (run / "run.json").exists():
        previous = json.loads((run / "run.json").read_text())
        changed = settings_diff(previous, settings, paths=paths)
        if changed:
            raise ConfigError(f"{run} holds a run with other settings ({'; '.join(changed)}); "
                              "use another --out, the same settings to resume, or --overwrite")
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps(settings, indent=2) + "\n")


def adamw(groups: list[dict], weight_decay: float, steps: int, warmup: float):
    """AdamW over the parameter `groups` (``{"params": [...], "lr": peak lr, ...}``), and `linear_schedule`. The
    update is torch's fused kernel (AdamW's arithmetic in one pass over each tensor; on 2 AVX2 cores an update of
    MiniLM's 22.7M parameters took 18.7 ms against the loop over tensors' 128.1, `benchmarks/bench_adamw.py`;
    the same values but for rounding, `tests/test_runs.py`). A checkpoint saved before resumes with the loop it
    was made with."""
    opt = torch.optim.AdamW(groups, weight_decay=weight_decay, fused=True)
    return opt, linear_schedule(opt, steps, warmup)


def linear_schedule(opt: torch.optim.Optimizer, steps: int, warmup: float) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first `warmup` fraction of `steps`, then linear decay to 0."""
    warm = max(1, int(warmup * steps))
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm))))


def optimizer_step(opt: torch.optim.Optimizer, loss: torch.Tensor, max_norm: float = 1.0) -> float:
    """Back-propagate `loss`, clip the gradient norm of the optimised parameters to `max_norm`, step.
    Returns the norm before clipping."""
    opt.zero_grad(set_to_none=True)
    loss.backward()
    norm = torch.nn.utils.clip_grad_norm_([p for g in opt.param_groups for p in g["params"]], max_norm)
    opt.step()
    return float(norm)


# -- checkpoints ------------------------------------------------------------------------------------------

def checkpoints(run: Path) -> list[Path]:
    """The run's committed checkpoints, oldest first."""
    found = [p for p in (Path(run) / "checkpoints").glob("step-*") if re.fullmatch(r"step-\d+", p.name) and p.is_dir()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def best_staging(run: Path) -> Path:
    """Where a run saves a new best model; the next `save_checkpoint` takes it in."""
    return Path(run) / "checkpoints" / ".best"


def save_checkpoint(run: Path, step: int, model: torch.nn.Module, opt: torch.optim.Optimizer, sched, extra: dict,
                    keep: int = 2) -> Path:
    """Write ``checkpoints/step-{step}/`` atomically (with the staged best model, if any, which is then
    published as ``model/``) and keep only the last `keep` checkpoints. `extra`: JSON the run adds."""
    from safetensors.torch import save_file

    run = Path(run)
    d = run / "checkpoints"
    d.mkdir(parents=True, exist_ok=True)
    previous = checkpoints(run)
    best_model = _read_state(previous[-1]).get("best_model") if previous else None
    tmp = Path(tempfile.mkdtemp(prefix=f".step-{step}.tmp-", dir=d))
    try:
        save_file(_tensors(model.state_dict()), str(tmp / "model.safetensors"))
        opt_tensors, opt_json = _flatten_optimizer(opt)
        save_file(opt_tensors, str(tmp / "optimizer.safetensors"))
        staged = best_staging(run)
        if (staged / "manifest.json").exists():
            os.replace(staged, tmp / "best")
            best_model = {"checkpoint": f"step-{step}", "manifest_sha256": _sha256(tmp / "best" / "manifest.json")}
        state = {"format": CHECKPOINT_FORMAT, "format_version": CHECKPOINT_VERSION, **extra, "step": step,
                 "best_model": best_model, "optimizer": opt_json, "scheduler": sched.state_dict(),
                 "torch_rng": torch.get_rng_state().tolist(),
                 # the GPUs' generators too (dropout there draws from them), where CUDA has been used
                 "cuda_rng": [g.tolist() for g in torch.cuda.get_rng_state_all()] if torch.cuda.is_initialized() else None}
        (tmp / "state.json").write_text(json.dumps(state) + "\n")
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)  # mkdtemp makes it 0700
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    final = d / f"step-{step}"
    swap_in(tmp, final)  # the commit
    if (final / "best").exists():
        _copy_dir_atomically(final / "best", run / BEST_MODEL)
    for p in checkpoints(run)[:-keep]:
        shutil.rmtree(p)
    return final


def load_checkpoint(path: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, sched) -> dict:
    """Load a checkpoint into `model`, `opt`, `sched` and the torch RNG; returns its ``state.json``."""
    from safetensors.torch import load_file

    path = Path(path)
    state = _read_state(path)
    model.load_state_dict(load_file(str(path / "model.safetensors")))
    opt.load_state_dict(_unflatten_optimizer(load_file(str(path / "optimizer.safetensors")), state["optimizer"]))
    sched.load_state_dict(state["scheduler"])
    torch.set_rng_state(torch.tensor(state["torch_rng"], dtype=torch.uint8))
    if state.get("cuda_rng") and torch.cuda.is_available() and len(state["cuda_rng"]) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([torch.tensor(g, dtype=torch.uint8) for g in state["cuda_rng"]])
    return state


def resume(run: Path, model: torch.nn.Module, opt: torch.optim.Optimizer, sched, log=print,
           logs: tuple[str, ...] = ("train_log.jsonl",)) -> dict | None:
    """Load the run's last checkpoint (None if it has none): drop what a crash left half-written, put
    back ``model/`` if it is not the best model of that checkpoint, and cut the step `logs` to its step."""
    run = Path(run)
    d = run / "checkpoints"
    old = sorted(d.glob("step-*.pt"))
    if old:
        raise ArtifactError(f"{old[-1]} is a checkpoint of an older drkit (a pickle, which drkit no longer loads); "
                            f"delete {d} to start this run again, or pass --overwrite")
    for p in d.glob(".*"):  # a staged best model or a half-written checkpoint: after the last commit
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    found = checkpoints(run)
    if not found:
        return None
    state = load_checkpoint(found[-1], model, opt, sched)
    best = state.get("best_model")
    published = run / BEST_MODEL / "manifest.json"
    if best is not None and not (published.exists() and _sha256(published) == best["manifest_sha256"]):
        source = d / best["checkpoint"] / "best"
        if not (source / "manifest.json").exists():
            raise ArtifactError(f"{run / BEST_MODEL} is not the best model recorded by {found[-1]} and {source} is gone; "
                                "pass --overwrite to start this run again")
        _copy_dir_atomically(source, run / BEST_MODEL)
        log(f"{run / BEST_MODEL}: put back the best model of {found[-1]} (it had been replaced after that checkpoint)")
    for name in logs:
        truncate_log(run / name, state["step"])
    return state


def _read_state(path: Path) -> dict:
    file = Path(path) / "state.json"
    if not file.exists():
        raise ArtifactError(f"{file} is missing; the checkpoint is incomplete")
    state = json.loads(file.read_text())
    if state.get("format") != CHECKPOINT_FORMAT or state.get("format_version", 0) > CHECKPOINT_VERSION:
        raise ArtifactError(f"{file}: not a {CHECKPOINT_FORMAT} version <= {CHECKPOINT_VERSION}")
    return state


def _tensors(state: dict) -> dict:
    """Own, contiguous copies on the CPU (safetensors refuses tensors that share memory, such as tied weights)."""
    return {k: v.detach().cpu().contiguous().clone() for k, v in state.items()}


def _flatten_optimizer(opt: torch.optim.Optimizer) -> tuple[dict, dict]:
    """The optimiser's state as ``{"state.{param}.{name}": tensor}`` and JSON for the rest."""
    sd = opt.state_dict()
    tensors, scalars = {}, {}
    for i, per_param in sd["state"].items():
        for name, v in per_param.items():
            if torch.is_tensor(v):
                tensors[f"state.{i}.{name}"] = v
            else:
                scalars[f"{i}.{name}"] = v
    groups = [{k: list(v) if isinstance(v, tuple) else v for k, v in g.items()} for g in sd["param_groups"]]
    return _tensors(tensors), {"param_groups": groups, "scalars": scalars}


def _unflatten_optimizer(tensors: dict, meta: dict) -> dict:
    state: dict = {}
    for key, v in tensors.items():
        _, i, name = key.split(".", 2)
        state.setdefault(int(i), {})[name] = v
    for key, v in meta["scalars"].items():
        i, name = key.split(".", 1)
        state.setdefault(int(i), {})[name] = v
    groups = [{k: tuple(v) if isinstance(v, list) and k != "params" else v for k, v in g.items()}
              for g in meta["param_groups"]]
    return {"state": state, "param_groups": groups}


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _copy_dir_atomically(src: Path, dst: Path) -> None:
    """Replace `dst` by a copy of `src`, renamed into place when complete."""
    tmp = Path(tempfile.mkdtemp(prefix=f".{dst.name}.tmp-", dir=dst.parent))
    try:
        shutil.copytree(src, tmp, dirs_exist_ok=True)
        shutil.copystat(src, tmp)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    swap_in(tmp, dst)  # a server loading the model finds the old one or the new one, whole


def append_log(path: Path, record: dict) -> None:
    """Append one JSON record as a line of a run's log."""
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def read_log(path: Path) -> list[dict]:
    """The records of a JSONL step log ([] if it does not exist yet)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def truncate_log(path: Path, step: int) -> None:
    """Drop the records of a JSONL step log after `step` (written after the checkpoint a run resumes from)."""
    if path.exists():
        path.write_text("".join(json.dumps(r) + "\n" for r in read_log(path) if r.get("step", 0) <= step))
