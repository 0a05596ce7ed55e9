"""``python -m semshift``: the ``semshift`` command."""

from semshift.cli import main

if __name__ == "__main__":  # pragma: no cover - run as a module
    main()
