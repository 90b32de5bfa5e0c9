"""``python -m memex``."""

from memex.cli import main

main()
