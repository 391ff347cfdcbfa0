"""Choose the data plane: `bmv2` (the P4 switch) or `kernel` (Linux SRv6), and say why.

A data plane that cannot run here is a `DataplaneError` (a `UserError` whose source is
the `DATAPLANE=` setting) with the fix in the same line.
"""

from __future__ import annotations

import platform
import re
import shutil

from topologies.errors import UserError

BMV2_TOOLS = ("simple_switch_grpc", "p4c-bm2-ss")
KERNEL_MIN = (6, 1)  # SRv6 End with the NEXT-C-SID flavor (uSID shift-and-forward)


class DataplaneError(UserError):
    """The requested data plane cannot run here. The message is one line."""


def kernel_version(release: str | None = None) -> tuple[int, int]:
    match = re.match(r"(\d+)\.(\d+)", release or platform.release())
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


def missing_bmv2_tools() -> list[str]:
    return [tool for tool in BMV2_TOOLS if shutil.which(tool) is None]


def choose(requested: str, release: str | None = None) -> tuple[str, str]:
    """Return (data plane, reason). Raises DataplaneError with a one-line fix."""
    version = kernel_version(release)
    kernel_ok = version >= KERNEL_MIN
    kernel_text = f"Linux {version[0]}.{version[1]}"
    need = f"Linux >= {KERNEL_MIN[0]}.{KERNEL_MIN[1]} (SRv6 NEXT-C-SID)"
    missing = missing_bmv2_tools()
    if requested == "bmv2":
        if missing:
            raise DataplaneError(
                "DATAPLANE=bmv2", "", f"{' and '.join(missing)} not found on PATH",
                "install the p4lang packages (.ci/install.sh --with-p4, or use the Vagrant "
                "VM), or use DATAPLANE=kernel")
        return "bmv2", "requested"
    if requested == "kernel":
        if not kernel_ok:
            raise DataplaneError(
                "DATAPLANE=kernel", "", f"this machine runs {kernel_text}, the kernel target "
                f"needs {need}", "use DATAPLANE=bmv2, or boot a newer kernel "
                "(Ubuntu 22.04: apt install linux-generic-hwe-22.04)")
        return "kernel", "requested"
    if requested != "auto":
        raise DataplaneError(f"DATAPLANE={requested}", "", "unknown data plane",
                             "use auto, kernel or bmv2")
    if not missing:
        return "bmv2", "auto: simple_switch_grpc and p4c-bm2-ss found"
    if kernel_ok:
        return "kernel", (f"auto: {' and '.join(missing)} not found; "
                          f"{kernel_text} has SRv6 NEXT-C-SID")
    raise DataplaneError(
        "DATAPLANE=auto", "", f"no data plane here ({' and '.join(missing)} not found, and "
        f"{kernel_text} is older than the kernel target needs, {need})",
        "install the p4lang packages (.ci/install.sh --with-p4) or use a newer kernel")
