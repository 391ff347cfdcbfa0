"""p4c-bm2-ss compiles p4src/ and its P4Info has what the controller writes to."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.bmv2_entries import table_entries
from controller.p4info import P4Info
from controller.tables import all_tables
from topologies.model import load_topology

FIXTURE = Path(__file__).parents[1] / "unit" / "fixtures" / "mrc_switch.p4info.txtpb"


@pytest.mark.compile_only
def test_program_compiles_and_matches_the_controller(tmp_path):
    from experiments.dataplanes.bmv2_target import compile_program

    p4info_path, json_path = compile_program(tmp_path)
    assert json_path.stat().st_size > 0
    compiled = P4Info.load(p4info_path)
    fixture = P4Info.load(FIXTURE)
    for name, table in fixture.tables.items():
        fields = [(m.name, m.bitwidth) for m in compiled.table(name).match_fields]
        assert fields == [(m.name, m.bitwidth) for m in table.match_fields], name
    for name, action in fixture.actions.items():
        params = [(p.name, p.bitwidth) for p in compiled.action(name).params]
        assert params == [(p.name, p.bitwidth) for p in action.params], name
    assert set(fixture.counters) <= set(compiled.counters)
    # Every entry of every switch of the reference topology encodes against it.
    for tables in all_tables(load_topology("2tier-8plane")).values():
        assert len(table_entries(compiled, tables)) == tables.entry_count
