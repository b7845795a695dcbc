"""Child processes that do not outlive the process that started them."""

from __future__ import annotations

import signal


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (a parent killed outright cannot stop it, close its pipes
    or release what it inherited, a lock's file among them); elsewhere nothing."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass
