"""A toy command group of a third-party package: its entry point (``semshift.commands``) names
the typer app, which semshift registers under the entry point's name."""

from __future__ import annotations

import typer

app = typer.Typer(help="A toy plugin command group (tests/extensions).", no_args_is_help=True)


@app.command("ping")
def ping() -> None:
    """Answer pong."""
    typer.echo("pong")
