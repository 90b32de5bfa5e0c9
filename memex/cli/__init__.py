"""The ``memex`` command line: poll, backfill, status, cursor, tail, dashboard, auth and the deploy recipes."""
