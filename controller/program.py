"""Program one P4 switch: push the pipeline, write every static entry once, confirm.

`program_switch()` is what the BMv2 target calls for each switch at start-up and after
a switch reboot (the same entries again). One WriteRequest carries the switch's whole
static state; the entries are then read back and compared, so a switch that silently
dropped an entry is caught before traffic starts. The result counts write batches:
the run summary shows that nothing else is written while traffic runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from controller.bmv2_entries import table_entries, write_request
from controller.p4info import P4Info
from controller.p4runtime_session import P4RuntimeError, SwitchSession
from controller.tables import SwitchTables

# The P4 program's per-port counters by the names the eBPF switch gives the same
# counts (controller/ebpf_config.py COUNTERS); all by egress port but `pfc_xoff_tx` and
# `unroutable`, by ingress port.
COUNTERS = {
    "forwarded": "MrcIngress.forwarded",
    "trim_pkts": "MrcIngress.trim_pkts",
    "tx_trim_pkts": "MrcEgress.tx_trim_pkts",
    "dropped_trim_pkts": "MrcIngress.dropped_trim_pkts",
    "ecn_marked": "MrcEgress.ecn_marked",
    "dropped": "MrcIngress.dropped",
    "pfc_xoff_tx": "MrcIngress.pfc_xoff_tx",
    "unroutable": "MrcIngress.unroutable",
}


@dataclass(frozen=True)
class ProgramResult:
    switch: str
    write_batches: int
    entries: int


def _key(entry) -> bytes:
    copy = type(entry)()
    copy.CopyFrom(entry)
    copy.ClearField("counter_data")  # read-back carries direct counters
    return copy.SerializeToString(deterministic=True)


def program_switch(address: str, device_id: int, p4info: P4Info, device_config: bytes,
                   tables: SwitchTables, log_path: str | Path | None = None,
                   election_id: int = 1, timeout_s: float = 15.0) -> ProgramResult:
    entries = table_entries(p4info, tables)
    with SwitchSession(address, device_id, election_id, log_path, timeout_s) as session:
        session.set_pipeline(p4info, device_config)
        session.write(write_request(device_id, election_id, entries))
        found = {_key(e) for e in session.read_table_entries()}
        missing = [e for e in entries if _key(e) not in found]
        if missing or len(found) != len(entries):
            raise P4RuntimeError(f"switch {tables.switch}: read back {len(found)} entries, "
                                 f"wrote {len(entries)}, {len(missing)} missing")
        return ProgramResult(tables.switch, session.write_batches, len(entries))


def read_counters(address: str, device_id: int, p4info: P4Info,
                  timeout_s: float = 5.0) -> dict[str, dict[int, int]]:
    """Per-port counters of a running switch, {name: {port: packets}} (reads only; it
    stays as programmed)."""
    with SwitchSession(address, device_id, election_id=2, timeout_s=timeout_s) as session:
        return {name: session.read_counter(p4info.counter_id(counter))
                for name, counter in COUNTERS.items()}
