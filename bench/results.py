"""bench/results.json: the figures of the last `make bench`, one entry per part."""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.json"


def merge(name: str, figures: dict) -> None:
    """Put a part's figures under `name`, keeping the other parts'."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[name] = figures
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")


def run_part(name: str, part: Callable[[Path, object], dict]) -> int:
    """A bench part's main: `part(scratch folder, fabric lock)` under the machine's
    fabric lock, its figures merged under `name`; 2 if a run holds the machine."""
    from experiments.run.fabric_lock import FabricBusy, FabricLock

    try:
        with FabricLock(f"make bench: {name}") as lock, tempfile.TemporaryDirectory() as tmp:
            figures = part(Path(tmp), lock)
    except FabricBusy as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    merge(name, figures)
    return 0
