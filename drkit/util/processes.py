"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import os
import signal
from functools import lru_cache

PR_SET_PDEATHSIG = 1


@lru_cache(maxsize=1)
def _prctl():
    """libc's prctl (Linux), or None; looked up once, best in the parent before it forks (a forked child then
    only calls it)."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6", use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def prepare_children() -> None:
    """Look up what `die_with_parent` calls, in the parent, before it forks children that will call it."""
    _prctl()


def die_with_parent(parent: int | None = None) -> None:
    """Linux: SIGKILL this process when its parent dies (a parent killed outright cannot stop it, close its pipes
    or release what it inherited, a lock's file among them); elsewhere nothing. `parent`: the parent's pid when
    this process was made; if it is already gone (it died before the signal was set), exit now."""
    prctl = _prctl()
    if prctl is not None:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent is not None and os.getppid() != parent:
        os._exit(1)
