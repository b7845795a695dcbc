"""The steps of a resumable experiment: their wall time (`Timings`), their JSON results written whole
(`write_json`), and whether a result must be made again (`made_again`)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from drkit.errors import ConfigError
from drkit.util.artifact import file_checksum
from drkit.util.runs import settings_diff


class Timings:
    def __init__(self, path: Path):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {}

    def run(self, name: str, fn, log, resumes: Path | None = None):
        """Run step `name` (`fn`) and record its seconds; a step that resumes, also when it is interrupted.
        `resumes`: where a step that continues an interrupted run keeps its progress (its run folder, or an
        embedding's ``.OUT.partial``); when that exists before the call, the seconds recorded of the earlier,
        interrupted run are kept and this call's added. Otherwise the step is made whole by this call, and its
        seconds replace any recorded (a step made again, its output removed or its inputs changed, does not add
        the old run's)."""
        t = time.perf_counter()
        before = self.data.get(name, 0.0) if resumes is not None and Path(resumes).exists() else 0.0
        log(f"== {name}")
        try:
            result = fn()
        except BaseException:
            if resumes is not None:  # the work done counts for the run that resumes it; a step made whole again
                self._record(name, before + time.perf_counter() - t)  # replaces it anyway
            raise
        self._record(name, before + time.perf_counter() - t)
        return result

    def _record(self, name: str, seconds: float) -> None:
        self.data[name] = round(seconds, 1)
        write_json(self.path, self.data)  # whole or not at all: a second Ctrl-C cannot leave it cut short


def write_json(path: Path, obj) -> None:
    """Write `path` whole or not at all (a temporary file renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=2) + "\n")
    os.replace(tmp, path)


def made_again(path: Path, made_with: dict, log=print) -> bool:
    """Whether the JSON result `path` must be made (again): missing, or made from other inputs (logged)."""
    if not path.exists():
        return True
    before = json.loads(path.read_text())
    before = before.get("made_with") if isinstance(before, dict) else None
    if before == made_with:
        return False
    changed = [line.split(":")[0] for line in settings_diff(before or {}, made_with)]
    if before is not None and not changed:  # only what is no difference (`NOT_IDENTITY`: the device) changed
        return False
    log(f"{path} was made from another {', '.join(changed)}; making it again")
    return True


def embedded_as(mentions, config):
    """`mentions` (a `drkit.dense.mentions.MentionIndex` a run made before) when it was embedded as `config` (a
    `drkit.experiments.twowiki.TwoWikiConfig`) asks: with its ``--embed-quantize`` or as this machine would
    embed with it (int8 made on a CPU goes on on a GPU machine, and the reverse); else a `ConfigError`: the
    models of the run were trained on its vectors, so it is not embedded again under them."""
    have = mentions.manifest.get("config", {}).get("quantize", "none")
    if have not in (config.embed_quantize, config.embed_config().quantize):
        raise ConfigError(f"{mentions.path} was embedded with quantize {have!r} and this run asks for "
                          f"{config.embed_quantize!r} (--embed-quantize): the models of this output folder were "
                          f"trained on those vectors; choose another --out, or pass --embed-quantize {have}")
    return mentions


def model_checksums(run: Path) -> dict:
    """The checksums of a hop-mixing training run's model (its heads and its base model's weights)."""
    return {"model_sha256": file_checksum(run / "model" / "heads.safetensors")["sha256"],
            "base_sha256": file_checksum(run / "model" / "base" / "model.safetensors")["sha256"]}


def jsonable(obj):
    """`obj` as JSON would give it back (tuples and sets as lists)."""
    return json.loads(json.dumps(obj, default=list))
