"""Where memex remembers where each source stands: cursors, locks, run leases, spools, private state files."""
