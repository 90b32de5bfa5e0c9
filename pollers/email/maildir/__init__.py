"""Maildir: the poller (``poller.py``)."""
