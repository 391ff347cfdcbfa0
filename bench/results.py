"""bench/results.json: the figures of the last `make bench`, one entry per part."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results.json"


def merge(name: str, figures: dict) -> None:
    """Put a part's figures under `name`, keeping the other parts'."""
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[name] = figures
    RESULTS.write_text(json.dumps(data, indent=2) + "\n")
