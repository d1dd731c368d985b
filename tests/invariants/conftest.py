"""The integration tests' ``shardq_server`` fixture, reused here (imported, not copied).

``tests/integration`` is not a package, so its conftest is loaded by file path under a
name of its own; pytest registers the fixture because this module imports it.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_PATH = Path(__file__).resolve().parents[1] / "integration" / "conftest.py"
_NAME = "shardq_integration_conftest"


def _load() -> ModuleType:
    module = sys.modules.get(_NAME)
    if module is None:
        spec = importlib.util.spec_from_file_location(_NAME, _PATH)
        assert spec is not None and spec.loader is not None, _PATH
        module = importlib.util.module_from_spec(spec)
        sys.modules[_NAME] = module  # before running it: its dataclasses look themselves up
        spec.loader.exec_module(module)
    return module


shardq_server = _load().shardq_server
