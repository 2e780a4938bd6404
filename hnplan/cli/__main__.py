"""``python -m hnplan.cli`` runs the command line."""

from hnplan.cli import main

main()
