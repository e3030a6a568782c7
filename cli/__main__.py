"""``python -m rockroll.cli``: the ``rockroll`` command line."""

from rockroll.cli.main import main

if __name__ == "__main__":  # pragma: no cover
    main()
