"""Both senders implement hosts/transport.py's TransportSender, the one protocol the
endpoint drives them through: every method it names, with parameters the endpoint can
pass, and the attributes it reads."""

from __future__ import annotations

import inspect

import pytest

from hosts.baseline import RoceSender
from hosts.config import ProtocolConfig
from hosts.sender import Sender
from hosts.transport import TransportSender
from topologies.model import load_topology

MEMBERS = [name for name, value in vars(TransportSender).items()
           if not name.startswith("_") and (callable(value) or isinstance(value, property))]


def _senders():
    fabric = load_topology("2tier-2plane")
    config = ProtocolConfig()
    mrc = Sender(0, 1, 7, 2, 4, config, lambda e: None, lambda *a: None, seed=1)
    roce = RoceSender(0, 1, 7, fabric, config, lambda e: None, lambda *a: None, qps=2)
    return {"mrc": mrc, "roce": roce}


def test_the_protocol_names_what_the_endpoint_calls():
    assert {"poll", "on_sack", "on_nack", "on_cnp", "on_probe_reply", "remote_ports",
            "retired_paths", "path_states", "busy", "timer_at"} <= set(MEMBERS)


@pytest.mark.parametrize("kind", ["mrc", "roce"])
def test_each_sender_has_every_member_with_compatible_parameters(kind):
    sender = _senders()[kind]
    for name in MEMBERS:
        wanted = vars(TransportSender)[name]
        have = getattr(type(sender), name, None)
        assert have is not None, f"{type(sender).__name__} lacks {name}"
        if isinstance(wanted, property):
            assert isinstance(have, property), f"{name} should be a property"
            continue
        want_params = list(inspect.signature(wanted).parameters)
        have_params = list(inspect.signature(have).parameters)
        assert have_params[:len(want_params)] == want_params, (name, have_params)
    for attr in TransportSender.__annotations__:
        assert hasattr(sender, attr), f"{type(sender).__name__} lacks {attr}"


@pytest.mark.parametrize("kind", ["mrc", "roce"])
def test_path_states_and_retired_paths_answer_for_a_fresh_connection(kind):
    sender = _senders()[kind]
    states = sender.path_states(4)
    assert states and all({"ev", "plane", "path", "state", "active"} <= set(s) for s in states)
    assert all(0 <= s["path"] < 4 for s in states)
    assert sender.retired_paths() == 0
