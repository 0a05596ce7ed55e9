"""Shared fixtures: the shipped WordNet (loaded once), small generated hierarchies and the
``semshift`` command run in this process."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from semshift.taxonomy import Taxonomy, wordnet

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def wn() -> Taxonomy:
    return wordnet()


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def semshift(capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """``semshift ARGS`` in this process (the entry point the console script calls)."""
    from semshift.cli import main

    def call(*args: str) -> CliResult:
        with pytest.raises(SystemExit) as info:
            main(list(args))
        out = capsys.readouterr()
        return CliResult(int(info.value.code or 0), out.out, out.err)

    return call


@pytest.fixture
def aircraft_csv(tmp_path: Path) -> Path:
    """A small FGVC-Aircraft-like hierarchy: manufacturer / family / variant."""
    rows = [
        "id,parent,name",
        "boeing,,Boeing",
        "airbus,,Airbus",
        "cessna,,Cessna",
        "b737,boeing,Boeing 737",
        "b747,boeing,Boeing 747",
        "a320fam,airbus,A320 family",
        "a330fam,airbus,A330 family",
        "c172fam,cessna,Cessna 172",
        "737-300,b737,737-300",
        "737-400,b737,737-400",
        "737-500,b737,737-500",
        "747-100,b747,747-100",
        "747-400,b747,747-400",
        "a319,a320fam,A319",
        "a320,a320fam,A320",
        "a330-200,a330fam,A330-200",
        "a330-300,a330fam,A330-300",
        "c172,c172fam,Cessna 172",
        "c172r,c172fam,Cessna 172R",
    ]
    path = tmp_path / "aircraft.csv"
    path.write_text("\n".join(rows) + "\n")
    return path
