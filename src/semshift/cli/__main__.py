"""``python -m semshift.cli`` (as under ``torchrun ... -m semshift.cli train``): the command."""

from semshift.cli import main

if __name__ == "__main__":  # pragma: no cover - run as a module
    main()
