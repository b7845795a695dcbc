"""Running a build step on Ray (the optional `ray` extra): a session, and the check that the shards' outputs
tile the input exactly.

``--engine ray`` starts Ray on this machine (``ray.init(num_cpus=...)``), or joins a running cluster when
``--ray-address`` (or the ``RAY_ADDRESS`` environment variable) names one, e.g. ``ray://head:10001`` or
``auto``. The workers read and write the build's folders, so on a cluster these must be on storage that
every node sees (the same path everywhere).
"""

from __future__ import annotations

import contextlib
import os

from drkit.errors import ConfigError, DrkitError

ENGINES = ("local", "ray")


def import_ray():
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        raise ConfigError("--engine ray needs Ray: pip install 'drkit[ray]' (or 'ray[data]')") from exc
    return ray


@contextlib.contextmanager
def ray_session(num_cpus: int | None = None, address: str | None = None):
    """Ray, started for the block (and stopped after it) unless it is already running in this process."""
    ray = import_ray()
    if ray.is_initialized():
        yield ray
        return
    address = address or os.environ.get("RAY_ADDRESS")
    kwargs = {"address": address} if address else {"num_cpus": num_cpus or os.cpu_count() or 1}
    ray.init(include_dashboard=False, log_to_driver=False, **kwargs)
    try:
        yield ray
    finally:
        ray.shutdown()


def check_tiling(ranges: list[tuple[int, int]], n: int, what: str) -> list[tuple[int, int]]:
    """`ranges` (from, to) of the shards' outputs, sorted: they must cover [0, n) once each, in order. A
    shard lost, duplicated or cut short raises a `DrkitError` naming the gap or overlap."""
    ranges = sorted(ranges)
    at = 0
    for lo, hi in ranges:
        if lo != at or hi <= lo:
            problem = f"{what} {at}..{lo - 1} are missing" if lo > at else f"{what} from {lo} come twice or out of order"
            raise DrkitError(f"a Ray shard's output is lost or repeated: {problem} (shards {ranges[:5]}...)")
        at = hi
    if at != n:
        raise DrkitError(f"a Ray shard's output is lost: {what} {at}..{n - 1} of {n} have none")
    return ranges
