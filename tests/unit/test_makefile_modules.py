"""Every Python module a Makefile runs or imports exists, with the names it imports.

A module moved or renamed leaves a `make` target that fails only when someone runs it
(`make ebpf` once imported a module by its old name). The Makefiles are read as text.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
MAKEFILES = sorted([REPO / "Makefile", *REPO.glob("*/Makefile")])
RUN = re.compile(r"(?:python3?|\$\(PY\))\s+-m\s+([\w.]+)")
IMPORT = re.compile(r"from\s+([\w.]+)\s+import\s+(\w+(?:\s+as\s+\w+)?(?:\s*,\s*\w+)*)")
TOOLS = {"pytest", "ruff"}  # run as modules, installed, not the project's


def _named() -> list[tuple[str, str, list[str]]]:
    found = []
    for makefile in MAKEFILES:
        text = makefile.read_text().replace("\\\n", " ")
        where = str(makefile.relative_to(REPO))
        found += [(where, module, []) for module in RUN.findall(text) if module not in TOOLS]
        found += [(where, module, [n.split()[0] for n in names.split(",")])
                  for module, names in IMPORT.findall(text)]
    return found


def test_the_makefiles_name_modules():
    assert {module for _, module, _ in _named()} >= {"experiments", "topologies.ebpf_program"}


@pytest.mark.parametrize("where,module,names", _named(),
                         ids=lambda v: v if isinstance(v, str) else None)
def test_each_module_a_makefile_names_exists(where, module, names):
    assert importlib.util.find_spec(module) is not None, f"{where}: no module {module}"
    loaded = importlib.import_module(module) if names else None
    for name in names:  # a name in the module, or a module in the package
        assert hasattr(loaded, name) or importlib.util.find_spec(f"{module}.{name}"), \
            f"{where}: {module} has no {name}"
