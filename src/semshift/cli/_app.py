"""The typer application and its command groups; the command modules register on them."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from semshift import __version__

if TYPE_CHECKING:
    pass

from semshift.cli._options import console

app = typer.Typer(
    name="semshift",
    help="Measure classifiers and OOD detectors under semantic vs covariate shift.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
splits_app = typer.Typer(help="Build and inspect class splits.", no_args_is_help=True)
taxonomy_app = typer.Typer(help="Query WordNet or a custom hierarchy.", no_args_is_help=True)
app.add_typer(splits_app, name="splits")
app.add_typer(taxonomy_app, name="taxonomy")
benchmark_app = typer.Typer(
    help="The seed papers' benchmarks: list, check the files, run.", no_args_is_help=True
)
app.add_typer(benchmark_app, name="benchmark")
zsl_app = typer.Typer(
    help="Zero-shot learning: the proposed-splits paper's eight methods.", no_args_is_help=True
)
app.add_typer(zsl_app, name="zsl")
store_app = typer.Typer(help="Check and repair feature stores.", no_args_is_help=True)
app.add_typer(store_app, name="store")


def _version(value: bool) -> None:
    if value:
        console.print(f"semshift {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")
    ] = False,
) -> None:
    """semshift: semantic-shift benchmarks for image classifiers and OOD detectors."""
