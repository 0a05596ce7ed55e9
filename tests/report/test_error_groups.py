"""The report's "Errors and N/A" and the command line's warnings: failures grouped by detector
and reason, sets and seeds counted, why they are expected said once."""

from __future__ import annotations

import doctest

import pandas as pd

import semshift.report.errors as errors_module
from semshift.report.errors import group_errors


def _row(protocol, detector, set_name, split, error):
    return {"protocol": protocol, "detector": detector, "set": set_name, "split": split,
            "error": error}  # fmt: skip


def _sanity_rows(detector: str, need: int, what: str) -> list[dict]:
    rows = []
    for seed, n in (("seed0", 46), ("seed1", 45), ("seed2", 47)):
        msg = (f"set 'id_test': fit failed on id_train: {detector}.fit: {n} class(es) have "
               f"fewer than {need} {what}: class id(s) 0, 1, 2, 3 ...; every class in [0, 48) "
               f"needs {need} or more")  # fmt: skip
        rows += [_row("sanity", detector, s, seed, msg) for s in ("easy", "hard", "medium")]
    return rows


def test_the_demo_pattern_folds_into_four_bullets():
    """216 rows of four fit failures repeated per set and seed, their 12 error lines, a left-out
    detector and the N/A verdict rows: four groups."""
    rows = (
        _sanity_rows("cadref", 1, "training samples predicted as them")
        + _sanity_rows("caref", 1, "training samples predicted as them")
        + _sanity_rows("openmax", 2, "correctly classified training samples")
        + [_row("sanity", d, None, None, "n/a: no AUROC without error to judge")
           for d in ("cadref", "caref", "openmax")]
        + [_row("osr", "msp", "easy", None, None)]
    )  # fmt: skip
    lines = [f"seed{k}: detector openmax: fit failed on id_train: openmax.fit: 4{k} class(es) "
             "have fewer than 2 correctly classified training samples: class id(s) 0, 1 ..."
             for k in range(3)]  # fmt: skip
    lines.append("detector mc_dropout left out: model 'g' has no dropout layer")
    groups = group_errors(pd.DataFrame(rows), lines)
    text = [g.line() for g in groups]
    assert len(groups) == 4, text
    first = groups[0]
    assert first.detectors == ["cadref", "caref"] and first.seeds == ["seed0", "seed1", "seed2"]
    assert first.sets == ["easy", "hard", "medium"] and first.count == 18
    assert text[0].startswith(
        "cadref, caref: fit failed on the sanity check's random-init models "
        "(seed0, seed1, seed2; 3 sets each): e.g. 46 class(es) have fewer than 1 training "
        "samples predicted as them: class id(s) ...;"
    )
    assert "Expected: a random-init model predicts few of the classes" in text[0]
    assert groups[1].detectors == ["openmax"] and groups[1].count == 9  # its lines folded
    assert text[2] == "mc_dropout: left out: model 'g' has no dropout layer."
    na = groups[3]
    assert na.kind == "n/a" and na.detectors == ["cadref", "caref", "openmax"]
    assert "None" not in na.line() and na.line().endswith("no AUROC without error to judge.")


def test_a_failure_of_the_run_model_is_not_called_expected():
    rows = [_row("osr", "knn", s, None, "score failed on easy: out of memory: 3 GiB")
            for s in ("easy", "hard")]  # fmt: skip
    (g,) = group_errors(pd.DataFrame(rows), ["detector knn on set easy: out of memory: 3 GiB"])
    assert g.detectors == ["knn"] and g.sets == ["easy", "hard"] and not g.expected
    assert g.line() == "knn: failed in protocol osr (2 sets): out of memory: 3 GiB."


def test_an_unparsed_line_is_its_own_group():
    (g,) = group_errors(pd.DataFrame(columns=["protocol", "error"]), ["protocol zsl: boom"])
    assert g.line() == "run: protocol zsl: boom."


def test_docstring_example():
    result = doctest.testmod(errors_module, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0 and result.failed == 0
