"""Bad input: clear ValueErrors (InputError) naming what and where; nothing is dropped."""

from __future__ import annotations

import numpy as np
import pytest

from semshift.errors import InputError
from semshift.metrics import (
    aupr_in,
    auroc,
    detection_error,
    fpr_at_tpr,
    ranking_metrics,
)

FUNCS = [auroc, aupr_in, detection_error, fpr_at_tpr]


@pytest.mark.parametrize("f", FUNCS)
def test_nan_and_inf_report_count_and_first_index(f):
    s = np.array([0.1, 0.2, np.nan, 0.4, np.inf, -np.inf])
    y = np.array([False, True, False, True, False, True])
    msg = r"3 non-finite value\(s\) \(1 NaN, 2 inf\); first at index 2"
    with pytest.raises(ValueError, match=msg):
        f(s, y)


@pytest.mark.parametrize("f", FUNCS)
def test_shape_class_and_type_errors(f):
    s = np.array([0.1, 0.2, 0.3])
    with pytest.raises(InputError, match="scores is empty"):
        f([], [])
    with pytest.raises(InputError, match="scores have 3 elements but is_ood has 2"):
        f(s, np.array([True, False]))
    with pytest.raises(InputError, match="needs both ID and OOD samples, got 3 ID and 0 OOD"):
        f(s, np.zeros(3, bool))
    with pytest.raises(InputError, match="got 0 ID and 3 OOD"):
        f(s, np.ones(3, bool))
    with pytest.raises(InputError, match="is_ood must be a boolean array, got dtype int64"):
        f(s, np.array([0, 1, 1]))
    with pytest.raises(InputError, match=r"scores must be 1-D .* shape \(3, 1\)"):
        f(s[:, None], np.array([False, True, True]))
    with pytest.raises(InputError, match="real numeric array, got dtype bool"):
        f(np.array([True, False]), np.array([False, True]))
    with pytest.raises(InputError, match="real numeric array, got dtype <U1"):
        f(np.array(["a", "b"]), np.array([False, True]))


def test_parameter_errors():
    s = np.array([0.1, 0.2, 0.3])
    y = np.array([False, True, True])
    with pytest.raises(InputError, match="convention must be one of"):
        fpr_at_tpr(s, y, convention="openood")
    with pytest.raises(InputError, match=r"tpr must be a number in \(0, 1\]"):
        fpr_at_tpr(s, y, tpr=95)
    with pytest.raises(InputError, match=r"tpr must be a number in \(0, 1\]"):
        fpr_at_tpr(s, y, tpr=0.0)
    with pytest.raises(InputError, match="method must be one of"):
        aupr_in(s, y, method="interp")
    with pytest.raises(InputError, match="method must be one of"):
        ranking_metrics(s, y, aupr_method="x")


def test_errors_are_value_errors_and_nothing_is_dropped():
    assert issubclass(InputError, ValueError)
    # a large array with one NaN at the end still raises (no silent dropping)
    s = np.zeros(100_001)
    s[-1] = np.nan
    y = np.arange(s.size) % 2 == 0
    with pytest.raises(ValueError, match="first at index 100000"):
        auroc(s, y)
    # overflow in the fast finiteness check does not give a false alarm
    big = np.array([1e308, 1e308, -1e308, 5e307])
    assert auroc(big, np.array([False, False, True, True])) == 1.0
