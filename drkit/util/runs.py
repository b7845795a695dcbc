"""Resumable run directories, shared by pretraining and training.

A run directory holds ``run.json`` (the settings), ``checkpoints/step-N.pt`` (the last few) and
whatever the run writes. Running the same command again resumes it; other settings are refused
unless the caller overwrites, and overwriting deletes only a directory that holds a run.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from drkit.errors import ConfigError


def settings_diff(previous: dict, settings: dict, prefix: str = "") -> list[str]:
    """The settings that differ, nested keys dotted: ``["follow.min_weight: 0.01 in the run, 0.001 asked"]``."""
    out = []
    for k in sorted(previous.keys() | settings.keys()):
        old, new = previous.get(k), settings.get(k)
        if isinstance(old, dict) and isinstance(new, dict):
            out += settings_diff(old, new, f"{prefix}{k}.")
        elif old != new:
            out.append(f"{prefix}{k}: {old} in the run, {new} asked")
    return out


def prepare_run(run: Path, settings: dict, overwrite: bool, what: str) -> None:
    """Create `run` for `settings`, or check that it holds a run with the same settings (to resume)."""
    if run.exists() and overwrite:
        if any(run.iterdir()) and not (run / "run.json").exists():
            raise ConfigError(f"{run} is not empty and holds no {what} run; --overwrite deletes only a run directory")
        shutil.rmtree(run)
    if (run / "run.json").exists():
        previous = json.loads((run / "run.json").read_text())
        if previous != settings:
            raise ConfigError(f"{run} holds a run with other settings ({'; '.join(settings_diff(previous, settings))}); "
                              "use another --out, the same settings to resume, or --overwrite")
    run.mkdir(parents=True, exist_ok=True)
    (run / "run.json").write_text(json.dumps(settings, indent=2) + "\n")


def checkpoints(run: Path) -> list[Path]:
    """The run's checkpoints, oldest first."""
    return sorted((run / "checkpoints").glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))


def save_checkpoint(run: Path, state: dict, keep: int = 2) -> None:
    """Write ``checkpoints/step-{state['step']}.pt`` atomically and keep only the last `keep`."""
    d = run / "checkpoints"
    d.mkdir(parents=True, exist_ok=True)
    tmp = d / f".step-{state['step']}.pt.tmp"
    torch.save(state, tmp)
    tmp.replace(d / f"step-{state['step']}.pt")
    for p in checkpoints(run)[:-keep]:
        p.unlink()


def linear_schedule(opt: torch.optim.Optimizer, steps: int, warmup: float) -> torch.optim.lr_scheduler.LambdaLR:
    """Linear warm-up over the first `warmup` fraction of `steps`, then linear decay to 0."""
    warm = max(1, int(warmup * steps))
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / warm, max(0.0, (steps - s) / max(1, steps - warm))))


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
