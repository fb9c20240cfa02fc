"""`python -m ordo`: the `ordo` command line, for environments without the console script."""

from __future__ import annotations

from ordo.cli.main import main

if __name__ == "__main__":
    main()
