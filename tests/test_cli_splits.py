"""The split-builder commands (``semshift splits ssb`` ...) and their builders' params models
declare the same parameters with the same defaults: the command's defaults are written out (the
builder registry imports pandas, too slow for every command's start-up), and this test fails
when a command and its model drift apart. Every split-builder command validates its options
through the model (``ssb``, ``cleaning``, ``superclass``, ``graded``; ``zsl`` for its fractions
and class options).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import typer

from semshift.cli import app
from semshift.cli.splits import BUILDER_OPTIONS, builder_params
from semshift.errors import InputError
from semshift.splits.registry import get_builder, list_builders

#: per builder: options of the command that are not parameters (what it writes, the taxonomy,
#: shorthands), and parameters the command does not take (run configs only)
COMMAND_ONLY = {
    "ssb": {"out", "taxonomy", "winter21"},
    "cleaning": {"out", "taxonomy", "no_exclude", "all_candidates"},
    "zsl": {"out", "taxonomy"},
    "superclass": {
        "out",
        "taxonomy",
        "images",
        "score_model",
        "score_weights",
        "score_random_init",
        "max_per_class",
    },
    "graded": {"out"},
    "sample": {"out", "taxonomy"},
}
MODEL_ONLY = {
    "ssb": {"gap_bins"},
    "cleaning": {"sisters_only"},  # --all-candidates is sisters_only: false
    "zsl": set(),
    "superclass": {"nodes", "allow_empty"},
    "graded": {"sem_distances", "cov_distances"},
    "sample": set(),
}
#: defaults that differ on purpose: None on the command means the model's default (said in the
#: option's help) or, for a seed, the run's seed (0)
DEPARTURES = {
    ("cleaning", "exclude_subtrees"),  # None: organism.n.01, unless --no-exclude
    ("zsl", "seed"),  # the command's 0 is a run's default seed
    # None: the model's default (said in the help), and only with --scores
    ("superclass", "score_over"),
    ("superclass", "iqr_factor"),
    ("superclass", "easy"),
    ("superclass", "iid"),
    ("graded", "levels"),  # None: 8, and policy 'fixed' takes its levels from the edges
    # the command computes the distances from features: required there, where a config may
    # give sem_distances and cov_distances instead
    ("graded", "id_features"),
    ("graded", "test_features"),
    ("graded", "laid"),
    ("sample", "sizes"),  # the command's "1000,10000" text is the model's (1000, 10000)
    ("sample", "pool"),  # None on both; the command resolves imagenet21k-p under WordNet
}


def _command(name: str) -> Any:
    group = typer.main.get_command(app).commands["splits"]  # type: ignore[attr-defined]
    return group.commands[name]


def _field(builder: str, option_name: str) -> str:
    renamed = {v.replace("-", "_"): k for k, v in BUILDER_OPTIONS.get(builder, {}).items()}
    return renamed.get(option_name, option_name)


@pytest.mark.parametrize("builder", list_builders())
def test_split_commands_and_params_models_agree(builder):
    fields = get_builder(builder).params.model_fields
    cmd = _command(builder)
    options = {_field(builder, p.name): p for p in cmd.params}
    assert set(options) - set(fields) == COMMAND_ONLY[builder], "options without a parameter"
    assert set(fields) - set(options) == MODEL_ONLY[builder], "parameters without an option"
    for key in set(options) & set(fields):
        if (builder, key) in DEPARTURES:
            continue
        default = fields[key].default
        option = options[key]
        if option.required:
            assert fields[key].is_required(), (builder, key)
            continue
        assert option.default == default, (builder, key, option.default, default)


def test_ssb_options_are_checked_by_the_params_model():
    p = builder_params("ssb", {"known": "imagenet1k", "measure": "lch", "bin_size": 50})
    assert (p.measure, p.bin_size, p.preset) == ("lch", 50, "ssb")
    cases = [
        ({"measure": "cosine"}, "--measure: should be"),
        ({"graph": "tree"}, "--graph: should be"),
        ({"preset": "foo"}, "--preset: unknown preset 'foo'"),
        ({"quantiles": [0.7, 0.3]}, "--quantiles: expected two increasing fractions"),
        ({"quantiles": [0.3, 0.7], "bin_size": 5}, "--quantiles: give bin_size or quantiles"),
        ({"measure": "gap", "bin_size": 5}, "--bin-size: does not apply to measure 'gap'"),
    ]
    for values, message in cases:
        with pytest.raises(InputError) as err:
            builder_params("ssb", values)
        assert str(err.value).startswith(message), (values, str(err.value))


def test_ssb_command_refuses_a_bad_measure_in_one_line(tmp_path):
    from semshift.cli import main

    with pytest.raises(SystemExit) as end:
        main(["splits", "ssb", "--out", str(tmp_path / "o"), "--measure", "cosine"])
    assert end.value.code == 2


def test_ssb_choices_in_help_are_the_models():
    """The values of ssb's choice options, written out in their help, are the model's."""
    from typing import get_args

    from semshift.splits.ssb import PRESETS

    fields = get_builder("ssb").params.model_fields
    params = {p.name: p for p in _command("ssb").params}

    def literal(annotation: Any) -> set[str]:
        out: set[str] = set()
        for arg in get_args(annotation) or (annotation,):
            out |= {a for a in get_args(arg) if isinstance(a, str)}
        return out

    def words(text: str) -> set[str]:
        return set(re.findall(r"[a-z][a-z0-9_-]*", text))

    for key in ("graph", "measure", "aggregation", "easy_first"):
        names = literal(fields[key].annotation)
        assert names and names <= words(params[key].help), key
    assert set(PRESETS) <= words(params["preset"].help)


def test_cleaning_options_are_checked_by_the_params_model():
    p = builder_params("cleaning", {"id_classes": "imagenet1k", "sisters_only": False})
    assert p.exclude_subtrees == ("organism.n.01",) and p.sisters_only is False
    p = builder_params("cleaning", {"exclude_subtrees": []})
    assert p.exclude_subtrees == ()
    with pytest.raises(InputError, match=r"^--id: "):
        builder_params("cleaning", {"id_classes": ""})


def test_zsl_options_are_checked_by_the_params_model():
    p = builder_params("zsl", {"classes": "c.txt", "images": "i.txt", "val_fraction": 0.3})
    assert (p.unseen_fraction, p.val_fraction) == (0.2, 0.3)
    with pytest.raises(
        InputError, match=r"^--unseen-fraction: unseen_fraction must be in \(0, 1\)"
    ):
        builder_params("zsl", {"classes": "c", "images": "i", "unseen_fraction": 1.5})
    with pytest.raises(InputError, match=r"^--max-hops: needs not_unseen"):
        builder_params("zsl", {"classes": "c", "images": "i", "max_hops": 2})
