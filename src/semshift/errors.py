"""Exception types shared by every layer.

Every error a user can cause derives from :class:`SemshiftError` (a ``ValueError``), so the CLI can
print its one-line message and exit with status 2 instead of showing a traceback.
"""

from __future__ import annotations

from collections.abc import Iterable

__all__ = [
    "DuplicateNameError",
    "InputError",
    "NotFittedError",
    "ParamError",
    "ResourceError",
    "SemshiftError",
    "TaxonomyFormatError",
    "UnknownNameError",
    "did_you_mean",
    "out_of_memory",
]


class SemshiftError(ValueError):
    """Base class for user-facing errors: the message says what was wrong and where."""


class InputError(SemshiftError):
    """An argument, array or file does not meet the documented requirements."""


class UnknownNameError(SemshiftError, KeyError):
    """A name (wnid, class, registry entry) that does not exist; the message lists close matches."""

    def __str__(self) -> str:  # KeyError would otherwise repr() the message
        return str(self.args[0]) if self.args else ""


class DuplicateNameError(InputError):
    """A registry (detectors, models, benchmarks, ...) already holds an entry of this name."""


class ParamError(InputError):
    """A parameter value a declared constraint rejects; ``key`` names the parameter.

    Raised in a params model's validators to name the offending key of a cross-field check
    (the split builders report it as ``{where}.params.{key}: {message}``).
    """

    def __init__(self, key: str, message: str) -> None:
        super().__init__(message)
        self.key = key


class TaxonomyFormatError(SemshiftError):
    """A custom hierarchy file is malformed (cycle, missing parent, duplicate id, bad line)."""


class NotFittedError(SemshiftError, AttributeError):
    """A fitted estimator (detector) was used before ``fit`` was called."""


class ResourceError(SemshiftError):
    """The machine ran out of memory or threads: the message says what needed how much and
    which option lowers it (exit 2 from the CLI, like a user mistake: the user can act on it)."""


def close_matches(
    name: object, known: Iterable[str], *, n: int = 3, cutoff: float = 0.6
) -> list[str]:
    """The ``n`` names of ``known`` closest to ``name`` (best first): the one fuzzy match.

    Every "did you mean" in semshift goes through here (or through :func:`did_you_mean` and
    :func:`unknown_name`, which call it), so hints agree everywhere.

    >>> close_matches("logit", ["logits", "features", "labels"])
    ['logits']
    """
    import difflib

    return difflib.get_close_matches(str(name), list(known), n=n, cutoff=cutoff)


def did_you_mean(name: str, known: Iterable[str], n: int = 1) -> str:
    """`` (did you mean 'x'?)`` for the closest of ``known`` to ``name``, or ``""``.

    >>> did_you_mean("sbb", ["ssb", "zsl"]), did_you_mean("xyz", ["ssb"])
    (" (did you mean 'ssb'?)", '')
    """
    close = close_matches(name, known, n=n)
    return f" (did you mean {', '.join(map(repr, close))}?)" if close else ""


def unknown_name(what: str, name: object, known: Iterable[str], *, n: int = 3) -> UnknownNameError:
    """The error for a name no registry entry has: close matches first, then every known name.

    >>> str(unknown_name("benchmark", "ssb-cb", ["ssb-cub", "ssb-scars"]))
    "unknown benchmark 'ssb-cb'. Did you mean 'ssb-cub', 'ssb-scars'? Known: ssb-cub, ssb-scars"
    """
    names = sorted(known)
    close = close_matches(name, names, n=n)
    hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
    return UnknownNameError(f"unknown {what} {name!r}.{hint} Known: {', '.join(names)}")


def _size(n_bytes: float) -> str:
    """``822083584`` -> ``'784 MiB'`` (binary units, three significant figures)."""
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n_bytes < 1024 or unit == "PiB":
            return f"{n_bytes:.3g} {unit}" if unit != "bytes" else f"{int(n_bytes)} bytes"
        n_bytes /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


def _limits() -> str:
    """`` under an address-space limit of 2 GiB (ulimit -v)`` where the process has one."""
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
        return ""
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return ""
    return f" under an address-space limit of {_size(soft)} (ulimit -v)"


def _thread_stack() -> str:
    """`` (each thread reserves 8 MiB of stack)`` when the stack size is known."""
    import threading

    size = threading.stack_size()
    if not size:
        try:
            import resource

            soft, _ = resource.getrlimit(resource.RLIMIT_STACK)
            size = 0 if soft == resource.RLIM_INFINITY else int(soft)
        except (ImportError, OSError, ValueError):  # pragma: no cover - not POSIX
            size = 0
    return f" (each thread reserves {_size(size)} of stack)" if size > 0 else ""


def out_of_memory(err: BaseException) -> str | None:
    """What an out-of-memory failure needed, as one line; ``None`` when ``err`` is not one.

    Recognised: :class:`MemoryError` (NumPy's ``Unable to allocate 390. MiB for an array
    with shape ...``, or bare), torch's CPU allocator (``RuntimeError: ... DefaultCPUAllocator:
    can't allocate memory: you tried to allocate 822083584 bytes``), ``torch.OutOfMemoryError``
    (``CUDA out of memory. Tried to allocate 20.00 MiB ...``) and a thread the system refused
    (``RuntimeError: can't start new thread``, what a process under an address-space limit
    gets when a thread's stack does not fit). The line says what was being allocated and how
    much, and the process's address-space limit when it has one; the caller adds what to lower.

    >>> out_of_memory(RuntimeError("[enforce fail at alloc_cpu.cpp:117] data. "
    ...     "DefaultCPUAllocator: can't allocate memory: you tried to allocate 822083584 bytes. "
    ...     "Error code 12 (Cannot allocate memory)")).split(" under ")[0]
    'out of memory: an allocation of 784 MiB failed (torch CPU allocator)'
    >>> out_of_memory(ValueError("can't allocate memory")) is None
    True
    """
    import re

    lines = str(err).strip().splitlines()
    msg = lines[0].strip() if lines else ""
    if isinstance(err, MemoryError):
        what = msg or "an allocation failed"
        return f"out of memory: {what}{_limits()}"
    if not isinstance(err, RuntimeError):
        return None
    text = " ".join(line.strip() for line in lines)
    if "can't start new thread" in text:
        return f"out of memory: the system refused a new thread{_thread_stack()}{_limits()}"
    if "DefaultCPUAllocator" in text and ("allocate memory" in text or "enough memory" in text):
        n = re.search(r"tried to allocate (\d+) bytes", text)
        size = f"an allocation of {_size(int(n.group(1)))}" if n else "an allocation"
        return f"out of memory: {size} failed (torch CPU allocator){_limits()}"
    if type(err).__name__ == "OutOfMemoryError" or "out of memory" in text.lower():
        n = re.search(r"[Tt]ried to allocate ([\d.]+ ?[KMGT]i?B)", text)
        size = f"an allocation of {n.group(1)}" if n else "an allocation"
        device = "GPU" if "CUDA" in text or "GPU" in text else "device"
        return f"out of memory: {size} failed on the {device}{_limits()}"
    return None
