"""Exclusive locks on output folders: one run (or one extraction) writes a folder at a time.

Two runs into one output folder, or two extractions into one store, used to interleave their
files (``config.json`` from one run, the results from the other). :func:`folder_lock` takes an
exclusive lock on a folder for the duration of a ``with`` block:

- the lock is ``fcntl.flock`` on ``<folder>/.semshift.lock``, which also holds the holder's
  pid, host, command and start time (JSON) for the message a second process prints;
- the kernel releases it when the holder's process ends, however it ends (a SIGKILL, a power
  cut of a local disk), so a stale lock file of a dead process is simply taken over;
- a second process waits (printing who holds the lock once, to stderr), or with
  ``wait=False`` raises :class:`LockedError` (exit 2 from the CLI) at once.

Locks are advisory and local: they protect against semshift processes on the same machine (or
on a file system whose ``flock`` is cluster-wide).
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from semshift.errors import InputError

__all__ = ["LOCK_NAME", "LockedError", "folder_lock", "lock_holder"]

#: The lock file in a locked folder.
LOCK_NAME = ".semshift.lock"


class LockedError(InputError):
    """Another process holds the folder's lock (and the caller asked not to wait)."""


def lock_holder(folder: str | Path) -> dict[str, Any]:
    """What the lock file of ``folder`` says about its holder (empty when unreadable)."""
    try:
        data = json.loads((Path(folder) / LOCK_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _describe(holder: dict[str, Any]) -> str:
    if not holder:
        return "another process"
    return (
        f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since "
        f"{holder.get('started', '?')} ({holder.get('command', '?')})"
    )


@contextlib.contextmanager
def folder_lock(
    folder: str | Path,
    *,
    what: str = "output folder",
    wait: bool = True,
    poll: float = 0.5,
    timeout: float | None = None,
    announce: Callable[[str], Any] | None = None,
) -> Iterator[Path]:
    """Hold an exclusive lock on ``folder`` (created if missing) inside the ``with`` block.

    Parameters
    ----------
    folder : str or Path
        The folder to lock.
    what : str
        What the folder is, for messages (``"output folder"``, ``"feature store"``).
    wait : bool
        Wait for the holder to finish (default); False raises :class:`LockedError` at once.
    poll : float
        Seconds between tries while waiting.
    timeout : float, optional
        Give up waiting after this many seconds (LockedError).
    announce : callable, optional
        Called once with the waiting message (default: printed to stderr).

    Raises
    ------
    LockedError
        Another live process holds the lock and ``wait`` is False or ``timeout`` passed.
    """
    import fcntl

    root = Path(folder)
    created = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    path = root / LOCK_NAME
    fd = _acquire(root, path, what, wait, poll, timeout, announce)
    try:
        record = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(os.path.basename(a) if i == 0 else a
                                for i, a in enumerate(sys.argv))[:200],
        }  # fmt: skip
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(record).encode(), 0)
        try:
            yield root
        finally:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, 0)
            # a folder this lock created and nothing else filled (an error before any output)
            # is removed; a waiter notices the unlinked file and locks the new one
            with contextlib.suppress(OSError):
                if created and [p.name for p in root.iterdir()] == [LOCK_NAME]:
                    path.unlink()
                    root.rmdir()
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _acquire(
    root: Path,
    path: Path,
    what: str,
    wait: bool,
    poll: float,
    timeout: float | None,
    announce: Callable[[str], Any] | None,
) -> int:
    """An open descriptor of ``path`` holding its exclusive ``flock``.

    The lock is taken on the file the path names at that moment: when the holder removed the
    file (and its folder) before releasing, the lock on the old file is dropped and taken again.
    """
    import fcntl

    t0 = time.monotonic()
    told = False
    while True:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            holder = _describe(lock_holder(root))
            if not wait or (timeout is not None and time.monotonic() - t0 > timeout):
                raise LockedError(
                    f"{what} {root} is in use by {holder}; wait for it to finish, or "
                    f"choose another {what}"
                ) from None
            if not told:
                msg = f"waiting for {what} {root}: in use by {holder}"
                (announce or (lambda m: print(m, file=sys.stderr, flush=True)))(msg)
                told = True
            time.sleep(poll)
            continue
        try:
            same = os.stat(path).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the file was replaced or removed while we waited: lock the current one
