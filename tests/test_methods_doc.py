"""docs/methods.md is the method reference the code cites: every citation resolves, every
registered detector and metric has a section, and no file cites the internal brief instead."""

from __future__ import annotations

import importlib
import itertools
import re
from pathlib import Path

import pytest

from semshift import detectors, metrics

ROOT = Path(__file__).resolve().parents[1]
METHODS = ROOT / "docs" / "methods.md"

#: Names that share one section with the family's first anchor (each still has its own anchor).
FAMILIES = {
    "ash": ("ash_b", "ash_p", "ash_s"),
    "fpr95": ("fpr95_ood_recall",),
    "aupr": ("aupr_in", "aupr_out", "aupr_in_trapezoid", "aupr_out_trapezoid"),
    "oscr": ("oscr_arpl",),
}
#: The model-level detectors, documented whether or not this checkout registers them.
MODEL_LEVEL = ("odin", "rankfeat")
#: Section of each registered split builder and run-config protocol (names that are also
#: metric or detector names would be ambiguous as anchors, so these sections are named apart).
BUILDER_SECTIONS = {
    "ssb": "ssb-splits",
    "cleaning": "imagenet-ood-cleaning",
    "superclass": "sood-superclasses",
    "graded": "is-ood-graded-shift",
    "zsl": "zero-shot-splits",
    "sample": "random-class-samples",
}
PROTOCOL_SECTIONS = {
    "osr": "osr-protocol",
    "newclass_failure": "new-class-and-failure-detection",
    "graded": "graded-grid",
    "sanity": "sanity-check",
    "operating_point": "operating-point",
    "generalisation": "generalisation",
    "gzsl": "gzsl",
    "zsl": "zero-shot-methods",
    "distance_regression": "distance-regression",
}

_ANCHOR = re.compile(r'<a\s+(?:id|name)="([^"]+)"\s*>\s*</a>')
_CITATION = re.compile(r"docs/methods\.md#([A-Za-z0-9_\-]+)")
_LOCAL_LINK = re.compile(r"\]\(#([A-Za-z0-9_\-]+)\)")
_BRIEF = re.compile(r"\bREFERENCE\b")
_SKIP_DIRS = {"__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache"}


def _text_files(top: Path) -> list[Path]:
    """Text files under ``top`` (binary files and build artefacts such as *.egg-info skipped)."""
    out = []
    for path in sorted(top.rglob("*")):
        rel = path.relative_to(top).parts
        if not path.is_file() or any(p in _SKIP_DIRS or p.endswith(".egg-info") for p in rel):
            continue
        data = path.read_bytes()
        if b"\0" in data:
            continue
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        out.append(path)
    return out


def _sections() -> tuple[dict[str, int], list[str]]:
    """Anchor -> section number, and each section's text (from its anchors to the next ones).

    A section starts at a run of anchor lines directly followed by a heading.
    """
    lines = METHODS.read_text(encoding="utf-8").splitlines()
    where: dict[str, int] = {}
    starts: list[int] = []
    i = 0
    while i < len(lines):
        names = _ANCHOR.findall(lines[i])
        if not names or _ANCHOR.sub("", lines[i]).strip():
            i += 1
            continue
        j, block = i, []
        while j < len(lines) and _ANCHOR.fullmatch(lines[j].strip() or "-"):
            block += _ANCHOR.findall(lines[j])
            j += 1
        assert j < len(lines) and lines[j].startswith("#"), (
            f"docs/methods.md line {i + 1}: anchor(s) {block} must sit directly above a heading"
        )
        for name in block:
            assert name not in where, f"docs/methods.md: anchor {name!r} is defined twice"
            where[name] = len(starts)
        starts.append(i)
        i = j + 1
    bounds = [*starts, len(lines)]
    texts = ["\n".join(lines[a:b]) for a, b in itertools.pairwise(bounds)]
    return where, texts


def test_no_file_cites_the_internal_brief():
    files = [*_text_files(ROOT / "src"), ROOT / "README.md"]
    hits = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()}"
        for p in files
        for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
        if _BRIEF.search(line)
    ]
    assert not hits, "cite docs/methods.md#<section> instead of REFERENCE:\n" + "\n".join(hits)


def test_every_cited_anchor_exists():
    anchors, _ = _sections()
    files = [*_text_files(ROOT / "src"), ROOT / "README.md", *_text_files(ROOT / "docs")]
    cited: dict[str, list[str]] = {}
    for p in files:
        text = p.read_text(encoding="utf-8")
        found = _CITATION.findall(text)
        if p == METHODS:
            found += _LOCAL_LINK.findall(text)
        for a in found:
            cited.setdefault(a, []).append(str(p.relative_to(ROOT)))
    assert {"knn", "ssb-splits", "detectors"} <= set(cited)  # the scan does find citations
    missing = {a: sorted(set(ps)) for a, ps in cited.items() if a not in anchors}
    assert not missing, f"cited anchors missing from docs/methods.md (<a id>): {missing}"


def _registered() -> list[str]:
    return sorted({*detectors.list_detectors(), *MODEL_LEVEL, *metrics.list_metrics()})


@pytest.mark.parametrize("name", _registered())
def test_every_registered_name_has_a_section(name):
    anchors, _ = _sections()
    assert name in anchors, f"docs/methods.md has no section (<a id={name!r}>) for {name!r}"


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_a_family_shares_one_section(family):
    anchors, _ = _sections()
    for member in FAMILIES[family]:
        assert anchors[member] == anchors[family], f"{member!r} is not in the {family!r} section"


def _literal(value: object) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


@pytest.mark.parametrize("name", detectors.list_detectors())
def test_detector_section_gives_the_signature_defaults(name):
    anchors, texts = _sections()
    section = texts[anchors[name]]
    params = detectors.get(name).get_params()
    missing = [
        f"{k}={_literal(v)}" for k, v in params.items() if f"`{k}={_literal(v)}`" not in section
    ]
    assert not missing, f"docs/methods.md#{name} does not state the defaults {missing}"


def test_fpr_section_states_the_registry_bindings():
    anchors, texts = _sections()
    fpr = texts[anchors["fpr95"]]
    for name in ("fpr95", "fpr95_ood_recall"):
        spec = metrics.get_metric(name)
        assert f"tpr={spec.kwargs['tpr']}" in fpr.replace("`", "")
        assert f"`{name}`" in fpr and f'"{spec.kwargs["convention"]}"' in fpr


@pytest.mark.parametrize(
    ("module", "lister", "sections", "kind"),
    [
        ("semshift.splits.registry", "list_builders", BUILDER_SECTIONS, "Split builder"),
        ("semshift.protocols.registry", "list_protocols", PROTOCOL_SECTIONS, "Run-config protocol"),
    ],
)
def test_every_builder_and_protocol_has_a_section(module, lister, sections, kind):
    names = getattr(importlib.import_module(module), lister)()
    assert names, f"{module}.{lister}() is empty"
    anchors, texts = _sections()
    for name in names:
        assert name in sections, f"{name!r} has no section mapped in tests/test_methods_doc.py"
        assert sections[name] in anchors, f"docs/methods.md lacks the section {sections[name]!r}"
        # the section names the registered name, so a reader can go from the doc to the config
        assert f"{kind} `{name}`" in texts[anchors[sections[name]]]
