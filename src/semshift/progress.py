"""When and where progress bars show: on stderr, only when someone watches.

Every long step of semshift (extraction, training, a run's stages, ``splits laid``, writing a
report) draws a rich progress bar through :func:`bar_console` when :func:`progress_wanted`
says so: the command asked for progress (not ``--quiet``) and stderr is a terminal. Piped or
redirected output (CI logs, ``> out.txt``) gets no bars, only the commands' result lines.
``SEMSHIFT_PROGRESS=1`` forces bars on (a terminal multiplexer that hides the TTY), ``0`` off.

>>> import os
>>> os.environ["SEMSHIFT_PROGRESS"] = "0"
>>> progress_wanted(True)
False
>>> del os.environ["SEMSHIFT_PROGRESS"]
"""

from __future__ import annotations

import os
import sys
from typing import Any

__all__ = ["bar_console", "progress_wanted"]


def progress_wanted(requested: bool = True) -> bool:
    """True when bars should be drawn: ``requested`` and stderr a terminal (or forced by
    ``SEMSHIFT_PROGRESS=1``; ``SEMSHIFT_PROGRESS=0`` turns them off)."""
    if not requested:
        return False
    forced = os.environ.get("SEMSHIFT_PROGRESS", "").strip()
    if forced in ("0", "1"):
        return forced == "1"
    stream = sys.stderr
    return bool(stream is not None and hasattr(stream, "isatty") and stream.isatty())


def bar_console() -> Any:
    """A rich console on stderr for progress bars (results go to stdout)."""
    from rich.console import Console

    return Console(stderr=True, highlight=False)
