"""The controller: static switch tables from the topology, and how they are written.

`tables` computes each switch's tables (a pure function of the topology); `kernel`
turns them into `ip` commands for Linux nodes, `bmv2_entries` into P4Runtime entries
that `program` writes through a `p4runtime_session`. Nothing here imports Mininet: the
data-plane targets in experiments/ hand what this package builds to the nodes.
"""
