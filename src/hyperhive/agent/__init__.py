"""The agent host: harnesses, sandboxed processes and per-agent surfaces."""
