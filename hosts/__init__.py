"""Hosts: the MRC protocol (its facts in `protocol`, the wire codec, sender, receiver, EV
set, congestion window, pacing), the single-path baseline, the agent process that runs
them on a host's plane sockets, and an in-process simulated network for tests."""
