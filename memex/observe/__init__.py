"""What people see: logs, health states, metrics, heartbeats, status, tail and the dashboard."""
