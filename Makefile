# metaroce — one-command build, test and demo.
#
#   make demo    the main job on a fresh machine (needs the Rust toolchain, python3 with venv, and PyPI)
#   make test    every test tier this machine can run; the others say why they skip
#
# Other targets: build, lint, bench, p4, fuzz, clean. `make help` lists them.

CARGO ?= cargo
P4C ?= p4c
METAROCE := target/release/metaroce
DEMO_TOPO ?= topologies/fat-tree-k4.yaml
DEMO_OUT := target/demo
# The P4Runtime protos are generated from the PyPI package p4runtime, read
# through this Python (ctrl/p4rt/build.rs finds it here by default).
P4RT_VENV := target/p4rt-venv
P4RT_STAMP := $(P4RT_VENV)/.p4runtime-1.6.0

.PHONY: p4rt-deps help build release test test-rust test-p4 test-p4-vectors lint fmt bench p4 p4-check demo fuzz clean
.PHONY: deps-mininet test-e2e mininet-demo

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

build: p4rt-deps ## Debug build of every crate
	$(CARGO) build --workspace --all-targets

release: p4rt-deps ## Optimized metaroce binary
	$(CARGO) build --release -p metaroce-cli

test: test-rust test-p4 test-p4-vectors test-e2e ## L0-L2 everywhere; L3-L4 where their tools exist
	@echo "make test: all tiers that can run here passed"

test-rust: p4rt-deps
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

test-p4: ## P4 contract freshness (needs p4c)
	@tests/p4-fresh.sh

test-p4-vectors: p4rt-deps ## L3: P4 packet vectors (tests/p4) on BMv2; one skip line without it
	$(CARGO) run -q -p metaroce-p4-vectors

# Mininet testbed (mininet/, README "Mininet with BMv2"). Debian's python3
# has the Mininet API; the PATH python3 may be another one.
MN_PY := /usr/bin/python3
TOPO ?= topologies/mininet-2x2.yaml

test-e2e: ## L4: Mininet + BMv2 end-to-end (tests/e2e); one skip line without root/Mininet/BMv2
	@if [ -x $(MN_PY) ]; then $(MN_PY) tests/e2e/run.py; else echo "skip: L4 Mininet end-to-end ($(MN_PY) not installed)"; fi

deps-mininet: ## Debian packages for the Mininet testbed (Mininet, iperf3, scapy, ...; run as root)
	apt-get update -qq
	apt-get install -y --no-install-recommends mininet iperf3 iputils-ping ethtool iproute2 python3-yaml python3-scapy python3-matplotlib

mininet-demo: release ## Mininet + BMv2: one scenario, controller in observe then act mode (TOPO=...; needs the controller)
	$(MN_PY) mininet/demo.py $(TOPO) --controller-bin $(METAROCE) -o target/mininet-demo

lint: p4rt-deps ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench: p4rt-deps ## Benchmarks; prints the figures
	$(CARGO) bench -p metaroce-topo --bench routing
	$(CARGO) bench -p metaroce-p4rt --bench inserts
	$(CARGO) bench -p metaroce-sim --bench engine
	$(CARGO) bench -p metaroce-sim --bench twin
	$(CARGO) bench -p metaroce-policy --bench decide
	$(CARGO) bench -p metaroce-te --bench plan
	$(CARGO) bench -p metaroce-telemetry --bench ingest
	$(CARGO) bench -p metaroce-controller --bench reaction
	@tests/p4/throughput/run.sh

p4: ## Compile p4src/ into p4src/build/ (needs p4c; P4C=path for another one)
	@P4C="$(P4C)" p4src/compile.sh

demo: release ## Validate the fabrics, draw one, then ECMP, flowlet, spray and metaroce side by side: iterations, NIC ordering, a seed sweep
	@mkdir -p $(DEMO_OUT)
	$(METAROCE) topo check topologies/*.yaml
	$(METAROCE) topo show $(DEMO_TOPO)
	$(METAROCE) topo paths $(DEMO_TOPO) h1-1 h8-2
	$(METAROCE) topo paths $(DEMO_TOPO) h1-1 h8-2 --fail p4-spine1
	$(METAROCE) topo render $(DEMO_TOPO) -o $(DEMO_OUT)/fabric.svg
	$(METAROCE) sim run scenarios/ecmp-collisions.yaml --modes ecmp,flowlet,spray,metaroce --pcap leaf1:5 -o $(DEMO_OUT)/collisions
	$(METAROCE) sim run scenarios/ecmp-collisions.yaml --modes spray,metaroce --ordering out-of-order -o $(DEMO_OUT)/collisions-ooo
	$(METAROCE) sim run scenarios/announced-all-to-all.yaml --modes flowlet,metaroce -o $(DEMO_OUT)/announced
	$(METAROCE) sim sweep scenarios/ecmp-collisions.yaml --seeds 1-10 --modes ecmp,flowlet,spray,metaroce -o $(DEMO_OUT)/sweep
	$(METAROCE) sim run scenarios/link-failure.yaml --modes ecmp,flowlet,metaroce -o $(DEMO_OUT)/link-failure
	$(METAROCE) sim run scenarios/ai-fabric-failure.yaml --modes ecmp,flowlet,metaroce -o $(DEMO_OUT)/ai-fabric
	@echo "demo: picture of the fabric in $(DEMO_OUT)/fabric.svg; reports (report.md, report.json), SVG plots and pcaps in $(DEMO_OUT)/{collisions,collisions-ooo,announced,link-failure,ai-fabric}/, the sweep's table and box plot in $(DEMO_OUT)/sweep/"

fuzz: ## Fuzz the topology loader for 60 s (needs cargo-fuzz and nightly)
	cd fuzz && $(CARGO) +nightly fuzz run load_topology -- -max_total_time=60

p4rt-deps: $(P4RT_STAMP) ## Python venv with p4runtime==1.6.0 for the P4Runtime protos

$(P4RT_STAMP):
	@command -v python3 >/dev/null || { echo "make: python3 is needed to get the P4Runtime definitions (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
	@python3 -m venv $(P4RT_VENV) || { echo "make: cannot create $(P4RT_VENV) (Debian: apt-get install python3-venv)" >&2; exit 1; }
	@$(P4RT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check p4runtime==1.6.0 || { echo "make: cannot install p4runtime==1.6.0 from PyPI into $(P4RT_VENV)" >&2; exit 1; }
	@touch $@

clean:
	$(CARGO) clean
	rm -rf $(DEMO_OUT)
