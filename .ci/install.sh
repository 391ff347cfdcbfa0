#!/usr/bin/env bash
# Install what mrc-testbed needs on Debian 12 / Ubuntu 22.04+, idempotently:
#   - Debian/Ubuntu packages: Mininet, iproute2, Python venv support, tcpdump and tshark
#     (packet captures and the Wireshark dissector), ping and ethtool (Mininet's own
#     commands in `make cli`);
#   - .venv: a virtualenv from the system Python with --system-site-packages (Mininet's
#     Python module comes from the distribution package), plus requirements-dev.txt;
#   - with --with-p4 (Ubuntu 22.04): BMv2 and p4c from the p4lang packages.
# Used by `make deps`, the Vagrant VM and CI. Re-running it does nothing new.
set -euo pipefail
cd "$(dirname "$0")/.."

with_p4=0
for arg in "$@"; do
  case "$arg" in
    --with-p4) with_p4=1 ;;
    *) echo "install.sh: unknown option $arg (use --with-p4)" >&2; exit 2 ;;
  esac
done

as_root() {
  if [ "$(id -u)" -eq 0 ]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
    echo "install.sh: missing packages need root; run: sudo $0" >&2; exit 2; fi
}

packages=(mininet iproute2 python3 python3-venv python3-pip procps kmod tcpdump tshark)
# Mininet's own commands in `make cli`: ping and ping6 (iperf 2 and telnet, which its
# iperf waits with, come with the mininet package); ethtool keeps the hosts' frames
# within one MTU (docs/cli.md).
packages+=(iputils-ping ethtool)
# make bench's C yardstick: netsniff-ng's trafgen sends down the fabric's paths without
# Python (bench/trafgen.py).
packages+=(netsniff-ng)
# A fabric split across servers is reached over ssh; on one machine, namespace servers
# each run an sshd of their own (topologies/nsserver.py). The distribution's own ssh
# service is left as the package sets it up.
packages+=(openssh-client openssh-server)
# simple_switch_CLI (wherever BMv2 came from) runs under the venv's Python, which takes
# Thrift from the distribution.
if command -v simple_switch_CLI >/dev/null; then packages+=(python3-thrift); fi
# The kernel data plane's eBPF switch (ebpf/): clang and libbpf's headers build it,
# bpftool finds and fills its maps. Debian ships bpftool on its own; Ubuntu in
# linux-tools. Without them a run goes on and says what it cannot emulate.
. /etc/os-release
if [ "${ID:-}" = ubuntu ]; then
  packages+=(clang llvm libbpf-dev linux-tools-common "linux-tools-$(uname -r)")
else
  packages+=(clang llvm libbpf-dev bpftool)
fi
missing=()
for pkg in "${packages[@]}"; do
  dpkg -s "$pkg" >/dev/null 2>&1 || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "install: apt packages ${missing[*]}"
  as_root apt-get update -qq
  # tshark's package asks whether non-root users may capture; answer "no" up front.
  echo "wireshark-common wireshark-common/install-setuid boolean false" \
    | as_root debconf-set-selections
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" \
    || { echo "install: some apt packages did not install (${missing[*]}); installing the rest one by one" >&2
         for pkg in "${missing[@]}"; do
           as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "$pkg" \
             || echo "install: $pkg is not available here" >&2
         done; }
fi

# BMv2 and p4c come from the p4lang projects on the openSUSE Build Service, built for
# Ubuntu (22.04 is the newest release they cover). home:p4lang:latest carries the latest
# tagged releases; the older home:p4lang is the fallback when that one cannot be used.
p4lang_install() {
  local url="http://download.opensuse.org/repositories/$1/xUbuntu_${VERSION_ID}/"
  echo "install: p4lang packages (p4c, BMv2, PI) from $1"
  echo "deb ${url} /" | as_root tee /etc/apt/sources.list.d/mrc-testbed-p4lang.list >/dev/null
  curl -fsSL "${url}Release.key" | gpg --dearmor \
    | as_root tee /etc/apt/trusted.gpg.d/mrc-testbed-p4lang.gpg >/dev/null || return 1
  as_root apt-get update -qq || return 1
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
    p4lang-pi p4lang-bmv2 p4lang-p4c python3-thrift || return 1
}

p4_tools=(simple_switch_grpc simple_switch_CLI p4c-bm2-ss)
p4_missing() {
  for tool in "${p4_tools[@]}"; do command -v "$tool" >/dev/null || return 0; done
  return 1
}

if [ "$with_p4" -eq 1 ] && p4_missing; then
  . /etc/os-release
  if [ "${ID:-}" != ubuntu ]; then
    echo "install: the p4lang packages are built for Ubuntu (22.04); this is ${PRETTY_NAME:-unknown}" >&2
    exit 2
  fi
  as_root apt-get install -y -qq --no-install-recommends curl gnupg ca-certificates
  for project in "home:/p4lang:/latest" "home:/p4lang"; do
    if p4lang_install "$project" && ! p4_missing; then
      break
    fi
    echo "install: the packages of $project did not install; trying the next project" >&2
    as_root rm -f /etc/apt/sources.list.d/mrc-testbed-p4lang.list
  done
  if p4_missing; then
    echo "install: could not install ${p4_tools[*]} from the p4lang packages for Ubuntu ${VERSION_ID}" >&2
    exit 2
  fi
fi

# The venv is made from the distribution's Python, whose site-packages hold Mininet.
system_python=/usr/bin/python3
if [ ! -x .venv/bin/python ]; then
  echo "install: .venv from $system_python"
  "$system_python" -m venv --system-site-packages .venv
fi
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-dev.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "install: Python packages (requirements-dev.txt)"
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-dev.txt
  echo "$want" > "$stamp"
fi
