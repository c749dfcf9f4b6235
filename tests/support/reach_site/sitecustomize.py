"""On ``PYTHONPATH`` during a recording run only (tests/support/store_reach.py): every
Python process of the run, the tests' own and those they start, loads the store probe."""

import importlib.util
import os
import sys

if record := os.environ.get("HH_STORE_REACH_RECORD"):
    _path = os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "store_probe.py"
    )
    _spec = importlib.util.spec_from_file_location("hh_store_probe", _path)
    if _spec is not None and _spec.loader is not None:
        _probe = importlib.util.module_from_spec(_spec)
        sys.modules["hh_store_probe"] = _probe
        _spec.loader.exec_module(_probe)
        _probe.install(record)
