"""The coordinator's plumbing: sockets, the event bus, background tasks, host links' wire."""
