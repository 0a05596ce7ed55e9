"""semshift.protocols: the evaluation protocols of the seed papers over scored sets.

Each protocol function takes :class:`ScoredSet` objects (labels, predictions and per-detector
normality scores) and returns the tidy results table (:data:`RESULT_COLUMNS`). Where things
live: ``sets`` (ScoredSet, Bootstrap), ``tidy`` (the table), ``osr``, ``newclass``
(new-class vs failure detection and the AUROC decomposition), ``graded`` (IS-OOD grid),
``sanity`` (random-model check), ``generalisation`` (SOOD), ``gzsl``, ``operating``
(the rejection rule at a target ID recall). Each registers itself
with its config model, the result rows it writes and its report sections
(:class:`ReportSection`) in ``registry`` (:data:`PROTOCOLS`, :func:`list_protocols`,
:func:`get_protocol`), which is how a run configuration and the report reach it; the runner
behind ``semshift run`` is :mod:`semshift.run`.
Protocols are pure functions of scored sets: this package reads no files but those a protocol's
config names (the GZSL predictions CSV) and imports nothing from ``report`` or ``run``.
"""

from semshift.protocols.generalisation import generalisation
from semshift.protocols.graded import graded, level_order
from semshift.protocols.gzsl import gzsl, zsl_results
from semshift.protocols.newclass import newclass_failure
from semshift.protocols.operating import operating_point
from semshift.protocols.osr import osr
from semshift.protocols.registry import (
    PROTOCOLS,
    ProtocolConfig,
    ProtocolInputs,
    ProtocolSpec,
    ReportSection,
    get_protocol,
    list_protocols,
    register_protocol,
)
from semshift.protocols.sanity import sanity
from semshift.protocols.sets import DEFAULT_BOOTSTRAP, Bootstrap, ScoredSet
from semshift.protocols.tidy import RESULT_COLUMNS, error_row, results_frame

__all__ = [
    "DEFAULT_BOOTSTRAP",
    "PROTOCOLS",
    "RESULT_COLUMNS",
    "Bootstrap",
    "ProtocolConfig",
    "ProtocolInputs",
    "ProtocolSpec",
    "ReportSection",
    "ScoredSet",
    "error_row",
    "generalisation",
    "get_protocol",
    "graded",
    "gzsl",
    "level_order",
    "list_protocols",
    "newclass_failure",
    "operating_point",
    "osr",
    "register_protocol",
    "results_frame",
    "sanity",
    "zsl_results",
]
