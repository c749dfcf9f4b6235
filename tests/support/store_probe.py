"""Which store functions a process runs, labelled by the test that started it: cheaply.

The PostgreSQL pass (:mod:`tests.support.store_reach`) needs, per test, the SQLite
store operations it reached. Tracing every line (coverage.py) slowed the whole suite
past CI's budget, so this probe counts calls instead: every function and method
defined in ``hyperhive.store.sqlite``'s modules is wrapped as the module loads
(:func:`install` puts a finder on ``sys.meta_path``), and the first call of each in
a process, per test, appends ``test<TAB>module.py:Class.method`` to
``<record>/data/<pid>.tsv``. One line per first call: a store call costs a set
lookup, and a ``kill -9`` loses nothing already written.

The test's label is ``HH_STORE_REACH_TEST`` in the environment at the call: the
test process sets it around each test, and the processes a test starts inherit it.
This file is loaded by path (``reach_site/sitecustomize.py``) in every Python
process of a recording run, so it imports nothing of the project's.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import inspect
import os
import sys
import types
from collections.abc import Callable, Sequence
from importlib.machinery import ModuleSpec
from typing import Any

RECORD_ENV = "HH_STORE_REACH_RECORD"
TEST_ENV = "HH_STORE_REACH_TEST"
PACKAGE = "hyperhive.store.sqlite"

_seen: set[tuple[str, str]] = set()
_out: tuple[int, int] | None = None  # (pid, fd): a forked child opens its own file
_record = ""


def _hit(name: str) -> None:
    label = os.environ.get(TEST_ENV)
    if not label or (label, name) in _seen:
        return
    _seen.add((label, name))
    global _out
    if _out is None or _out[0] != os.getpid():
        path = os.path.join(_record, "data", f"{os.getpid()}.tsv")
        _out = (os.getpid(), os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644))
    os.write(_out[1], f"{label}\t{name}\n".encode())


def _wrapped(f: Callable[..., Any], name: str) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(f):

        async def counted_async(*args: Any, **kwargs: Any) -> Any:
            _hit(name)
            return await f(*args, **kwargs)

        return functools.wraps(f)(counted_async)

    def counted(*args: Any, **kwargs: Any) -> Any:
        _hit(name)
        return f(*args, **kwargs)

    return functools.wraps(f)(counted)


def _wrap_module(module: types.ModuleType) -> None:
    """Count calls of the module's own functions and its classes' own methods."""
    if getattr(module, "__store_probe__", False):
        return
    file = f"{module.__name__.removeprefix(PACKAGE).lstrip('.').replace('.', '/') or '__init__'}.py"
    for attr, value in list(vars(module).items()):
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            setattr(module, attr, _wrapped(value, f"{file}:{value.__qualname__}"))
        elif isinstance(value, type) and value.__module__ == module.__name__:
            for key, member in list(vars(value).items()):
                if key.startswith("__") and key.endswith("__"):
                    continue
                if isinstance(member, staticmethod | classmethod):
                    inner = _wrapped(member.__func__, f"{file}:{member.__func__.__qualname__}")
                    setattr(value, key, type(member)(inner))
                elif inspect.isfunction(member):
                    setattr(value, key, _wrapped(member, f"{file}:{member.__qualname__}"))
    module.__store_probe__ = True  # type: ignore[attr-defined]


class _Finder(importlib.abc.MetaPathFinder):
    """Finds the store's SQLite modules as the path finder would, and wraps them once run."""

    def find_spec(
        self, name: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> ModuleSpec | None:
        if name != PACKAGE and not name.startswith(PACKAGE + "."):
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        loader = spec.loader if spec is not None else None
        if spec is None or loader is None or not hasattr(loader, "exec_module"):
            return spec
        run = loader.exec_module

        def exec_module(module: types.ModuleType) -> None:
            run(module)
            _wrap_module(module)

        loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def install(record: str) -> None:
    """Start counting in this process: modules loaded from now on, and those already."""
    global _record
    if _record:
        return
    _record = record
    sys.meta_path.insert(0, _Finder())
    for name, module in list(sys.modules.items()):
        if module is not None and (name == PACKAGE or name.startswith(PACKAGE + ".")):
            _wrap_module(module)
