"""``python -m memex``."""

from memex.cli.entry import main

main()
