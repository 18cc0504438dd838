"""``python -m kosumi`` runs the command line."""

from kosumi.cli import main

main()
