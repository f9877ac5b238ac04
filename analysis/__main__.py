"""``python -m analysis``: see `analysis.cli`."""

from analysis.cli import main

main()
