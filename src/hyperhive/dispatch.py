"""Dispatch tables: request type → handler, checked when the table is sealed.

A server module declares its table, registers one handler per request type
with ``@table.on(SomeReq)`` and calls ``table.seal()`` at the bottom, so an
import of that module fails, naming the gap, when a member of the socket's
union has no handler, a handler serves a type the socket does not speak, or
a handler's declared return type is not the response type its request names.

The coordinator's sockets (agent, operator, host link) and the agent host's
side of the link (the coordinator's commands and asks, ``agent/hostasks.py``)
each have one.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Awaitable, Callable
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from hyperhive.protocol import result_type

__all__ = ["DispatchTableError", "Dispatcher", "union_members"]

Ctx = TypeVar("Ctx")
H = TypeVar("H", bound=Callable[..., Awaitable[Any]])


class DispatchTableError(TypeError):
    """A table that does not match its socket's union (raised at import)."""


def union_members(union: Any) -> tuple[type[BaseModel], ...]:
    """The request classes of an ``Annotated[A | B | …, Field(discriminator=…)]``."""
    inner = typing.get_args(union)[0] if typing.get_origin(union) is typing.Annotated else union
    members = typing.get_args(inner) or (inner,)
    return tuple(m for m in members if isinstance(m, type) and issubclass(m, BaseModel))


def _same_type(declared: Any, expected: Any) -> bool:
    none = types.NoneType
    return (none if declared is None else declared) == (none if expected is None else expected)


class Dispatcher(Generic[Ctx]):
    """One socket's table; handlers are called as ``handler(ctx, request)``."""

    def __init__(self, name: str, union: Any) -> None:
        self.name = name
        self.members = union_members(union)
        self._handlers: dict[type[BaseModel], Callable[[Ctx, Any], Awaitable[Any]]] = {}
        self._sealed = False

    def on(self, req_type: type[BaseModel]) -> Callable[[H], H]:
        """Register the decorated function as the handler of ``req_type``."""

        def register(fn: H) -> H:
            if self._sealed:
                raise DispatchTableError(f"{self.name}: the table is sealed; no new handlers")
            if req_type in self._handlers:
                raise DispatchTableError(
                    f"{self.name}: {req_type.__name__} already has a handler "
                    f"({self._handlers[req_type].__qualname__}); {fn.__qualname__} is a second one"
                )
            self._handlers[req_type] = fn
            return fn

        return register

    def seal(self) -> None:
        """Refuse a table with a gap, a stray handler or a wrong return type."""
        problems: list[str] = []
        missing = [m.__name__ for m in self.members if m not in self._handlers]
        if missing:
            problems.append("no handler for " + ", ".join(missing))
        stray = [t.__name__ for t in self._handlers if t not in self.members]
        if stray:
            problems.append("handlers for types this socket does not speak: " + ", ".join(stray))
        for req_type, fn in self._handlers.items():
            if req_type not in self.members:
                continue
            try:
                declared = typing.get_type_hints(fn).get("return", "(none)")
            except NameError as exc:
                problems.append(f"{fn.__qualname__}: return annotation unresolvable ({exc})")
                continue
            expected = result_type(req_type)
            if not _same_type(declared, expected):
                problems.append(
                    f"{fn.__qualname__} returns {declared!r} but {req_type.__name__} "
                    f"answers {expected!r}"
                )
        if problems:
            raise DispatchTableError(f"{self.name} dispatch table: " + "; ".join(problems))
        self._sealed = True

    def __call__(self, ctx: Ctx, request: BaseModel) -> Awaitable[Any]:
        """The handler's coroutine, to await (no coroutine of the table's own on the path)."""
        if not self._sealed:
            raise DispatchTableError(f"{self.name}: dispatch before seal()")
        return self._handlers[type(request)](ctx, request)
