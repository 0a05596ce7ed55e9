"""Options whose values come from a registry list every registered name in ``--help``.

The help strings are written out (importing the training registries at CLI start-up would
import PyTorch, about 3 s, for every ``semshift`` call); this test keeps them equal to the
registries, so a new method without its help entry fails here.
"""

from __future__ import annotations

import re
import subprocess
import sys

import typer

from semshift.cli import app
from semshift.training.methods import list_methods
from semshift.training.zsl.registry import list_zsl_methods


def _help(path: list[str], option: str) -> str:
    cmd = typer.main.get_command(app)
    for name in path:
        cmd = cmd.commands[name]  # type: ignore[attr-defined]
    opt = next(p for p in cmd.params if option in getattr(p, "opts", ()))
    return opt.help or ""


def _names(text: str) -> set[str]:
    return set(re.findall(r"[a-z][a-z0-9_]*", text))


def test_train_method_help_lists_every_training_method():
    text = _help(["train"], "--method").split("(semshift")[0]
    assert set(list_methods()) <= _names(text), (list_methods(), text)
    assert "arpl" in _names(text) and "arpl_cs" in _names(text)


def test_zsl_method_help_lists_every_zero_shot_method():
    text = _help(["zsl", "run"], "--method").split("):", 1)[1]
    assert set(list_zsl_methods()) == _names(text) - {"or"}, text


def test_python_dash_m_semshift_is_the_command():
    out = subprocess.run(
        [sys.executable, "-m", "semshift", "--version"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    from semshift import __version__

    assert __version__ in out.stdout


def test_written_out_choices_equal_their_registries():
    """The names written out in semshift.cli._choices (their registries import pandas or
    PyTorch, too slow for every command's start-up) are the registries' names."""
    from semshift.catalog.benchmarks import list_benchmarks
    from semshift.cli import _choices
    from semshift.features.corruptions import list_corruptions
    from semshift.metrics import list_metrics
    from semshift.protocols import get_protocol, list_protocols
    from semshift.taxonomy.classlists import list_classlists

    on_stores = [n for n in list_protocols() if get_protocol(n).on_stores]
    assert list(_choices.EVALUATE_PROTOCOLS) == on_stores
    assert set(_choices.RANKING_METRICS) == set(list_metrics(inputs=("scores", "is_ood")))
    assert len(_choices.RANKING_METRICS) == len(set(_choices.RANKING_METRICS))
    assert sorted(_choices.TRAINING_METHODS) == list_methods()
    assert list(_choices.ZSL_METHODS) == list_zsl_methods()
    assert list(_choices.BENCHMARKS) == list_benchmarks()
    assert list(_choices.CORRUPTIONS) == list_corruptions()
    assert list(_choices.CLASS_LISTS) == list_classlists()


def test_registry_options_list_their_names_in_help():
    from semshift.catalog.benchmarks import list_benchmarks
    from semshift.detectors import list_detectors
    from semshift.features.corruptions import list_corruptions
    from semshift.metrics import list_metrics
    from semshift.protocols import get_protocol, list_protocols

    every = set(list_detectors())
    ranking = set(list_metrics(inputs=("scores", "is_ood")))
    on_stores = {n for n in list_protocols() if get_protocol(n).on_stores}
    cases = [
        (["evaluate"], "--detector", every),
        (["evaluate"], "--protocol", on_stores),
        (["evaluate"], "--metric", ranking),
        (["evaluate"], "--search-objective", ranking),
        (["benchmark", "run"], "--detector", every),
        (["extract"], "--score", set(list_detectors(level="model"))),
        (["extract"], "--corruption", set(list_corruptions())),
    ]
    for path, option, names in cases:
        assert names <= _names(_help(path, option)), (path, option)
    cmd = typer.main.get_command(app)
    run = cmd.commands["benchmark"].commands["run"]  # type: ignore[attr-defined]
    arg = next(p for p in run.params if p.name == "name")
    assert set(list_benchmarks()) <= set(re.findall(r"[a-z0-9-]+", arg.help))
