"""``python -m memex``: as the console script, a search or show a running server can answer first (:mod:`memex_thin`)."""

from memex_thin import main

main()
