"""``python -m memex``."""

from memex.cli.main import main

main()
