"""The data planes a fabric runs on: choosing one, the BMv2 and kernel targets, the eBPF
switch program and PFC on a live fabric, the single-plane twin of the RoCE baseline, and
what routing tells the baseline's hosts of a fault."""
