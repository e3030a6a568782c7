"""``python -m rockroll.cli``: the ``rockroll`` command line."""

import sys

try:  # an interrupt while the commands' modules load (a ^C just after the start) ends quietly too
    from rockroll.cli.main import main
except KeyboardInterrupt:
    sys.exit(130)

if __name__ == "__main__":  # pragma: no cover
    main()
