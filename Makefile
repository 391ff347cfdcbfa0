# mrc-testbed: `make` lists the targets.
TOPO ?= 2tier-8plane
DATAPLANE ?= auto
SCENARIO ?= showcase
CAPTURE ?=
PY := .venv/bin/python
BUILD := build
P4_MAIN := p4src/mrc_switch.p4

.DEFAULT_GOAL := help
.PHONY: help deps deps-p4 run-experiment cli p4shell test test-unit test-integration test-p4 lint p4 ebpf size clean clean-net bench bench-bmv2

help: ## list the targets
	@echo "mrc-testbed targets (variables: TOPO=$(TOPO) DATAPLANE=$(DATAPLANE) SCENARIO=$(SCENARIO))"
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-16s %s\n", $$1, $$2}'

deps: ## install apt packages and the Python venv (idempotent)
	@echo "== deps: checking system packages and .venv"
	@bash .ci/install.sh

deps-p4: ## also install BMv2 and p4c from the p4lang packages (Ubuntu 22.04)
	@bash .ci/install.sh --with-p4

run-experiment: deps ## build TOPO, run SCENARIO on DATAPLANE, write results/ (root; CAPTURE=1 for pcaps; RATE_CAP=off or Mbit/s; TIME=shrink|dilate; MTU=4096; SERVERS=cluster file)
	@echo "== run-experiment: TOPO=$(TOPO) DATAPLANE=$(DATAPLANE) SCENARIO=$(SCENARIO)"
	@$(PY) -m experiments run --topo $(TOPO) --dataplane $(DATAPLANE) --scenario $(SCENARIO) $(if $(CAPTURE),--capture $(CAPTURE)) $(if $(RATE_CAP),--rate-cap $(RATE_CAP)) $(if $(TIME),--time $(TIME)) $(if $(MTU),--mtu $(MTU)) $(if $(SERVERS),--servers $(SERVERS))

cli: deps ## interactive fabric with agents and testbed commands (root; TWIN=1: the single-plane twin; LAB=02|03: your lab's P4 on BMv2; docs/cli.md)
	@echo "== cli: TOPO=$(TOPO) DATAPLANE=$(if $(LAB),bmv2,$(DATAPLANE))$(if $(TWIN), (its single-plane twin))$(if $(LAB), with lab $(LAB)'s P4 program$(if $(SOLUTION), (solution)))"
	@$(if $(LAB),$(PY) -m labs program $(LAB) $(BUILD)/labs/cli-$(LAB) $(if $(SOLUTION),--solution) >/dev/null &&) \
	$(PY) -m experiments.interactive.cli --topo $(TOPO) --dataplane $(if $(LAB),bmv2,$(DATAPLANE)) $(if $(CAPTURE),--capture $(CAPTURE)) $(if $(TWIN),--twin) $(if $(LAB),--p4 $(BUILD)/labs/cli-$(LAB)/p4src/mrc_switch.p4) $(if $(MTU),--mtu $(MTU))

p4shell: deps ## read-only p4runtime-shell on SWITCH of the running BMv2 fabric
	@test -n "$(SWITCH)" || { echo "p4shell: SWITCH=<name> needed, e.g. make p4shell SWITCH=p0t0r0" >&2; exit 2; }
	@$(PY) -m experiments.interactive.p4shell --switch $(SWITCH)

test: deps ## run every test (Mininet tests need root; P4 tests need BMv2 and p4c)
	@echo "== test: unit, integration and P4 tests"
	@$(PY) -m pytest tests -q

test-unit: deps ## unit tests only (no root, seconds)
	@$(PY) -m pytest tests/unit -q

test-integration: deps ## Mininet tests on the kernel data plane (root)
	@$(PY) -m pytest tests/integration -q

test-p4: deps ## PTF tests of the P4 program on BMv2 (root, BMv2 and p4c)
	@$(PY) -m pytest tests/p4 -q

lint: deps ## ruff
	@echo "== lint: ruff"
	@$(PY) -m ruff check .

p4: ## compile p4src/ into build/ with p4c-bm2-ss
	@echo "== p4: compiling $(P4_MAIN) into $(BUILD)/"
	@command -v p4c-bm2-ss >/dev/null || { echo "p4c-bm2-ss not found: make deps-p4 (Ubuntu 22.04) or use the Vagrant VM" >&2; exit 2; }
	@mkdir -p $(BUILD)
	p4c-bm2-ss --arch v1model --std p4-16 -o $(BUILD)/mrc_switch.json \
		--p4runtime-files $(BUILD)/mrc_switch.p4info.txtpb $(P4_MAIN)

