"""The test suite's own layout: pytest imports test files by their base name (the test
folders are not packages), so two files with one name in different folders stop the
whole collection ("import file mismatch")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_file_name_is_unique_across_the_test_folders():
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert not [name for name, count in names.items() if count > 1]
