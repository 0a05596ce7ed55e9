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
