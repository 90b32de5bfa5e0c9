"""mbox: the poller (``poller.py``), splitting and variants (``read.py``), ``memex verify`` (``inventory.py``)."""
