"""``python -m charter`` runs the command line."""

from charter.cli import main

main()
