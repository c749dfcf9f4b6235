"""hyperhive: a hive of long-lived, sandboxed Claude Code agents."""

__version__ = "0.1.0"
