"""A toy command group, added to the ``semshift`` command by this one module: importing it
registers ``semshift toy hello``."""

from __future__ import annotations

from typing import Annotated

import typer

from semshift.cli import register_command_group

toy_app = typer.Typer(help="A toy command group (tests/extensions).", no_args_is_help=True)


@toy_app.command("hello")
def hello(name: Annotated[str, typer.Option(help="Whom to greet.")] = "world") -> None:
    """Greet someone."""
    typer.echo(f"hello {name}")


register_command_group("toy", toy_app)
