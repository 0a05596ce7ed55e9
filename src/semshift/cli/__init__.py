"""The ``semshift`` command: the typer app (:mod:`semshift.cli._app`), one module per command
group, and :func:`main`, which turns errors into one line.

A command group is added by one module: :func:`register_command_group` (or an entry point of
the ``semshift.commands`` group; see :mod:`semshift.cli._app`).

User mistakes (bad names, files, options) print one line to stderr and exit with status 2; nothing
already written is removed.
"""

from __future__ import annotations

import sys

from typer.exceptions import Abort, Exit, TyperException

from semshift.cli import (  # noqa: F401  (each module registers its commands on the app)
    benchmark,
    demo,
    extract,
    registries,
    runs,
    splits,
    splits_graded,
    splits_superclass,
    store,
    study,
    taxonomy,
    train,
    zsl,
)
from semshift.cli._app import COMMAND_GROUPS, CommandGroup, app, register_command_group
from semshift.errors import SemshiftError

#: errno values of a write that found no room: the file is named, and what to do
_NO_ROOM = {"ENOSPC", "EDQUOT", "EFBIG"}


def _os_error(exc: OSError) -> str:
    """An OSError as one line that names its file, even when the failing call named none: a
    ``write()`` that finds the disk full raises ``OSError(ENOSPC)`` without a file name, so the
    file being written is taken from the traceback (:func:`_file_being_written`)."""
    import errno
    import re

    reason = exc.strerror or str(exc) or type(exc).__name__
    # numpy's tofile says "<n> requested and <k> written", without an errno
    no_room = errno.errorcode.get(exc.errno or 0, "") in _NO_ROOM or bool(
        re.fullmatch(r"\d+ requested and \d+ written", reason)
    )
    name = exc.filename
    if name is None and no_room:  # a write() names no file: the one it was writing
        name = _file_being_written(exc, guess=True)
    if name is not None and exc.filename2 is not None:
        name = f"{name} -> {exc.filename2}"
    advice = "; free space there or write elsewhere" if no_room else ""
    if name is None:
        return f"{reason} (writing a file semshift could not name){advice}" if no_room else reason
    return f"cannot write {name}: {reason}{advice}" if no_room else f"{name}: {reason}"


def _native_write_error(exc: BaseException) -> str | None:
    """A write that found no room in a library's native code, as one line naming the file
    (Rust's ``... (os error 28)``, as safetensors raises it; torch's ``PytorchStreamWriter
    failed writing file``), or None for any other error."""
    import errno
    import os
    import re

    text = str(exc)
    code = re.search(r"\(os error (\d+)\)", text)
    if code is not None and errno.errorcode.get(int(code.group(1)), "") in _NO_ROOM:
        reason = os.strerror(int(code.group(1)))
    elif "PytorchStreamWriter failed writing" in text:
        reason = "the write failed (is the disk full?)"
    else:
        return None
    name = _file_being_written(exc, guess=True) or "a file semshift could not name"
    return f"cannot write {name}: {reason}; free space there or write elsewhere"


def _file_being_written(exc: BaseException, *, guess: bool = False) -> str | None:
    """The innermost file open for writing in the traceback's frames (a file object, or a
    writer holding one as ``handle``, as pandas' does); a temporary ``.NAME.tmp...`` that is
    renamed into place when complete is named as ``NAME``.

    With ``guess`` (a write that found no room), a file written by a library's own code (Arrow
    writes Parquet files without a Python file object) is the path the innermost semshift
    function holds as ``tmp``, ``path`` or ``out``."""
    import io
    import os
    import re

    def named(name: str) -> str:
        head, tail = os.path.split(name)
        aside = re.fullmatch(r"\.(.+?)\.tmp(?:-[0-9A-Za-z]+)?", tail)
        return os.path.join(head, aside.group(1)) if aside else name

    def written(obj: object) -> str | None:
        for f in (obj, getattr(obj, "handle", None)):
            if not isinstance(f, io.IOBase):
                continue
            mode, name = getattr(f, "mode", ""), getattr(f, "name", None)
            if isinstance(mode, str) and set(mode) & set("wax+") and isinstance(name, str):
                return name
        return None

    frames = []
    tb = exc.__traceback__
    while tb is not None:
        frames.append(tb.tb_frame)
        tb = tb.tb_next
    for frame in reversed(frames):
        for value in list(frame.f_locals.values()):
            name = written(value)
            if name is not None:
                return named(name)
    for frame in reversed(frames) if guess else ():
        if str(frame.f_globals.get("__name__", "")).startswith("semshift."):
            for key in ("tmp", "path", "out"):
                value = frame.f_locals.get(key)
                if isinstance(value, str | os.PathLike):
                    return named(os.fspath(value))
    return None


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app, turning user errors into one line and exit status 2."""
    command = app.command_for(sys.argv[1:] if argv is None else argv)
    try:
        code = command.main(args=argv, prog_name="semshift", standalone_mode=False)
    except Exit as exc:
        sys.exit(exc.exit_code)
    except Abort:
        print("aborted", file=sys.stderr)
        sys.exit(130)
    except TyperException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # bare group: show its help
            print(exc.format_message())
            sys.exit(0)
        ctx = getattr(exc, "ctx", None)
        hint = f" (see '{ctx.command_path} --help')" if ctx is not None else ""
        print(f"error: {exc.format_message()}{hint}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except SemshiftError as exc:
        print(f"error: {exc}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except OSError as exc:  # unreadable or unwritable user paths, a full disk
        print(f"error: {_os_error(exc)}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # out of memory, or a native library's write that found no room
        from semshift.errors import out_of_memory

        what = out_of_memory(exc)
        if what is not None:  # what was computed before stays written
            what += (
                "; lower it with SEMSHIFT_THREADS=1, SEMSHIFT_BLOCK_ROWS=4096, a smaller "
                "--batch-size or fewer rows"
            )
        else:
            what = _native_write_error(exc)
        if what is None:
            raise
        print(f"error: {what}".replace("\n", " "), file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":  # pragma: no cover
    main()


__all__ = ["COMMAND_GROUPS", "CommandGroup", "app", "main", "register_command_group"]
