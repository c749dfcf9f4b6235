"""Dispatch tables: a gap, a stray handler or a wrong return type fails at import."""

from __future__ import annotations

import importlib
from typing import Annotated, Literal

import pytest
from pydantic import Field

from hyperhive.dispatch import Dispatcher, DispatchTableError, union_members
from hyperhive.protocol import (
    AgentRequest,
    Created,
    HostRequest,
    LinkCommand,
    LinkRequest,
    Req,
    Sent,
    result_adapter,
    result_type,
)
from hyperhive.protocol.hostdisk import RepoWriteAsk, RepoWritten
from hyperhive.protocol.hostreads import Ask, HostTail, LogTailAsk


class PingReq(Req[Sent]):
    cmd: Literal["ping"]


class PokeReq(Req[None]):
    cmd: Literal["poke"]


class StrayReq(Req[Created]):
    cmd: Literal["stray"]


Union = Annotated[PingReq | PokeReq, Field(discriminator="cmd")]


class Ctx:
    pass


async def ping(ctx: Ctx, req: PingReq) -> Sent:
    return Sent(id=1, to="x")


async def poke(ctx: Ctx, req: PokeReq) -> None:
    return None


async def ping_wrong(ctx: Ctx, req: PingReq) -> Created:
    return Created(id=1)


async def stray(ctx: Ctx, req: StrayReq) -> Created:
    return Created(id=1)


def test_a_missing_handler_is_named() -> None:
    table: Dispatcher[Ctx] = Dispatcher("test socket", Union)
    table.on(PingReq)(ping)
    with pytest.raises(DispatchTableError, match="no handler for PokeReq"):
        table.seal()


def test_a_handler_for_a_type_the_socket_does_not_speak_is_named() -> None:
    table: Dispatcher[Ctx] = Dispatcher("test socket", Union)
    table.on(PingReq)(ping)
    table.on(PokeReq)(poke)
    table.on(StrayReq)(stray)
    with pytest.raises(DispatchTableError, match="does not speak: StrayReq"):
        table.seal()


def test_a_second_handler_for_one_type_is_refused_at_once() -> None:
    table: Dispatcher[Ctx] = Dispatcher("test socket", Union)
    table.on(PingReq)(ping)
    with pytest.raises(DispatchTableError, match="already has a handler"):
        table.on(PingReq)(ping_wrong)


def test_a_handler_returning_another_type_than_its_request_answers_is_refused() -> None:
    table: Dispatcher[Ctx] = Dispatcher("test socket", Union)
    table.on(PingReq)(ping_wrong)
    table.on(PokeReq)(poke)
    with pytest.raises(DispatchTableError, match="ping_wrong returns .*Created.* PingReq answers"):
        table.seal()


@pytest.mark.anyio
async def test_a_complete_table_dispatches_by_type() -> None:
    table: Dispatcher[Ctx] = Dispatcher("test socket", Union)
    table.on(PingReq)(ping)
    table.on(PokeReq)(poke)
    with pytest.raises(DispatchTableError, match="before seal"):
        await table(Ctx(), PingReq(cmd="ping"))
    table.seal()
    assert await table(Ctx(), PingReq(cmd="ping")) == Sent(id=1, to="x")
    assert await table(Ctx(), PokeReq(cmd="poke")) is None


@pytest.mark.parametrize("union", [AgentRequest, HostRequest, LinkRequest, LinkCommand])
def test_every_request_on_every_socket_names_a_response_type(union: object) -> None:
    for member in union_members(union):
        result_type(member)  # raises if a request forgot Req[...]
        result_adapter(member)


def test_the_real_tables_are_sealed_on_import() -> None:
    agent_api = importlib.import_module("hyperhive.core.api.agent_api")
    operator_api = importlib.import_module("hyperhive.core.api.operator_api")
    link_table = importlib.import_module("hyperhive.core.infra.link_table")
    hostasks = importlib.import_module("hyperhive.agent.hostasks")
    tables = (
        agent_api.AGENT_TABLE,
        operator_api.OPERATOR_TABLE,
        link_table.LINK_TABLE,
        hostasks.HOST_TABLE,
    )
    for table in tables:
        assert table._sealed and set(table._handlers) == set(table.members)


def test_an_ask_names_its_answer_through_its_generic_base() -> None:
    # ``class LogTailAsk(Ask[HostTail])``: the host's table checks its handler against
    # HostTail, and the coordinator validates the host's answer into it.
    assert result_type(LogTailAsk) is HostTail and result_type(RepoWriteAsk) is RepoWritten
    answer = result_adapter(LogTailAsk).validate_python(
        {"lines": ["a"], "cursor": "1:2", "found": True}
    )
    assert answer == HostTail(lines=["a"], cursor="1:2", found=True)
    asks = [m for m in union_members(LinkCommand) if issubclass(m, Ask)]
    assert len(asks) == 15 and all("ask" in m.model_fields for m in asks)


def test_a_host_handler_answering_the_wrong_model_is_refused() -> None:
    Pushed = Annotated[LogTailAsk | PokeReq, Field(discriminator="cmd")]
    table: Dispatcher[Ctx] = Dispatcher("test host", Pushed)

    async def tail(ctx: Ctx, ask: LogTailAsk) -> list[str]:
        return []

    table.on(LogTailAsk)(tail)
    table.on(PokeReq)(poke)
    with pytest.raises(DispatchTableError, match="LogTailAsk answers .*HostTail"):
        table.seal()


def test_results_validate_into_their_models_by_wire_alias() -> None:
    from hyperhive.protocol import Message, RecvReq

    rows = result_adapter(RecvReq).validate_python(
        [{"id": 3, "from": "bob", "to": "alice", "body": "hi", "created_at": 1.0}]
    )
    assert rows == [Message(id=3, sender="bob", recipient="alice", body="hi", created_at=1.0)]
