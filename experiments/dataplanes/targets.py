"""Data-plane targets: what a target offers the bring-up, the runner and the faults.

A target turns the static tables (controller/tables.py) into a running data plane. It
names the Mininet class of its switches and their parameters, writes every table once
(`program()` returns the number of writes, so the run summary can show that nothing is
written again while traffic runs), and implements the switch and link faults:
- `KernelTarget` (experiments/dataplanes/kernel_target.py): switches are Linux router namespaces;
  tables become `ip -6` routes;
- `Bmv2Target` (experiments/dataplanes/bmv2_target.py): the P4 program on one simple_switch_grpc
  per switch, programmed over P4Runtime.

Each fault kind applies itself (experiments/faults/kinds/) through these primitives:
a link both ways is `set_link`, a switch down or rebooted is `reboot`, a silent switch
`blackhole`, a link slowed to a share of its rate `set_rate` (the single-plane twin's
part of a fault of some of the planes' links it stands for). Hosts are Linux namespaces
on every target (experiments/run/fabric.py configures them), so a host port fault is
the same everywhere; so are the loss faults and a one-way cut, written into the eBPF
switch program's maps on the ports that send the packets
(experiments/dataplanes/ebpf_switch.py): the program the kernel target runs on every
switch port, loaded in faults-only mode on a host port or, on bmv2, on the switch end
of a link (those interfaces are in the root namespace, beside BMv2, which is left
untouched).

What reads or writes the program's ports (`set_rate`, `switch_counters`, and every
fault through `apply_fault`) is handed the running fabric (experiments/run/fabric.py
`RunningFabric`, as ebpf_switch.py `Running` describes it), which keeps them; the other
primitives act on its Mininet network alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from experiments.dataplanes.kernel_target import KernelTarget
from experiments.faults import Env, Step
from topologies.model import Fabric

if TYPE_CHECKING:
    from experiments.dataplanes.ebpf_switch import Counters, Running
    from topologies.network import FabricNet, NodeParams

TARGETS = ("kernel", "bmv2")


class Target(Protocol):
    """A data-plane target, as the bring-up, the runner and the fault player use it."""

    name: str  # as in DATAPLANE= and the run summary
    switch_cls: type  # the Mininet node class of every switch
    # Whether tc shapes the switches' ports too: False when the switch queues by itself
    # (and then also marks ECN and trims on its own queues).
    shape_switch_ports: bool
    # What PFC is here: how far a pause is carried out (the summary's link_emulation).
    pfc: str

    def fabric_for(self, fabric: Fabric, calibrated: tuple[float, str] | None = None) -> Fabric:
        """The fabric this target runs: the topology's, or one with slower links where
        the switches' CPU could not keep up with the topology's rates (BMv2).
        `calibrated`: what every host together may send at once on this target as the
        calibration measured it with the agents running (Mbit/s), and where from."""

    def data_scale(self) -> float:
        """What the workload's byte counts are multiplied by on the fabric `fabric_for`
        returned: 1, or its slower links' share of the topology's rate, so that a
        scenario lasts as long as it was written for and its faults fall at the same
        points of the transfers."""

    def switch_params(self, fabric: Fabric) -> NodeParams:
        """Switch name -> keyword arguments of `switch_cls`."""

    def program(self, net: FabricNet, fabric: Fabric) -> int:
        """Write every switch's static tables once; returns the entries written."""

    def reboot(self, net: FabricNet, fabric: Fabric, switch: str, up: bool) -> int:
        """Power a switch off (tables lost, ports dark) or on again with the same
        tables; returns the entries written."""

    def blackhole(self, net: FabricNet, fabric: Fabric, switch: str, on: bool) -> None:
        """Make a switch silently drop what it should forward (links stay up), or stop."""

    def set_link(self, net: FabricNet, a: str, b: str, up: bool) -> None:
        """Fail or restore the link between nodes a and b, both ways."""

    def set_rate(self, running: Running, a: str, b: str, share: float) -> None:
        """Run the link between nodes a and b of the running fabric at `share` (above 0,
        up to 1) of its rate, both ways; 1 gives it its rate again. It stays up: nothing
        sees a carrier change."""

    def summary_fields(self) -> dict[str, object]:
        """Figures of this target for the run summary (e.g. P4Runtime write batches)."""

    def switch_counters(self, running: Running, switches: list[str] | None = None) -> Counters:
        """What every port of the running fabric (of `switches`, or of the whole fabric)
        has counted so far, node -> interface -> counter -> packets, under the names of
        controller/ebpf_config.py COUNTERS (trimming's are SONiC's); empty where the
        data plane counts nothing."""


def apply_fault(running: Running, step: Step) -> None:
    """Apply one fault step to the running fabric, on its target (the step's fault does
    it), reaching the host agents running on it now."""
    step.apply(Env(running))


def make_target(name: str, program: Path | None = None) -> Target:
    """The target called `name` (one of TARGETS). The BMv2 target compiles the P4
    program here: p4src/'s, or `program`, a P4 main file such as a lab's
    (build/labs/cli-02/p4src/mrc_switch.p4), compiled into the folder above its own
    (build/labs/cli-02/); it raises Bmv2Error when p4c fails. `program` is ignored by
    the kernel target: the caller says that it needs bmv2 (experiments/run/lifecycle.py)."""
    if name == "kernel":
        return KernelTarget()
    if name == "bmv2":
        # Imported only when asked for: it loads gRPC and the P4Runtime protobufs,
        # which a kernel run does not need.
        from experiments.dataplanes.bmv2_target import Bmv2Target

        if program is not None:
            return Bmv2Target(program.parent.parent, program)
        return Bmv2Target()
    raise ValueError(f"unknown data-plane target {name!r}: use one of {', '.join(TARGETS)}")
