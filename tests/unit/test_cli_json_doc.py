"""docs/cli-json.md against the code: every command's ``--json`` shape is documented,
each documented shape's keys are exactly what the command prints, and the exit codes
listed are the CLI's. (``tests/integration/test_cli_json_output.py`` holds the page
to what real commands print.)"""

from __future__ import annotations

import re

from pydantic import BaseModel

from hyperhive.cli.exits import ExitCode
from hyperhive.cli.output import json_exemption, json_shape
from tests.support.clidoc import commands, keys, models_in, read_doc, render


def test_every_command_declares_a_json_shape_or_why_it_has_none() -> None:
    for path, cmd in commands():
        shape, why = json_shape(cmd), json_exemption(cmd)
        assert (shape is None) != (why is None), f"{path}: a shape or an exemption, exactly one"
        if shape is not None:
            assert any(p.name == "as_json" for p in cmd.params), f"{path} lacks --json"


def test_every_shape_is_documented_as_the_command_prints_it() -> None:
    doc = read_doc()
    declared = {p: render(json_shape(c)) for p, c in commands() if json_shape(c) is not None}
    assert doc.shapes == declared
    assert doc.exempt == {p for p, c in commands() if json_exemption(c) is not None}


def test_each_documented_shape_has_exactly_the_keys_printed() -> None:
    tables = read_doc().tables
    models: dict[str, type[BaseModel]] = {}
    for _, cmd in commands():
        models_in(json_shape(cmd), models)
    assert set(tables) == set(models), "shapes documented vs printed"
    for name, model in models.items():
        assert tables[name] == keys(model), f"{name}: documented keys vs printed keys"


def test_the_exit_codes_documented_are_the_clis() -> None:
    rows = dict(re.findall(r"^\| `(\d)` \| ([a-z ]+) \|", read_doc().exit_codes, flags=re.M))
    assert {int(code): name.replace(" ", "_").upper() for code, name in rows.items()} == {
        c.value: c.name for c in ExitCode
    }
