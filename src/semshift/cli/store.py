"""`semshift store verify` / `repair`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    pass

from semshift.cli._app import store_app
from semshift.cli._options import console


@store_app.command("verify")
def store_verify(
    store: Annotated[Path, typer.Argument(help="A feature store folder.")],
) -> None:
    """Recompute every checksum of a store (shards, head, index, skipped.csv); exit 2 naming
    each damaged shard or file."""
    from semshift.errors import InputError
    from semshift.features.store import read_meta, verify_store

    damages = verify_store(store)
    if damages:
        raise InputError(
            f"store {store} is damaged: {', '.join(str(d) for d in damages)}; run `semshift "
            f"store repair {store}`, then the extraction again"
        )
    meta = read_meta(store)
    console.print(
        f"{store}: intact ({len(meta.get('shards', []))} shards, {meta.get('n_rows', '?')} rows; "
        "every checksum, commit record, the index and skipped.csv match meta.json)"
    )


@store_app.command("repair")
def store_repair(
    store: Annotated[Path, typer.Argument(help="A feature store folder.")],
) -> None:
    """Remove a store's damaged shards so that the next extraction recomputes only them."""
    from semshift.features.store import repair_store

    result = repair_store(store)
    if not result.damages:
        console.print(f"{store}: intact, nothing to repair")
        return
    removed = ", ".join(str(k) for k in result.removed_shards) or "none"
    meta = next((d for d in result.damages if d.file == "meta.json"), None)
    rebuilt = f"meta.json {meta.problem}: removed; " if meta else ""
    console.print(
        f"{store}: {rebuilt}removed damaged shard(s) {removed}; {result.kept_shards} intact "
        "shard(s) kept. Run the same extraction again (the `semshift extract` command, or the "
        "`semshift run` whose cache holds the store): it recomputes only the removed shards"
        + (" and writes meta.json again." if meta else ".")
    )
