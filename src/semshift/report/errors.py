"""The errors a run went on after, and its N/A rows, grouped by detector and reason.

A run with 40 detectors, many sets and the sanity check's random models repeats one failure
for every set and seed (a class-conditional detector that cannot be fitted on a random model
fails on all 18 sets of each of 3 seeds). :func:`group_errors` folds the failed result rows and
the run's error lines into one :class:`ErrorGroup` per (context, reason), naming the
detectors, counting the sets and seeds, keeping one verbatim example, and saying why a group is
expected where it is. The report's "Errors and N/A" section and the command line's closing
warnings both print these groups.

>>> import pandas as pd
>>> rows = pd.DataFrame({
...     "protocol": ["sanity"] * 4, "detector": ["she", "she", "openmax", "openmax"],
...     "set": ["easy", "hard"] * 2, "split": ["seed0"] * 4,
...     "error": ["set 'id_test': fit failed on id_train: she.fit: 40 class(es) have fewer "
...               "than 1 correctly classified training samples"] * 2
...              + ["set 'id_test': fit failed on id_train: openmax.fit: 41 class(es) have "
...                 "fewer than 1 correctly classified training samples"] * 2})
>>> [g.line() for g in group_errors(rows, [])]  # doctest: +NORMALIZE_WHITESPACE
["openmax, she: fit failed on the sanity check's random-init models (seed0; 2 sets each):
  e.g. 40 class(es) have fewer than 1 correctly classified training samples. Expected: a
  random-init model predicts few of the classes, too few for a detector that fits per-class
  statistics."]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pandas as pd

from semshift.report.tables import is_na_note

__all__ = ["ErrorGroup", "group_errors", "summary_lines"]

#: a random-init model of the sanity check, as the error lines and the result rows name it
_SEED = re.compile(r"^seed\d+$")
_LINE = re.compile(r"^(?:(?P<tag>seed\d+): )?detector (?P<det>\S+)(?: on set (?P<set>\S+))?"
                   r"(?P<left> left out)?: (?P<msg>.*)$")  # fmt: skip
_CLASS_LIST = re.compile(r"class id\(s\) [^;]*?(?:\.\.\.|(?=;)|$)")
_PER_CLASS = re.compile(r"class\(es\) have fewer than \d+ .*training samples")


@dataclass
class ErrorGroup:
    """Failures (or N/A rows) that share a context and a reason.

    Attributes
    ----------
    kind : ``"failure"`` or ``"n/a"``
    context : str
        Where they happened: ``"fit failed on the sanity check's random-init models"``,
        ``"left out"``, ``"protocol sanity"`` ...
    reason : str
        The first example's message, without its set and detector prefixes and with long class
        lists cut.
    detectors : list of str
        Sorted; empty when no detector is involved.
    sets, seeds, protocols : list of str
        The sets, the sanity check's random-model seeds and the protocols the group covers.
    count : int
        Result rows and error lines folded into the group.
    expected : str
        Why this is expected here (empty when it is not).
    """

    kind: Literal["failure", "n/a"]
    context: str
    reason: str
    detectors: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    seeds: list[str] = field(default_factory=list)
    protocols: list[str] = field(default_factory=list)
    count: int = 0
    expected: str = ""
    #: the folded messages differ (in their numbers): the reason is an example
    varies: bool = False

    def line(self) -> str:
        """One line: detectors, context (seeds, set count), reason, why expected."""
        where = []
        if self.seeds:
            where.append(", ".join(self.seeds) if len(self.seeds) <= 3
                         else f"{len(self.seeds)} seeds")  # fmt: skip
        if self.sets:
            each = " each" if len(self.detectors) > 1 else ""
            where.append(f"{len(self.sets)} set{'s' if len(self.sets) > 1 else ''}{each}")
        head = f"{', '.join(self.detectors)}: " if self.detectors else ""
        ctx = self.context
        if self.protocols:
            s = "s" if len(self.protocols) > 1 else ""
            ctx += f" in protocol{s} {', '.join(self.protocols)}"
        ctx = f"{ctx} ({'; '.join(where)})" if where else ctx
        reason = ("e.g. " if self.varies else "") + self.reason.rstrip(".")
        tail = f" Expected: {self.expected}" if self.expected else ""
        ctx = ctx.lstrip()
        return f"{head}{ctx}: {reason}.{tail}" if ctx else f"{head}{reason}.{tail}"


def _clean(message: str, detector: str | None) -> str:
    """The reason of an error message: no ``set '...':`` / ``fit failed on ...:`` / own-name
    prefixes, long class-id lists cut."""
    msg = re.sub(r"^set '[^']*': ", "", message.strip())
    msg = re.sub(r"^(fit|score) failed on [^:]+: ", "", msg)
    exc = re.match(r"^(\w+(?:Error|Exception)): ", msg)  # the one-line form names the type
    msg = msg[exc.end() :] if exc else msg
    if detector:
        msg = re.sub(rf"^{re.escape(detector)}(\.\w+)?: ", "", msg)
    if exc and exc.group(1) not in ("InputError", "ValueError"):
        msg = f"{exc.group(1)}: {msg}"
    return _CLASS_LIST.sub("class id(s) ...", msg)


def _key(reason: str) -> str:
    return re.sub(r"\d+", "#", reason)


def _expected(sanity: bool, reason: str) -> str:
    if sanity and _PER_CLASS.search(reason):
        return ("a random-init model predicts few of the classes, too few for a detector that "
                "fits per-class statistics.")  # fmt: skip
    if sanity:
        return "the sanity check's random-init models are not trained classifiers."
    return ""


def group_errors(results: pd.DataFrame, lines: Iterable[str] = ()) -> list[ErrorGroup]:
    """Group a run's failed result rows, its N/A rows and its error lines.

    Parameters
    ----------
    results : DataFrame
        The tidy results (``protocol``, ``detector``, ``set``, ``split``, ``error``).
    lines : iterable of str
        The run's error lines (``results.json``'s ``errors``: ``"detector knn: fit failed on
        id_train: ..."``, ``"seed0: detector she: ..."``, ``"detector X left out: ..."``).

    Returns
    -------
    list of ErrorGroup
        Failures first (in first-seen order), then the N/A groups.
    """
    groups: dict[tuple[str, str, str], ErrorGroup] = {}

    def add(
        kind: Literal["failure", "n/a"],
        context: str,
        detector: str | None,
        reason: str,
        set_name: str | None,
        seed: str | None,
        expected: str,
        protocol: str | None = None,
    ) -> None:
        key = (kind, context, _key(reason))
        g = groups.get(key)
        if g is None:
            g = groups[key] = ErrorGroup(kind, context, reason, expected=expected)
        elif reason != g.reason:
            g.varies = True
        if detector and detector not in g.detectors:
            g.detectors.append(detector)
        if set_name and set_name not in g.sets:
            g.sets.append(set_name)
        if seed and seed not in g.seeds:
            g.seeds.append(seed)
        if protocol and protocol not in g.protocols:
            g.protocols.append(protocol)
        g.count += 1

    covered: set[tuple[str | None, str | None, str]] = set()  # (detector, seed, phase) in rows
    cols = ["protocol", "detector", "set", "split", "error"]
    bad = results.loc[results["error"].notna(), [c for c in cols if c in results.columns]]
    for r in bad.to_dict("records"):
        error, det = str(r["error"]), _text(r.get("detector"))
        protocol = _text(r.get("protocol")) or "run"
        split = _text(r.get("split"))
        if is_na_note(error):
            reason = error.split(":", 1)[1].strip() if ":" in error else error
            add("n/a", "", det, reason, _text(r.get("set")), None, "", protocol)
            continue
        sanity = protocol == "sanity" and split is not None and bool(_SEED.match(split))
        phase = "fit failed" if "fit failed" in error else "failed"
        context = f"{phase} on the sanity check's random-init models" if sanity else phase
        reason = _clean(error, det)
        add("failure", context, det, reason, _text(r.get("set")), split if sanity else None,
            _expected(sanity, reason), None if sanity else protocol)  # fmt: skip
        covered.add((det, split if sanity else None, phase))
    for raw in lines:
        m = _LINE.match(str(raw))
        if m is None:
            add("failure", "run", None, str(raw), None, None, "")
            continue
        det, tag = m.group("det"), m.group("tag")
        if m.group("left"):
            add("failure", "left out", det, m.group("msg"), None, None, "")
            continue
        sanity = tag is not None
        reason = _clean(m.group("msg"), det)
        phase = "fit failed" if "fit failed" in m.group("msg") else "failed"
        # the failure the result rows of this detector (and random model) already hold
        if (det, tag, phase) in covered:
            continue
        context = (f"{phase} on the sanity check's random-init models" if sanity
                   else f"{phase} on the run's model")  # fmt: skip
        add("failure", context, det, reason, m.group("set"), tag, _expected(sanity, reason))
    out = list(groups.values())
    for g in out:
        g.detectors.sort()
        g.sets.sort()
        g.seeds.sort(key=lambda s: (len(s), s))
    # one reason for several detectors: merge groups that differ only by detector
    merged: dict[tuple[str, str, str, tuple[str, ...], tuple[str, ...]], ErrorGroup] = {}
    for g in out:
        k = (g.kind, g.context, _key(g.reason), tuple(g.sets), tuple(g.seeds))
        if k in merged:
            m0 = merged[k]
            m0.detectors = sorted({*m0.detectors, *g.detectors})
            m0.count += g.count
            m0.varies = m0.varies or g.varies or m0.reason != g.reason
        else:
            merged[k] = g
    final = list(merged.values())
    return [g for g in final if g.kind == "failure"] + [g for g in final if g.kind == "n/a"]


def _text(value: Any) -> str | None:
    if value is None or (isinstance(value, float) and value != value):
        return None
    return str(value)


def summary_lines(groups: Sequence[ErrorGroup]) -> list[str]:
    """The groups as lines for a terminal: failures, then one line per N/A group."""
    return [g.line() if g.kind == "failure" else f"n/a: {g.line()}" for g in groups]
