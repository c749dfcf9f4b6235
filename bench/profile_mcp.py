"""Where the agent host's CPU goes per MCP ``tools/call`` (issue 13, "Speed").

Not a benchmark row: a tool for finding the next thing to cut. It drives the
same real processes as ``agent_host.mcp`` (coordinator, host, one turn of the
real claude to write the MCP config, then raw ``tools/call get_agent_meta``
POSTs in the protocol-2026-07-28 shape claude sends, the headline's client)
with the host under cProfile timing CPU time, and prints each layer's CPU per
call. Shares are what to compare: the profiler inflates Python-heavy code, and
wall times on a loaded machine are mostly scheduling.

    .venv/bin/python -m bench.profile_mcp [CALLS] [--save FILE]
"""

from __future__ import annotations

import argparse
import pstats
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
from tests.support.model_server import ModelServer, always, text

from bench._hostprocs import host
from bench._procs import serve
from bench.agent_host import WARMUP, _raw_mcp_samples, _seed, alice_mcp_server
from bench.registry import Latency
from hyperhive.agent.host import resolve_claude_bin
from hyperhive.config import HivePaths

__all__ = ["layers", "main"]

Key = tuple[str, int, str]
Stats = dict[Key, tuple[Any, ...]]

_FAST = "hyperhive/agent/mcp_fastpath.py"
_SURFACE = "hyperhive/agent/mcp_surface.py"
# label -> (file, function): a layer's own figure is its cumulative CPU minus the
# layers it contains (see ``layers``).
_FUNCS = {
    "read": ("uvicorn/protocols/http/", "data_received"),  # h11_impl or httptools_impl
    "asgi": ("starlette/applications.py", "__call__"),
    "web": ("hyperhive/agent/web.py", "__call__"),
    "fast": (_FAST, "__call__"),
    "body": (_FAST, "_read_body"),
    "parse": (_FAST, "_parse"),
    "wire": (_FAST, "_wire"),
    "sdk": ("mcp/server/streamable_http_manager.py", "handle_request"),
    "outcome": (_SURFACE, "outcome"),
    "run": (_SURFACE, "_run"),
    "handler": ("hyperhive/agent/hyperhive_tools.py", "call"),
    "log": ("logging/__init__.py", "log"),
    "emit": ("hyperhive/bus.py", "emit"),
}


def _find(stats: Stats, file: str, name: str) -> Key | None:
    """The busiest function ``name`` of ``file`` (several closures share a name); a
    ``file`` ending in ``/`` is any file of that directory."""
    found = [
        key
        for key in stats
        if key[2] == name
        and (key[0].endswith(file) or (file.endswith("/") and f"/{file}" in key[0]))
    ]
    return max(found, key=lambda key: stats[key][1], default=None)


def _from(stats: Stats, callee: Key | None, caller_file: str) -> float:
    """``callee``'s cumulative CPU when called from ``caller_file``."""
    if callee is None:
        return 0.0
    callers: dict[Key, tuple[float, ...]] = stats[callee][4]
    return sum(got[3] for key, got in callers.items() if key[0].endswith(caller_file))


def layers(profile: Path, calls: int) -> list[tuple[str, float]]:
    """(layer, CPU ms per tools/call) from a host profile of ``calls`` calls."""
    raw: Stats = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    keys = {label: _find(raw, *where) for label, where in _FUNCS.items()}

    def cum(label: str) -> float:
        key = keys[label]
        return float(raw[key][3]) if key is not None else 0.0

    # The send the fast path calls is Starlette's exception-handling wrapper of uvicorn's.
    response = _from(raw, _find(raw, "starlette/_exception_handler.py", "sender"), _FAST)
    log = _from(raw, keys["log"], _SURFACE)
    emit = _from(raw, keys["emit"], _SURFACE)
    fast = cum("fast")
    rows = [
        ("uvicorn (h11 or httptools): read and parse the request", cum("read")),
        ("Starlette app + router down to our endpoint", cum("asgi") - cum("web")),
        ("web.py: bearer token, surface, scope", cum("web") - fast - cum("sdk")),
        (
            "fast path: transport checks (SDK's own: Host/Origin, Accept, headers)",
            fast - cum("body") - cum("parse") - cum("outcome") - cum("wire") - response,
        ),
        ("fast path: read the body", cum("body")),
        ("fast path: JSON-RPC, inbound ladder, request schema (SDK's)", cum("parse")),
        ("ours: gate, arguments, envelope", cum("outcome") - cum("handler") - log - emit),
        ("ours: handler (get_agent_meta from the host's cache)", cum("handler")),
        ("ours: log record (refused and failed calls only)", log),
        ("ours: events bus", emit),
        ("fast path: result serialization (the SDK's shape, once per version)", cum("wire")),
        ("uvicorn's write of the response", response),
        ("SDK path (whatever the fast path handed over)", cum("sdk")),
    ]
    return [(label, seconds * 1000 / calls) for label, seconds in rows]


async def _raw_calls(paths: HivePaths, info: dict[str, Any], calls: int) -> Latency:
    server = await alice_mcp_server(paths, info)
    return await _raw_mcp_samples(server["url"], server["headers"], "get_agent_meta", calls)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.profile_mcp")
    parser.add_argument("calls", nargs="?", type=int, default=1000)
    parser.add_argument("--save", type=Path, help="keep the raw cProfile stats here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hh-profile-") as scratch:
        home = Path(scratch)
        out = args.save or home / "host.prof"
        with ModelServer(always(text("done"))) as model:
            paths = _seed(home, ["alice"], model.url, resolve_claude_bin(None))
            with serve(paths, ["alice"]), host(paths, profile=out) as (_, info):
                figure = anyio.run(_raw_calls, paths, info, args.calls)
        # + the warm-up calls the samples skip (the turn's own few calls are noise).
        rows = layers(out, args.calls + WARMUP)
    total = sum(ms for _, ms in rows)
    print(f"host CPU per tools/call under cProfile (wall p50 {figure.p50:.2f} ms, loaded):")
    for label, ms in rows:
        print(f"  {label:<66} {ms:7.3f} ms  {ms / total:6.1%}")
    print(f"  {'total':<66} {total:7.3f} ms")


if __name__ == "__main__":
    main()
