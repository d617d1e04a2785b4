"""`python -m mimir`."""

from mimir.cli import main

main()
