"""Where the agent host's CPU goes per MCP ``tools/call`` (issue 13, "Speed").

Not a benchmark row: a tool for finding the next thing to cut. It drives the
same real processes as ``agent_host.mcp`` (coordinator, host, one turn of the
real claude to write the MCP config, then the SDK client calling
``get_agent_meta``) with the host under cProfile timing CPU time, and prints
each layer's CPU per call. Shares are what to compare: the profiler inflates
Python-heavy code, and wall times on a loaded machine are mostly scheduling.

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
from bench.agent_host import WARMUP, _seed, alice_mcp_server, mcp_samples
from bench.registry import Latency
from hyperhive.agent.host import resolve_claude_bin
from hyperhive.config import HivePaths

__all__ = ["layers", "main"]

Key = tuple[str, int, str]

# (label, function) — a layer's own figure is its cumulative CPU minus the
# layers listed after it that it contains.
_FUNCS = {
    "read": ("uvicorn/protocols/http/h11_impl.py", "handle_events"),
    "asgi": ("starlette/applications.py", "__call__"),
    "web": ("hyperhive/agent/web.py", "__call__"),
    "sdk": ("mcp/server/_streamable_http_modern.py", "handle_modern_request"),
    "dispatch": ("mcp/server/_streamable_http_modern.py", "_to_jsonrpc_response"),
    "write": ("mcp/server/_streamable_http_modern.py", "_write"),
    "call": ("hyperhive/agent/mcp_surface.py", "_call"),
    "run": ("hyperhive/agent/mcp_surface.py", "_run"),
    "hop": ("hyperhive/agent/hyperhive_tools.py", "call"),
    "log": ("logging/__init__.py", "info"),
}


def _find(stats: dict[Key, tuple[object, ...]], file: str, name: str) -> Key | None:
    for key in stats:
        if key[0].endswith(file) and key[2] == name:
            return key
    return None


def layers(profile: Path, calls: int) -> list[tuple[str, float]]:
    """(layer, CPU ms per tools/call) from a host profile of ``calls`` calls."""
    raw: dict[Key, tuple[object, ...]] = pstats.Stats(str(profile)).stats  # type: ignore[attr-defined]
    keys = {label: _find(raw, *where) for label, where in _FUNCS.items()}

    def cum(label: str) -> float:
        key = keys[label]
        return float(raw[key][3]) if key is not None else 0.0  # type: ignore[arg-type]

    def log_from_surface() -> float:
        log = keys["log"]
        if log is None:
            return 0.0
        callers: dict[Key, tuple[float, ...]] = raw[log][4]  # type: ignore[assignment]
        return sum(got[3] for key, got in callers.items() if key[0].endswith(_FUNCS["call"][0]))

    log = log_from_surface()
    # _run is the envelope inside _call's tracing span (absent before telemetry).
    run = cum("run") if keys["run"] is not None else cum("call")
    rows = [
        ("uvicorn/h11: read and parse the request", cum("read")),
        ("Starlette app + router down to our endpoint", cum("asgi") - cum("web")),
        ("web.py bearer auth + session manager routing", cum("web") - cum("sdk")),
        (
            "SDK: body, headers, DNS-rebinding check, JSON-RPC parse",
            cum("sdk") - cum("dispatch") - cum("write"),
        ),
        ("SDK: dispatch (runner, otel span, result model)", cum("dispatch") - cum("call")),
        ("ours: coordinator hop (get_agent_meta RPC)", cum("hop")),
        ("ours: per-call log line (1 record)", log),
        ("ours: tool span (OpenTelemetry)", cum("call") - run),
        ("ours: rest of the envelope (args, bus, result)", run - cum("hop") - log),
        ("SDK: serialize + Starlette response + h11 write", cum("write")),
    ]
    return [(label, seconds * 1000 / calls) for label, seconds in rows]


async def _sdk_client_calls(paths: HivePaths, info: dict[str, Any], calls: int) -> Latency:
    server = await alice_mcp_server(paths, info)
    return await mcp_samples(server["url"], server["headers"], "get_agent_meta", calls)


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
                figure = anyio.run(_sdk_client_calls, paths, info, args.calls)
        # + the warm-up calls the samples skip (the turn's own few calls are noise).
        rows = layers(out, args.calls + WARMUP)
    total = sum(ms for _, ms in rows)
    print(f"host CPU per tools/call under cProfile (wall p50 {figure.p50:.2f} ms, loaded):")
    for label, ms in rows:
        print(f"  {label:<58} {ms:7.3f} ms  {ms / total:6.1%}")
    print(f"  {'total':<58} {total:7.3f} ms")


if __name__ == "__main__":
    main()
