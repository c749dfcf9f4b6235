"""The operator's web dashboard, served by the coordinator (loopback by default)."""
