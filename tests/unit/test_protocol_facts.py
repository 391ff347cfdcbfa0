"""Every protocol fact has one home, hosts/protocol.py, and the others agree with it.

- The P4 program repeats what a switch needs as `const`s in p4src/include/headers.p4:
  each is checked against its twin in hosts/protocol.py (no p4c needed), and a new
  constant without a twin fails unless it is listed as the switch's own.
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


def python_twin(name: str) -> str:
    """The name in hosts/protocol.py of a P4 constant: MRC_TYPE_X is X, MRC_FLAG_X is
    F_X, MRC_VERSION is VERSION; anything else has the same name."""
    if name.startswith("MRC_TYPE_"):
        return name.removeprefix("MRC_TYPE_")
    if name.startswith("MRC_FLAG_"):
        return "F_" + name.removeprefix("MRC_FLAG_")
    if name == "MRC_VERSION":
        return "VERSION"
    return name


def test_headers_p4_is_parsed():
    # A change of syntax the pattern misses must not pass as "no constants to check".
    assert {"MRC_UDP_PORT", "MRC_TYPE_DATA", "TRIMMED_FRAME_BYTES"} <= set(p4_constants())


@pytest.mark.parametrize("name", sorted(set(p4_constants()) - set(SWITCH_ONLY)))
def test_each_p4_constant_equals_its_python_twin(name):
    width, value = p4_constants()[name]
    twin = python_twin(name)
    assert hasattr(protocol, twin), (
        f"headers.p4 constant {name} has no twin {twin} in hosts/protocol.py; add it "
        "there, or list it in SWITCH_ONLY with the reason")
    assert value == getattr(protocol, twin), f"{name} = {value} in headers.p4"
    assert getattr(protocol, twin) < 1 << width, f"{twin} does not fit bit<{width}>"


def test_every_type_and_flag_is_known_to_the_switch():
    consts = p4_constants()
    for kind, name in protocol.TYPE_NAMES.items():
        assert consts.get(f"MRC_TYPE_{name}", (0, None))[1] == kind, name
    for flag, name in protocol.FLAG_NAMES.items():
        if flag in protocol.HOST_ONLY_FLAGS:
            # Only hosts read it; headers.p4 may still name it, with the same value.
            assert consts.get(f"MRC_FLAG_{name}", (0, flag))[1] == flag, name
            continue
        assert consts.get(f"MRC_FLAG_{name}", (0, None))[1] == flag, name


def test_flag_bits_are_distinct_single_bits():
    bits = list(protocol.FLAG_NAMES)
    assert len(set(bits)) == len(bits) and all(b and b & (b - 1) == 0 and b < 0x100
                                                for b in bits)
    assert protocol.HOST_ONLY_FLAGS <= set(bits)


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
                    "udp_t": 8 * protocol.UDP_HEADER_BYTES,
                    "mrc_t": 8 * protocol.MRC_HEADER_BYTES}
    assert wire.HEADER.size == protocol.MRC_HEADER_BYTES
    assert wire.CONTROL.size == protocol.CONTROL_BODY_BYTES
    assert len(MRC()) == protocol.MRC_HEADER_BYTES
    assert len(MRCControl()) == protocol.CONTROL_BODY_BYTES
    assert 8 * wire.CONTROL.size - 8 * 16 == protocol.BITMAP_BITS  # the Q field


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
    assert protocol.traffic_class(protocol.DSCP_TRIMMABLE, protocol.ECN_ECT0) >> 2 \
        == protocol.DSCP_TRIMMABLE
    assert protocol.traffic_class(0, protocol.ECN_CE) & protocol.ECN_MASK == protocol.ECN_CE
    assert protocol.DSCP_TRIMMABLE != protocol.DSCP_NO_TRIM
    assert all(protocol.transport_spec(t).data_dscp in (
        protocol.DSCP_NO_TRIM, protocol.DSCP_TRIMMABLE, protocol.DSCP_ROCE)
        for t in protocol.TRANSPORTS)


def test_each_transport_rides_the_class_of_its_ecn_and_trimming_rules():
    # Three classes, three switch rules: a shared value would make a switch treat one
    # transport by another's rules.
    classes = (protocol.DSCP_NO_TRIM, protocol.DSCP_TRIMMABLE, protocol.DSCP_ROCE)
    assert len(set(classes)) == 3 and all(0 <= dscp < 64 for dscp in classes)
    # The baseline is RoCE: never trimmed, marked at every hop (DCQCN).
    specs = [protocol.transport_spec(t) for t in protocol.TRANSPORTS]
    baselines = [s for s in specs if s.baseline]
    assert len(baselines) == len(protocol.TRANSPORTS) - len(protocol.MRC_TRANSPORTS)
    for spec in baselines:
        assert spec.data_dscp == protocol.DSCP_ROCE and not spec.trims
    # Every MRC transport stays out of the RoCE class, mrc-no-trim included: it is MRC
    # without trimming, not a RoCE flow.
    mrc = [s for s in specs if not s.baseline]
    assert mrc and all(s.data_dscp != protocol.DSCP_ROCE for s in mrc)
    assert protocol.transport_spec("mrc-no-trim").data_dscp == protocol.DSCP_NO_TRIM
    assert protocol.transport_spec("mrc").trims
    assert not protocol.transport_spec("mrc-no-trim").trims
    assert protocol.CONTROL_DSCP != protocol.DSCP_ROCE


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
