"""IMAP: the poller (``poller.py``), its session and wire, OAuth2 sign-in, Gmail's labels, holes, read-ahead, UTF-7 names, ``memex verify``."""
