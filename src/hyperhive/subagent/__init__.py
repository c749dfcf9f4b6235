"""Subagents: bounded claude runs an agent starts, continues, interrupts (spec 000 + 001)."""
