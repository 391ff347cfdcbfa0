"""Static tables -> P4Runtime table entries for the P4 switch (pure, no I/O).

The same `SwitchTables` that the kernel target turns into routes (controller/tables.py)
become, for p4src/mrc_switch.p4:

- `MrcIngress.my_usid`: (block, own uSID) -> usid_shift         one entry
- `MrcIngress.next_hop`: (block, next uSID) -> set_next_hop(port, dmac)   one per route
- `MrcIngress.port_config`: egress port -> set_port_config(mac, host_facing, ECN and
  trim thresholds)                                               one per port
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from controller.p4info import P4Info, encode, mac_value
from controller.tables import SwitchTables
from topologies.addressing import LOCATOR_BLOCK

MY_USID = "MrcIngress.my_usid"
NEXT_HOP = "MrcIngress.next_hop"
PORT_CONFIG = "MrcIngress.port_config"
BLOCK_FIELD = "hdr.ipv6.dst_block"
ACTIVE_FIELD = "hdr.ipv6.dst_active"
PORT_FIELD = "standard_metadata.egress_spec"


def _entry(p4info: P4Info, table: str, matches: dict[str, int], action: str,
           params: dict[str, int]) -> p4runtime_pb2.TableEntry:
    entry = p4runtime_pb2.TableEntry(table_id=p4info.table(table).preamble.id)
    for name, value in matches.items():
        field = p4info.match_field(table, name)
        match = entry.match.add(field_id=field.id)
        match.exact.value = encode(value, field.bitwidth)
    entry.action.action.action_id = p4info.action(action).preamble.id
    for name, value in params.items():
        param = p4info.param(action, name)
        entry.action.action.params.add(param_id=param.id, value=encode(value, param.bitwidth))
    return entry


def table_entries(p4info: P4Info, tables: SwitchTables) -> list[p4runtime_pb2.TableEntry]:
    entries = [_entry(p4info, MY_USID, {BLOCK_FIELD: LOCATOR_BLOCK, ACTIVE_FIELD: tables.my_usid},
                      "MrcIngress.usid_shift", {})]
    for route in tables.routes:
        entries.append(_entry(p4info, NEXT_HOP,
                              {BLOCK_FIELD: LOCATOR_BLOCK, ACTIVE_FIELD: route.usid},
                              "MrcIngress.set_next_hop",
                              {"port": route.port, "dmac": mac_value(route.next_hop_mac)}))
    for port in tables.ports:
        entries.append(_entry(p4info, PORT_CONFIG, {PORT_FIELD: port.port},
                              "MrcIngress.set_port_config",
                              {"port_mac": mac_value(port.mac),
                               "host_facing": int(port.host_facing),
                               "ecn_threshold": tables.ecn_threshold_pkts,
                               "trim_threshold": tables.trim_threshold_pkts}))
    return entries


def write_request(device_id: int, election_id: int,
                  entries: list[p4runtime_pb2.TableEntry]) -> p4runtime_pb2.WriteRequest:
    """One WriteRequest that inserts every entry: the switch's whole static state."""
    request = p4runtime_pb2.WriteRequest(device_id=device_id)
    request.election_id.low = election_id
    for entry in entries:
        update = request.updates.add(type=p4runtime_pb2.Update.INSERT)
        update.entity.table_entry.CopyFrom(entry)
    return request
