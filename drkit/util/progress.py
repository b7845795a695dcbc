"""Progress bars on standard error (quiet when it is not a terminal, or with DRKIT_PROGRESS=0)."""

from __future__ import annotations

import os
import sys

from tqdm.auto import tqdm


def progress(iterable=None, **kwargs):
    enabled = os.environ.get("DRKIT_PROGRESS", "auto")
    disable = enabled == "0" or (enabled == "auto" and not sys.stderr.isatty())
    return tqdm(iterable, disable=disable, file=sys.stderr, dynamic_ncols=True, **kwargs)