ebpf: ## compile ebpf/ (the kernel data plane's switch program) into build/ebpf/ with clang
	@echo "== ebpf: compiling ebpf/ into $(BUILD)/ebpf/"
	@$(MAKE) -s -C ebpf

size: deps ## full-scale sizing: make size RADIX=512 PLANES=8
	@$(PY) -m topologies.size --radix $(or $(RADIX),512) --planes $(or $(PLANES),8)

bench: deps ## agent goodput vs raw sockets, recovery after a link failure, a hop's cost, a split fabric's cost (root)
	@echo "== bench: python -m bench.agent_throughput, bench.kernel_hops, bench.split_overhead"
	@$(PY) -m bench.agent_throughput
	@$(PY) -m bench.kernel_hops
	@$(PY) -m bench.split_overhead

bench-bmv2: deps ## BMv2 packets/s, the testbed's switch against a bare one (root, BMv2, p4c)
	@echo "== bench-bmv2: python -m bench.bmv2_forwarding"
	@$(PY) -m bench.bmv2_forwarding $(ARGS)

clean-net: ## remove namespaces, interfaces and processes left by an interrupted run
	@echo "== clean-net"
	@if [ -x $(PY) ]; then $(PY) -m experiments clean; else python3 -m experiments clean; fi

clean: clean-net ## clean-net, and remove build/ and caches (results/ is kept)
	@echo "== clean: build/ and caches"
	@if [ -f $(BUILD)/servers/servers.json ]; then $(PY) -m topologies.nsserver stop; fi
	@rm -rf $(BUILD) .pytest_cache .ruff_cache .hypothesis
	@find . -path ./.venv -prune -o -name __pycache__ -type d -exec rm -rf {} +

# ---------------------------------------------------------------- labs (labs/README.md)
.PHONY: lab-start lab-check
lab-start: deps ## copy a lab's skeleton into its work/ folder: make lab-start LAB=02
	@echo "== lab-start: LAB=$(LAB)"
	@$(PY) -m labs start $(LAB)

lab-check: deps ## check your lab: make lab-check LAB=02 (SOLUTION=1: the lab's solution)
	@echo "== lab-check: LAB=$(LAB)$(if $(SOLUTION), (solution))"
	@$(PY) -m labs check $(LAB) $(if $(SOLUTION),--solution) $(ARGS)

# ---------------------------------------------------------------- the MRC paper (docs/paper.md)
.PHONY: paper
paper: deps ## the MRC paper's section-5 experiments, 3 runs a row: results/<run>/paper.md (root; ONLY=row,...; QUICK=1: one run; SHAPES=paper: each on its cluster's shape; LOADED=1: also the loaded-fabric variants; SERVERS=cluster file)
	@echo "== paper: TOPO=$(TOPO) DATAPLANE=$(or $(filter-out auto,$(DATAPLANE)),kernel)$(if $(SHAPES), SHAPES=$(SHAPES))"
	@$(PY) -m experiments.paper --topo $(TOPO) --dataplane $(or $(filter-out auto,$(DATAPLANE)),kernel) $(if $(ONLY),--only $(ONLY)) $(if $(QUICK),--repetitions 1) $(if $(RATE_CAP),--rate-cap $(RATE_CAP)) $(if $(SHAPES),--shapes $(SHAPES)) $(if $(MTU),--mtu $(MTU)) $(if $(LOADED),--loaded) $(if $(SERVERS),--servers $(SERVERS))

.PHONY: nsservers nsservers-stop
nsservers: deps ## start namespace servers on this machine, stand-ins for the servers of a split fabric (root; NAMES="s1 s2 s3"; docs/scale-out.md)
	@echo "== nsservers: python -m topologies.nsserver start $(or $(NAMES),s1 s2 s3)"
	@$(PY) -m topologies.nsserver start $(or $(NAMES),s1 s2 s3)

nsservers-stop: ## stop this machine's namespace servers (root; NAMES: only those)
	@echo "== nsservers-stop: python -m topologies.nsserver stop $(NAMES)"
	@$(PY) -m topologies.nsserver stop $(NAMES)

.PHONY: calibrate
calibrate: deps ## measure what this machine's agents drive, for the all-to-all and for one pair (build/calibration.json; runs cap their links to it; WORKLOAD=pair: one of them; DATAPLANE=bmv2: with BMv2's switches, which cap BMv2 runs)
	@echo "== calibrate: python -m experiments.run.calibration"
	@$(PY) -m experiments.run.calibration $(if $(MTU),--mtu $(MTU)) $(if $(WORKLOAD),--workload $(WORKLOAD)) $(if $(filter bmv2,$(DATAPLANE)),--dataplane bmv2)
