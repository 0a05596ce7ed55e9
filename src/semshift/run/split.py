"""The split stage: every configured split, loaded from a manifest or built by its builder.

A built split is cached under ``.cache/split/<key>/split.json`` (key = builder, parameters,
taxonomy, seed and the checksums of files the parameters name), and every split is written to
``<output>/splits/<name>/split.json``. Builders are looked up in :mod:`semshift.splits.registry`,
so every registered builder is reachable here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from semshift.run.cache import stable_hash
from semshift.run.context import RunContext
from semshift.splits.manifest import SplitManifest
from semshift.splits.registry import validate_params

__all__ = ["SplitStage", "run_split"]


@dataclass
class SplitStage:
    """The split stage's result: each configured split's manifest, by name."""

    manifests: dict[str, SplitManifest] = field(default_factory=dict)


def _param_files(ctx: RunContext, params: Any) -> dict[str, str]:
    """Checksums of the files a builder's params name (relative to the config's folder), so an
    edited scores CSV or image list rebuilds the split."""
    out: dict[str, str] = {}

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for v in value.values():
                walk(v)
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif isinstance(value, str | Path) and str(value):
            path = Path(value).expanduser()
            path = path if path.is_absolute() else ctx.cfg.base_dir / path
            if path.is_file():
                out[str(value)] = ctx.cache.file_checksum(path)

    walk(params)
    return out


def run_split(ctx: RunContext) -> SplitStage:
    """Load or build every split of ``ctx.cfg.splits``."""
    from semshift.splits.registry import BuildContext, build_split

    cfg = ctx.cfg
    out = SplitStage()
    with ctx.stage("split") as rec:
        for name, sp in cfg.splits.items():
            if sp.manifest is not None:
                manifest = SplitManifest.read(sp.manifest)
                rec.keys[name] = stable_hash(manifest.to_dict())
                rec.reused.append(name)  # loaded, not built
            else:
                assert sp.builder is not None
                tax_id = cfg.taxonomy
                if Path(cfg.taxonomy).is_file():
                    tax_id = ctx.cache.file_checksum(cfg.taxonomy)
                # every parameter, defaults included: a changed default is a new key
                resolved = validate_params(sp.builder, sp.params, where=f"splits.{name}")
                key = stable_hash(
                    {
                        "builder": sp.builder,
                        "params": resolved.model_dump(mode="json"),
                        "files": _param_files(ctx, sp.params),
                        "taxonomy": tax_id,
                        "seed": cfg.seed,
                    }
                )
                rec.keys[name] = key
                path = ctx.cache.dir("split", key) / "split.json"
                if path.is_file() and not ctx.force:
                    manifest = SplitManifest.read(path)
                    rec.reused.append(name)
                else:
                    where = f"{cfg.source}: splits.{name}"
                    build_ctx = BuildContext(
                        taxonomy=cfg.taxonomy, base_dir=cfg.base_dir, seed=cfg.seed, where=where
                    )
                    manifest = build_split(sp.builder, sp.params, build_ctx)
                    manifest.write(path)
                    rec.computed.append(name)
            manifest.write(ctx.out / "splits" / name / "split.json")
            out.manifests[name] = manifest
    return out
