"""Shared fixtures: the shipped WordNet (loaded once) and small generated hierarchies."""

from __future__ import annotations

from pathlib import Path

import pytest

from semshift.taxonomy import Taxonomy, wordnet

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="session")
def wn() -> Taxonomy:
    return wordnet()


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
