"""The TodoSink plug-in point for the host's process tables, recording what would go
to the coordinator (bash tasks, subagents)."""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["RecordingTodos"]


@dataclass
class RecordingTodos:
    """The TodoSink plug-in point: records what would go to the coordinator."""

    events: list[tuple[str, str, str]] = field(default_factory=list)
    quiet: set[str] = field(default_factory=set)  # bodies upserted with wake=False

    async def upsert(self, key: str, body: str, *, wake: bool = True) -> None:
        self.events.append(("upsert", key, body))
        if not wake:
            self.quiet.add(body)

    async def clear(self, key: str) -> None:
        self.events.append(("clear", key, ""))

    def open(self) -> dict[str, str]:
        todos: dict[str, str] = {}
        for op, key, body in self.events:
            if op == "upsert":
                todos[key] = body
            else:
                todos.pop(key, None)
        return todos

    def ops(self, key: str) -> list[str]:
        return [
            op if op == "clear" else f"upsert:{body.split(':')[0]}"
            for op, k, body in self.events
            if k == key
        ]
