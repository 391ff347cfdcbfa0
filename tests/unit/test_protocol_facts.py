"""Every protocol fact has one home, hosts/protocol.py, and the others agree with it.

- The P4 program repeats what a switch needs as `const`s in p4src/include/headers.p4:
  each is checked against its twin in hosts/protocol.py or, for a fact of the switches
  alone, controller/tables.py (no p4c needed), and a new constant without a twin fails
  unless it is listed as the switch's own.
- The switch knows nothing of MRC's header: headers.p4 declares none and names no
  packet type or flag.
- The header layouts of headers.p4, the struct codec and the scapy layer have the
  sizes of hosts/protocol.py.
- The Python sources never write the well-known values out again (4793, 101 as a
  socket option, 14 + 40 + 8, 94 or 1294 as frame sizes, the EV shift by 24).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

from controller import tables
from hosts import protocol, wire
from hosts.mrc_scapy import MRC, MRCControl

REPO = Path(__file__).resolve().parents[2]
HEADERS_P4 = REPO / "p4src" / "include" / "headers.p4"

# Constants of headers.p4 that are facts of Ethernet, IPv6 or the switch itself, not of
# the MRC protocol: nothing on the Python side needs them.
SWITCH_ONLY = {
    "ETHERTYPE_IPV6": "the parser's EtherType of IPv6 (the hosts' kernel sets it)",
    "IP_PROTO_UDP": "the parser's IPv6 next header for UDP (the hosts' kernel sets it)",
    "MAX_PORTS": "the size of the switch's per-port counters and registers",
}


def p4_constants() -> dict[str, tuple[int, int]]:
    """NAME -> (bit width, value) of every `const bit<N> NAME = value;` in headers.p4."""
    found = re.findall(r"const\s+bit<(\d+)>\s+(\w+)\s*=\s*(0x[0-9a-fA-F]+|\d+)\s*;",
                       HEADERS_P4.read_text())
    return {name: (int(width), int(value, 0)) for width, name, value in found}


def python_twin(name: str) -> tuple[object, str]:
    """The module and name of a P4 constant's twin: the same name in hosts/protocol.py
    or, for a fact of the switches alone, in controller/tables.py."""
    home = protocol if hasattr(protocol, name) else tables
    return home, name


def test_headers_p4_is_parsed():
    # A change of syntax the pattern misses must not pass as "no constants to check".
    assert {"BEHAVIOUR_TRIMMABLE", "PRIORITY_CONTROL", "WEYL_STEP"} <= set(p4_constants())


@pytest.mark.parametrize("name", sorted(set(p4_constants()) - set(SWITCH_ONLY)))
def test_each_p4_constant_equals_its_python_twin(name):
    width, value = p4_constants()[name]
    home, twin = python_twin(name)
    assert hasattr(home, twin), (
        f"headers.p4 constant {name} has no twin in hosts/protocol.py or "
        "controller/tables.py; add it there, or list it in SWITCH_ONLY with the reason")
    assert value == getattr(home, twin), f"{name} = {value} in headers.p4"
    assert getattr(home, twin) < 1 << width, f"{twin} does not fit bit<{width}>"


def test_every_behaviour_and_queue_is_known_to_the_switch():
    consts = p4_constants()
    for behaviour, name in enumerate(protocol.BEHAVIOUR_NAMES):
        assert consts[f"BEHAVIOUR_{name.upper()}"][1] == behaviour, name
    for queue in ("PRIORITY_CONTROL", "PRIORITY_LOSSLESS", "PRIORITY_LOSSLESS_SHORT",
                  "PRIORITY_DATA"):
        assert consts[queue][1] == getattr(protocol, queue)


def test_the_switch_knows_nothing_of_the_mrc_header():
    # A switch decides by the DSCP and reads no further than UDP (docs/protocol.md).
    text = (HEADERS_P4.parent / "parser.p4").read_text() + HEADERS_P4.read_text()
    assert not [name for name in p4_constants() if name.startswith("MRC_")]
    assert "mrc_t" not in text and "hdr.mrc" not in text
    assert "hdr.mrc" not in (REPO / "p4src" / "mrc_switch.p4").read_text()


def test_flag_bits_are_distinct_single_bits():
    bits = list(protocol.FLAG_NAMES)
    assert len(set(bits)) == len(bits) and all(b and b & (b - 1) == 0 and b < 0x100
                                                for b in bits)
    # 0x01 and 0x02 were the trimmed flags a switch wrote; they stay reserved.
    assert not {0x01, 0x02} & set(bits)


def test_switch_only_constants_exist():
    assert set(SWITCH_ONLY) <= set(p4_constants()), "SWITCH_ONLY names a removed constant"


def p4_header_bits() -> dict[str, int]:
    """header name -> its size in bits, from the field widths of headers.p4."""
    text = HEADERS_P4.read_text()
    typedefs = {name: int(width) for width, name in
                re.findall(r"typedef\s+bit<(\d+)>\s+(\w+)\s*;", text)}
    sizes = {}
    for name, body in re.findall(r"header\s+(\w+)\s*\{([^}]*)\}", text):
        bits = 0
        for kind in re.findall(r"^\s*(bit<\d+>|\w+)\s+\w+\s*;", body, re.MULTILINE):
            bits += int(kind[4:-1]) if kind.startswith("bit<") else typedefs[kind]
        sizes[name] = bits
    return sizes


def test_header_layouts_have_the_protocol_sizes():
    bits = p4_header_bits()
    assert bits == {"ethernet_t": 8 * protocol.ETHERNET_HEADER_BYTES,
                    "ipv6_t": 8 * protocol.IPV6_HEADER_BYTES,
                    "udp_t": 8 * protocol.UDP_HEADER_BYTES}
    assert wire.HEADER.size == protocol.MRC_HEADER_BYTES
    assert wire.CONTROL_BODY.size == protocol.CONTROL_BODY_BYTES
    assert len(MRC()) == protocol.MRC_HEADER_BYTES
    assert len(MRCControl()) == protocol.CONTROL_BODY_BYTES
    assert 8 * wire.CONTROL_BODY.size - 8 * 16 == protocol.BITMAP_BITS  # the Q field


def test_derived_sizes():
    assert protocol.TRIMMED_FRAME_BYTES == protocol.frame_bytes(protocol.MRC_HEADER_BYTES)
    assert protocol.DATA_FRAME_BYTES == protocol.TRIMMED_FRAME_BYTES + protocol.DEFAULT_MTU_PAYLOAD
    assert protocol.TRIMMED_L4_BYTES + protocol.IPV6_HEADER_BYTES \
        + protocol.ETHERNET_HEADER_BYTES == protocol.TRIMMED_FRAME_BYTES
    # The largest DATA packet still fits the 16-bit IPv6 payload length.
    assert protocol.UDP_HEADER_BYTES + protocol.MRC_HEADER_BYTES + protocol.MAX_PAYLOAD \
        == 0xFFFF


def test_ev_layout_round_trips():
    for plane in (0, 1, 7, 255):
        for choice in (0, 1, 12345, protocol.EV_CHOICE_MASK):
            ev = protocol.make_ev(plane, choice)
            assert (protocol.ev_plane(ev), protocol.ev_choice(ev)) == (plane, choice)
            assert ev < 1 << 32
    assert protocol.ev_choice(protocol.make_ev(1, protocol.EV_CHOICE_MASK + 5)) == 4


def test_link_rate_conversions_are_inverse():
    pps = protocol.link_pps(10, protocol.DATA_FRAME_BYTES)
    assert pps == pytest.approx(10e6 / 8 / protocol.DATA_FRAME_BYTES)
    assert protocol.link_mbit(pps, protocol.DATA_FRAME_BYTES) == pytest.approx(10)


def test_traffic_classes():
    assert protocol.traffic_class(10, protocol.ECN_ECT0) >> 2 == 10
    assert protocol.traffic_class(0, protocol.ECN_CE) & protocol.ECN_MASK == protocol.ECN_CE
    names = protocol.CLASS_NAMES
    assert len(names) == len(protocol.DEFAULT_DSCP) == len(protocol.CLASS_BEHAVIOUR)
    assert [getattr(protocol, n.upper()) for n in names] == list(range(len(names)))
    # One code point per class: a shared value would make a switch treat one class by
    # another's rules.
    assert len(set(protocol.DEFAULT_DSCP)) == len(names)
    assert all(0 <= dscp < 64 for dscp in protocol.DEFAULT_DSCP)
    behaviour = protocol.CLASS_BEHAVIOUR
    for cls in (protocol.CONTROL, protocol.TRIMMED, protocol.TRIMMED_LASTHOP,
                protocol.ROCE_CNP):
        assert behaviour[cls] == protocol.BEHAVIOUR_PRIORITY
    assert behaviour[protocol.TRIMMABLE] == behaviour[protocol.TRIMMABLE_RETX] \
        == protocol.BEHAVIOUR_TRIMMABLE
    assert behaviour[protocol.NO_TRIM] == protocol.BEHAVIOUR_BEST_EFFORT
    assert behaviour[protocol.ROCE] == protocol.BEHAVIOUR_LOSSLESS


def test_each_transport_rides_the_class_of_its_ecn_and_trimming_rules():
    specs = [protocol.transport_spec(t) for t in protocol.TRANSPORTS]
    # The baseline is RoCE: lossless, never trimmed, marked at every hop (DCQCN); its
    # acks ride its data's class.
    baselines = [s for s in specs if s.baseline]
    assert len(baselines) == len(protocol.TRANSPORTS) - len(protocol.MRC_TRANSPORTS)
    for spec in baselines:
        assert spec.data_class == spec.retransmit_class == spec.control_class \
            == protocol.ROCE and not spec.trims
    # Every MRC transport stays out of the RoCE class, mrc-no-trim included: it is MRC
    # without trimming, not a RoCE flow. Retransmissions have their own class.
    mrc = protocol.transport_spec("mrc")
    assert (mrc.data_class, mrc.retransmit_class, mrc.control_class) == (
        protocol.TRIMMABLE, protocol.TRIMMABLE_RETX, protocol.CONTROL)
    no_trim = protocol.transport_spec("mrc-no-trim")
    assert (no_trim.data_class, no_trim.retransmit_class, no_trim.control_class) == (
        protocol.NO_TRIM, protocol.NO_TRIM, protocol.CONTROL)


# ---------------------------------------------------------------------- the grep
SOURCES = ("hosts", "topologies", "controller", "experiments", "bench", "labs", "tests")
# Each pattern finds a protocol fact written out again. They run over the code with its
# comments removed (comments may explain a value); strings stay, since a string may be
# a script run elsewhere. Words (\b) keep 4793 from matching inside 47930.
LITERALS = {
    "the MRC UDP port": r"\b4793\b",
    "UDP_NO_CHECK6 as a number": r"setsockopt\([^)]*\b10[12]\b",
    "the wire overhead": r"\b14\s*\+\s*40\s*\+\s*8\b",
    "the trimmed frame size": r"(?<![.\w])94\b(?!\.)",
    "the full data frame size": r"\b1294\b",
    "the EV plane shift": r"(>>|<<)\s*24\b",
    "the EV choice mask": r"\b0x[fF]{6}\b(?![0-9a-fA-F])",
}
# Files that may hold a literal, and why.
EXCEPTIONS = {
    "hosts/protocol.py": "the one home of the facts",
    "tests/unit/test_protocol_facts.py": "the patterns of this test",
}


def code_without_comments(path: Path) -> str:
    text = path.read_text()
    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    kept = [tok for tok in tokens if tok.type != tokenize.COMMENT]
    return tokenize.untokenize(kept)


def test_no_protocol_literal_outside_the_protocol_module():
    found = []
    for root in SOURCES:
        for path in sorted((REPO / root).rglob("*.py")):
            name = path.relative_to(REPO).as_posix()
            if name in EXCEPTIONS:
                continue
            code = code_without_comments(path)
            for what, pattern in LITERALS.items():
                for match in re.finditer(pattern, code):
                    line = code.count("\n", 0, match.start()) + 1
                    found.append(f"{name}:{line}: {what} ({match.group(0)!r})")
    assert not found, "import these from hosts/protocol.py instead:\n" + "\n".join(found)


def test_the_grep_finds_what_it_looks_for():
    # Each pattern catches its literal, or the test above would prove nothing.
    samples = {
        "the MRC UDP port": "sock.bind((a, 4793))",
        "UDP_NO_CHECK6 as a number": "s.setsockopt(socket.IPPROTO_UDP, 101, 1)",
        "the wire overhead": "OVERHEAD = 14 + 40 + 8",
        "the trimmed frame size": "truncate(94)",
        "the full data frame size": "frame = 1294",
        "the EV plane shift": "plane = ev >> 24",
        "the EV choice mask": "choice = ev & 0xFFFFFF",
    }
    for what, sample in samples.items():
        assert re.search(LITERALS[what], sample), what
    assert not re.search(LITERALS["the trimmed frame size"], "x = 0.94 + a94 + 1.94")
    assert not re.search(LITERALS["the EV choice mask"], "mask = 0xFFFFFFFF")


def test_no_module_takes_a_protocol_fact_from_the_codec():
    # hosts/wire.py imports the facts it needs; reading them through it would make it a
    # second home.
    names = [n for n in vars(protocol) if n.isupper() or n in ("make_ev", "ev_plane")]
    pattern = re.compile(r"\bwire\.(" + "|".join(names) + r")\b")
    found = []
    for root in SOURCES:
        for path in sorted((REPO / root).rglob("*.py")):
            for match in pattern.finditer(code_without_comments(path)):
                found.append(f"{path.relative_to(REPO)}: wire.{match.group(1)}")
    assert not found, "use hosts.protocol:\n" + "\n".join(found)


def test_every_name_taken_from_the_protocol_module_exists():
    # Tests that need root or BMv2 do not run everywhere: a name they import from
    # hosts/protocol.py that does not exist would go unnoticed until they do.
    known = set(vars(protocol))
    found = []
    for root in SOURCES:
        for path in sorted((REPO / root).rglob("*.py")):
            tree = ast.parse(path.read_text(), str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "hosts.protocol":
                    names = [alias.name for alias in node.names]
                elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                        and node.value.id == "protocol"):
                    names = [node.attr]
                else:
                    continue
                found += [f"{path.relative_to(REPO)}:{node.lineno}: {name}"
                          for name in names if name not in known]
    assert not found, "not in hosts/protocol.py:\n" + "\n".join(found)
