"""Write ``docs/cli.md``, the command-line reference, from the ``semshift`` command itself.

Every command and command group shipped with semshift: its help, its usage line and its
arguments and options (type, default, help; the choices are in the help, listed from the
registries). Command groups of plugins are left out. ``tests/test_cli_docs.py`` checks that the
file equals what this script writes now, so a new or changed option needs::

    python scripts/cli_docs.py            # rewrites docs/cli.md
    python scripts/cli_docs.py --check    # exit 1 when docs/cli.md is out of date
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "docs" / "cli.md"

HEADER = """\
# The `semshift` command

Every command and its options, generated from the command by `python scripts/cli_docs.py`
(do not edit by hand: `tests/test_cli_docs.py` fails when this file is out of date). Run any
command with `--help` for the same text in the terminal; user mistakes print one line to stderr
and exit with status 2.
"""


def _cell(text: object) -> str:
    """Text for a Markdown table cell: one line, ``|`` escaped."""
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(param: Any) -> str:
    if param.required:
        return "required"
    value = param.default
    if value is None or value == () or value == []:
        return ""
    if isinstance(value, bool):
        if getattr(param, "is_flag", False) and param.secondary_opts:
            name = param.opts[0] if value else param.secondary_opts[0]
            return f"`{name}`"
        return "`true`" if value else "`false`"
    if isinstance(value, (list, tuple)):
        value = " ".join(map(str, value))
    return f"`{value}`"


def _type(param: Any, ctx: Any) -> str:
    if getattr(param, "is_flag", False):
        return "flag"
    return str(param.display_type(ctx)).strip("<>")


def _params(cmd: Any, ctx: Any) -> list[str]:
    rows = []
    for p in cmd.params:
        if getattr(p, "hidden", False):
            continue
        if p.param_type_name == "argument":
            name = f"`{p.name.upper()}`"
        else:
            name = " / ".join(f"`{o}`" for o in [*p.opts, *p.secondary_opts])
        rows.append(
            f"| {name} | {_cell(_type(p, ctx))} | {_cell(_default(p))} | "
            f"{_cell(getattr(p, 'help', None) or '')} |"
        )
    if not rows:
        return []
    return ["| Argument or option | Type | Default | Help |", "|---|---|---|---|", *rows, ""]


def _render(cmd: Any, path: str, shipped: set[str] | None, lines: list[str]) -> None:
    ctx = cmd.context_class(cmd, info_name=path)
    level = min(path.count(" ") + 2, 4)
    lines += [f"{'#' * level} `{path}`", ""]
    if cmd.help:
        lines += [cmd.help.strip(), ""]
    usage = " ".join([path, *cmd.collect_usage_pieces(ctx)])
    lines += ["```text", usage, "```", ""]
    lines += _params(cmd, ctx)
    if not hasattr(cmd, "list_commands"):
        return
    names = [n for n in cmd.list_commands(ctx) if shipped is None or n in shipped]
    subs = [(n, cmd.get_command(ctx, n)) for n in names]
    subs = [(n, c) for n, c in subs if not getattr(c, "hidden", False)]
    lines += ["| Command | What it does |", "|---|---|"]
    lines += [f"| `{path} {n}` | {_cell(c.get_short_help_str(limit=300))} |" for n, c in subs]
    lines.append("")
    for n, c in subs:
        _render(c, f"{path} {n}", None, lines)


def render() -> str:
    """The text of ``docs/cli.md``: the shipped commands and command groups."""
    import typer

    from semshift.cli import COMMAND_GROUPS, app

    root = typer.main.get_command(app)
    plugins = {n for n, g in COMMAND_GROUPS.items() if not g.builtin}
    shipped = set(getattr(root, "commands", {})) - plugins
    lines = [HEADER]
    _render(root, "semshift", shipped, lines)
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write ``docs/cli.md`` (or, with ``--check``, say whether it is current)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/cli.md differs")
    args = parser.parse_args(argv)
    text = render()
    if args.check:
        current = OUT.read_text(encoding="utf-8") if OUT.exists() else ""
        if current != text:
            print(f"{OUT} is out of date: run python scripts/cli_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
