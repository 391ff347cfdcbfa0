"""P4Info access: names to ids, and P4Runtime value encoding.

Loads the P4Info that p4c-bm2-ss writes next to the BMv2 JSON (text format) and
answers the questions the entry builder asks: the id of a table, of a match field, of
an action and of its parameters, and their bit widths. Values are encoded as P4Runtime
wants them: big-endian, in the fewest bytes that hold the value (canonical form).
Unknown names raise `P4InfoError`, which names what was asked and what exists.
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import text_format
from p4.config.v1 import p4info_pb2


class P4InfoError(KeyError):
    """A table, field, action or parameter the P4Info does not have."""

    def __str__(self) -> str:
        return str(self.args[0])


def encode(value: int, bitwidth: int) -> bytes:
    """Canonical P4Runtime bytes of an unsigned value of `bitwidth` bits."""
    if value < 0 or value >= 1 << bitwidth:
        raise ValueError(f"{value} does not fit in {bitwidth} bits")
    return value.to_bytes(max(1, (value.bit_length() + 7) // 8), "big")


def mac_value(mac: str) -> int:
    return int(mac.replace(":", ""), 16)


class P4Info:
    def __init__(self, info: p4info_pb2.P4Info):
        self.info = info
        self.tables = {t.preamble.name: t for t in info.tables}
        self.actions = {a.preamble.name: a for a in info.actions}
        self.counters = {c.preamble.name: c for c in info.counters}

    @classmethod
    def load(cls, path: str | Path) -> P4Info:
        info = p4info_pb2.P4Info()
        text_format.Parse(Path(path).read_text(), info)
        return cls(info)

    def table(self, name: str):
        try:
            return self.tables[name]
        except KeyError:
            raise P4InfoError(f"no table {name!r} in the P4Info (has: "
                              f"{', '.join(sorted(self.tables))})") from None

    def match_field(self, table: str, field: str):
        for match in self.table(table).match_fields:
            if match.name == field:
                return match
        raise P4InfoError(f"table {table!r} has no match field {field!r}")

    def action(self, name: str):
        try:
            return self.actions[name]
        except KeyError:
            raise P4InfoError(f"no action {name!r} in the P4Info") from None

    def param(self, action: str, name: str):
        for param in self.action(action).params:
            if param.name == name:
                return param
        raise P4InfoError(f"action {action!r} has no parameter {name!r}")

    def counter_id(self, name: str) -> int:
        try:
            return self.counters[name].preamble.id
        except KeyError:
            raise P4InfoError(f"no counter {name!r} in the P4Info") from None
