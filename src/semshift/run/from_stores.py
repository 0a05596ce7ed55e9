"""A run configuration from feature stores alone: what ``semshift evaluate`` runs.

:func:`config_from_stores` turns the stores and choices of ``semshift evaluate`` into a run
configuration (a plain mapping, as ``OUT/config.json`` holds it), checked as
:func:`~semshift.run.config.load_config` checks any configuration. Its errors name the
command's options, not the configuration keys they become (``--ood easy: feature store ...
does not exist``, not ``data.sets.easy.store: ...``); :func:`option_words` does the same for
the errors :func:`~semshift.run.run` raises while running such a configuration.

>>> cfg = config_from_stores("train", "test", ood={"easy": "ood"}, detectors=["knn:k=5"],
...                          check_files=False)
>>> cfg["detectors"], sorted(cfg["data"]["sets"])
([{'name': 'knn', 'params': {'k': 5}}], ['easy'])
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from semshift.errors import SemshiftError

__all__ = [
    "WHERE",
    "config_from_stores",
    "detector_spec",
    "evaluate_protocols",
    "option_words",
    "search_spec",
    "selections",
]

#: what messages about a configuration from stores call it (``semshift evaluate: data...``)
WHERE = "semshift evaluate"

StoresArg = Mapping[str, str | Path] | Sequence[str] | None


def evaluate_protocols() -> list[str]:
    """The protocols a configuration from stores alone can run (the others need a model or
    more settings), in registry order: those whose spec says ``on_stores``."""
    from semshift.protocols.registry import get_protocol, list_protocols

    return [n for n in list_protocols() if get_protocol(n).on_stores]


def detector_spec(item: str) -> dict[str, object]:
    """``knn`` or ``knn:k=50,backend=numpy`` -> a detector entry of the config.

    Values are read as YAML scalars: ``k=50`` is an integer, ``p=0.9`` a float, ``x=true`` a
    boolean.
    """
    import yaml

    name, colon, rest = item.partition(":")
    params: dict[str, object] = {}
    for pair in rest.split(",") if colon else []:
        key, eq, value = pair.partition("=")
        if not eq or not key.strip():
            raise SemshiftError(f"--detector {item!r}: expected NAME or NAME:KEY=VALUE,KEY=VALUE")
        try:
            params[key.strip()] = yaml.safe_load(value)
        except yaml.YAMLError:
            params[key.strip()] = value
    return {"name": name.strip(), "params": params}


def search_spec(item: str) -> str | dict[str, object]:
    """``knn`` or ``knn:k=1,10,50,alpha=0.1,1`` -> a ``search.detectors`` entry of the config.

    After the colon, ``KEY=V1,V2,...`` gives a hyperparameter's candidates in the order tried;
    a value without ``=`` continues the previous key's list. Values are read as YAML scalars.
    """
    import yaml

    name, colon, rest = item.partition(":")
    if not colon:
        return name.strip()
    params: dict[str, list[object]] = {}
    key: str | None = None
    for token in rest.split(","):
        k, eq, value = token.partition("=")
        if eq:
            key = k.strip()
            if not key or key in params:
                raise SemshiftError(
                    f"--search-space {item!r}: expected NAME:KEY=V1,V2,... with each KEY once"
                )
            params[key] = []
        else:
            value = token
        if key is None or not value.strip():
            raise SemshiftError(f"--search-space {item!r}: expected NAME or NAME:KEY=V1,V2,...")
        try:
            params[key].append(yaml.safe_load(value))
        except yaml.YAMLError:
            params[key].append(value.strip())
    return {"name": name.strip(), "params": params}


def selections(items: Sequence[str] | None, sets: set[str]) -> dict[str, dict[str, list[object]]]:
    """``SET:KEY=VALUE`` options -> per set, per column, the accepted values.

    A value that reads as a number or a boolean also matches that number or boolean, so
    ``severity=3`` selects an integer column as well as a text one.
    """
    out: dict[str, dict[str, list[object]]] = {}
    for item in items or []:
        name, colon, cond = item.partition(":")
        key, eq, value = cond.partition("=")
        if not colon or not eq or not key:
            raise SemshiftError(f"--select: expected SET:KEY=VALUE, got {item!r}")
        if name not in sets:
            raise SemshiftError(
                f"--select {item!r}: no set {name!r}; sets: {', '.join(sorted(sets))}"
            )
        values: list[object] = [value]
        for conv in (int, float):
            try:
                values.append(conv(value))
                break
            except ValueError:
                continue
        if value.lower() in ("true", "false"):
            values.append(value.lower() == "true")
        out.setdefault(name, {}).setdefault(key, []).extend(values)
    return out


def _named_stores(items: StoresArg, option: str) -> dict[str, Path]:
    """``NAME=STORE`` items (or a mapping of name to store) -> name: store path."""
    if isinstance(items, Mapping):
        items = [f"{name}={path}" for name, path in items.items()]
    out: dict[str, Path] = {}
    for item in items or []:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise SemshiftError(f"{option}: expected NAME=STORE, got {item!r}")
        if name in out or name in ("train", "val", "test"):
            raise SemshiftError(f"{option}: set name {name!r} is taken; give each set its own name")
        out[name] = Path(path)
    return out


def _checked_protocols(protocols: Sequence[str] | None) -> list[str]:
    chosen = list(dict.fromkeys(protocols or ["osr"]))
    allowed = evaluate_protocols()
    bad = [p for p in chosen if p not in allowed]
    if bad:
        raise SemshiftError(
            f"--protocol {bad[0]!r}: evaluate runs {', '.join(allowed)}; the others "
            "need a model or more settings: use semshift run with a config"
        )
    return chosen


def _val_ood(
    search: bool, val_ood: str | None, val: object, taken: set[str]
) -> tuple[str | None, Path]:
    """The validation OOD set of a search: its name and store (None when not searching)."""
    if not search:
        if val_ood is not None:
            raise SemshiftError("--val-ood goes with --search (or --search-space)")
        return None, Path()
    if val_ood is None:
        raise SemshiftError("--search needs --val-ood STORE: the validation OOD set")
    if val is None:
        raise SemshiftError(
            "--search needs --val STORE: ID validation rows the detectors are not fitted on"
        )
    named = _named_stores([val_ood if "=" in val_ood else f"val_ood={val_ood}"], "--val-ood")
    name, path = next(iter(named.items()))
    if name in taken:
        raise SemshiftError(f"--val-ood: set name {name!r} is taken by another set")
    return name, path


def _unique(items: Sequence[Any] | None) -> list[Any]:
    """The items in order, each once (strings or mappings)."""
    out: list[Any] = []
    for item in items or []:
        if item not in out:
            out.append(item)
    return out


def config_from_stores(
    train: str | Path | None,
    test: str | Path,
    *,
    ood: StoresArg = None,
    covariate: StoresArg = None,
    val: str | Path | None = None,
    select: Sequence[str] | None = None,
    detectors: Sequence[str | Mapping[str, Any]] | None = None,
    protocols: Sequence[str] | None = None,
    metrics: Sequence[str] | None = None,
    conventions: str | None = None,
    operating_point: float | None = None,
    bootstrap: int = 1000,
    seed: int = 0,
    output: str | Path = Path("runs/evaluate"),
    report: bool = True,
    mixed_models: bool = False,
    search: bool = False,
    search_space: Sequence[str | Mapping[str, Any]] | None = None,
    val_ood: str | None = None,
    search_objective: str = "auroc",
    check_files: bool = True,
) -> dict[str, Any]:
    """The run configuration of detectors evaluated on feature stores (``semshift evaluate``).

    Parameters
    ----------
    train, test : path
        Feature stores of ID training data (fits the detectors) and ID test data. ``train``
        may be None when no detector needs fitting (``msp``, ``energy``, ``mls`` ...; the
        default detectors are then every such one).
    ood, covariate : mapping of name to store, or ``NAME=STORE`` strings, optional
        Semantic-shift sets, and covariate-shift sets (ID classes, labels known); at least one
        set in all. ``train``, ``val`` and ``test`` are taken names.
    val : path, optional
        Feature store of ID validation data (temperature scaling, thresholds, the search).
    select : list of str, optional
        ``SET:KEY=VALUE`` row selections by a group column (SET: train, val, test or a set's
        name); values of one key are alternatives.
    detectors : list of str or mapping, optional
        ``NAME`` or ``NAME:KEY=VALUE,...`` (or ``{"name": ..., "params": {...}}``); default:
        every detector the stores allow.
    protocols : list of str, optional
        Among :func:`evaluate_protocols` (default ``["osr"]``).
    metrics : list of str, optional
        Ranking metrics (default: the protocols' own).
    conventions : str, optional
        ``exact`` or ``openood``.
    operating_point : float, optional
        ID recall of the rejection threshold (the ``operating_point`` protocol).
    bootstrap : int
        Bootstrap resamples of the confidence intervals (0: none).
    seed : int
        Seed of the run and its bootstrap.
    output : path
        Output directory; its name is the run's name.
    report : bool
        Write ``report.html`` and ``report.md``.
    mixed_models : bool
        Accept stores of different models or heads.
    search : bool
        Choose hyperparameters on ``val`` vs ``val_ood``; implied by ``search_space``.
    search_space : list of str or mapping, optional
        Detectors searched, ``NAME`` or ``NAME:KEY=V1,V2,...`` (default: all).
    val_ood : str, optional
        ``STORE`` or ``NAME=STORE``: the validation OOD set of the search (never evaluated).
    search_objective : str
        Ranking metric the search optimises.
    check_files : bool
        Check that every store exists (default).

    Returns
    -------
    dict
        The configuration as plain JSON values, absolute paths; :func:`semshift.run.run` takes
        it (messages then call it ``semshift evaluate``: ``load_config(cfg, source=WHERE)``).

    Raises
    ------
    SemshiftError
        One line naming the option (``--ood easy: ...``, ``--detector: ...``), as the command
        prints it.
    """
    from semshift.run.config import load_config

    oods = _named_stores(ood, "--ood")
    covs = _named_stores(covariate, "--covariate")
    clash = sorted(set(oods) & set(covs))
    if clash:
        raise SemshiftError(f"--ood and --covariate: set name(s) {', '.join(clash)} given twice")
    if not oods and not covs:
        raise SemshiftError("give at least one --ood NAME=STORE or --covariate NAME=STORE")
    chosen = _checked_protocols(protocols)
    search = search or bool(search_space)
    val_name, val_path = _val_ood(search, val_ood, val, {*oods, *covs})
    sets = {"train", "val", "test", *oods, *covs, *([val_name] if val_name else [])}
    sel = selections(select, sets - ({"val"} if val is None else set()))

    def source(name: str, path: str | Path) -> dict[str, object]:
        return {"store": str(Path(path).absolute()), "select": sel.get(name, {})}

    data: dict[str, Any] = {"id_test": source("test", test)}
    if train is not None:
        data = {"id_train": source("train", train), **data}
    if val is not None:
        data["id_val"] = source("val", val)
    data["sets"] = {
        **{n: {**source(n, p), "role": "ood", "split": n} for n, p in oods.items()},
        **{n: {**source(n, p), "role": "covariate"} for n, p in covs.items()},
    }
    if val_name is not None:  # searched on, never evaluated
        data["sets"][val_name] = {**source(val_name, val_path), "role": "ood"}
    if mixed_models:
        data["mixed_models"] = True
    protocols_cfg: dict[str, dict[str, object]] = {p: {} for p in chosen}
    if operating_point is not None:
        protocols_cfg["operating_point"] = {"recall": operating_point}
    out = Path(output)
    cfg: dict[str, Any] = {
        "name": out.name or "evaluate",
        "output": str(out.absolute()),
        "seed": seed,
        "data": data,
        "detectors": [
            detector_spec(d) if isinstance(d, str) else dict(d) for d in _unique(detectors)
        ]
        or "all",
        "protocols": protocols_cfg,
        "bootstrap": {"n_resamples": bootstrap, "seed": seed},
        "report": {"formats": ["html", "md"]} if report else None,
    }
    if metrics:
        cfg["metrics"] = list(dict.fromkeys(metrics))
    if val_name is not None:
        cfg["search"] = {
            "val_ood": val_name,
            "detectors": [
                search_spec(s) if isinstance(s, str) else dict(s) for s in _unique(search_space)
            ]
            or "all",
            "objective": search_objective,
        }
    if conventions is not None:
        cfg["conventions"] = conventions
    try:
        load_config(cfg, source=WHERE, check_files=check_files)
    except SemshiftError as err:
        raise SemshiftError(option_words(str(err), cfg)) from None
    return cfg


def option_words(message: str, config: Mapping[str, Any]) -> str:
    """A message about a configuration from :func:`config_from_stores` in the command's words:
    ``semshift evaluate: data.sets.easy.store: ...`` -> ``--ood easy: ...``; any other message
    unchanged."""
    if not message.startswith(f"{WHERE}: "):
        return message
    key, sep, rest = message[len(WHERE) + 2 :].partition(": ")
    if not sep:
        return message
    rest = rest.replace("give data.id_train", "give --train")
    sets = (config.get("data") or {}).get("sets") or {}
    val_ood = (config.get("search") or {}).get("val_ood")
    fixed = {"data.id_train": "--train", "data.id_test": "--test", "data.id_val": "--val"}
    m = re.fullmatch(r"(data\.id_\w+|data\.sets\.([^.]+))(\.select\b.*)?(\.\w+)?", key)
    if m is not None:
        name = m.group(2)
        if name is not None and name == val_ood:
            option = "--val-ood"
        elif name is not None:
            role = (sets.get(name) or {}).get("role")
            option = f"--covariate {name}" if role == "covariate" else f"--ood {name}"
        else:
            option = fixed.get(m.group(1), m.group(1))
        if m.group(3):
            option = f"--select for {option}"
        return f"{option}: {rest}"
    for prefix, option in (("detectors", "--detector"), ("metrics", "--metric"),
                           ("bootstrap", "--bootstrap"),
                           ("protocols.operating_point.recall", "--operating-point"),
                           ("conventions", "--conventions"),
                           ("search.val_ood", "--val-ood"),
                           ("search.detectors", "--search-space"),
                           ("search.objective", "--search-objective"),
                           ("search", "--search"),
                           ("protocols", "--protocol")):  # fmt: skip
        if key.startswith(prefix):
            return f"{option}: {rest}"
    return message
