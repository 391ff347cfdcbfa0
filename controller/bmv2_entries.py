"""Static tables -> P4Runtime table entries for the P4 switch (pure, no I/O).

The same `SwitchTables` that the kernel target turns into routes (controller/tables.py)
become, for p4src/mrc_switch.p4:

- `MrcIngress.my_usid`: (block, own uSID) -> usid_shift         one entry
- `MrcIngress.next_hop`: (block, next uSID) -> set_next_hop(port, dmac)   one per route
- `MrcIngress.port_config`: egress port -> set_port_config(mac, host_facing, RED's
  thresholds and slope, trim threshold, size and DSCP, queue limits)   one per port
- `MrcIngress.pfc_config`: ingress port -> set_pfc_thresholds(xoff, xon)   one per port
- `MrcIngress.dscp_class`: DSCP -> set_behaviour(behaviour)     one per traffic class
"""

from __future__ import annotations

from p4.v1 import p4runtime_pb2

from controller.p4info import P4Info, encode, mac_value
from controller.tables import SwitchTables
from topologies.addressing import LOCATOR_BLOCK

MY_USID = "MrcIngress.my_usid"
NEXT_HOP = "MrcIngress.next_hop"
PORT_CONFIG = "MrcIngress.port_config"
PFC_CONFIG = "MrcIngress.pfc_config"
DSCP_CLASS = "MrcIngress.dscp_class"
BLOCK_FIELD = "hdr.ipv6.dst_block"
ACTIVE_FIELD = "hdr.ipv6.dst_active"
PORT_FIELD = "standard_metadata.egress_spec"
INGRESS_PORT_FIELD = "standard_metadata.ingress_port"
DSCP_FIELD = "hdr.ipv6.dscp"


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
                               "ecn_kmin": port.ecn_kmin, "ecn_kmax": port.ecn_kmax,
                               "ecn_slope": port.ecn_slope,
                               "trim_threshold": port.trim_threshold,
                               "trim_size": tables.trim_size_bytes,
                               "dscp_trimmed": port.dscp_trimmed,
                               "queue_limit": port.queue,
                               "priority_limit": port.priority_limit}))
        entries.append(_entry(p4info, PFC_CONFIG, {INGRESS_PORT_FIELD: port.port},
                              "MrcIngress.set_pfc_thresholds",
                              {"xoff": port.xoff, "xon": port.xon}))
    for dscp, behaviour in sorted(tables.dscp_behaviour.items()):
        entries.append(_entry(p4info, DSCP_CLASS, {DSCP_FIELD: dscp},
                              "MrcIngress.set_behaviour", {"behaviour": behaviour}))
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
