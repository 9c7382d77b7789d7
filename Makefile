# metaroce — one-command build, test and demo.
#
#   make demo    the main job on a fresh machine (needs the Rust toolchain, python3 with venv, and PyPI)
#   make test    every test tier this machine can run; the others say why they skip
#
# Other targets: build, install, lint, bench, p4, fuzz, clean. `make help` lists them.

CARGO ?= cargo
P4C ?= p4c
METAROCE := target/release/metaroce
DEMO_TOPO ?= topologies/fat-tree-k4.yaml
DEMO_OUT := target/demo
# The P4Runtime protos are generated from the PyPI package p4runtime, read
# through this Python (ctrl/p4rt/build.rs finds it here by default).
P4RT_VENV := target/p4rt-venv
P4RT_STAMP := $(P4RT_VENV)/.p4runtime-1.6.0
# The etcd client's build (controller HA) runs protoc and imports its
# well-known types. Both come from the PyPI package grpcio-tools in the same
# venv (its grpcio is the one p4runtime already brings), run through a
# two-line wrapper, so a fresh machine needs no system protobuf packages.
# PROTOC=/usr/bin/protoc make ... uses another one (Debian: protobuf-compiler
# and libprotobuf-dev for the well-known types).
GRPCIO_TOOLS := 1.85.1
PROTOC_STAMP := $(P4RT_VENV)/.grpcio-tools-$(GRPCIO_TOOLS)
PROTOC ?= $(abspath $(P4RT_VENV))/bin/protoc
export PROTOC
PREFIX ?= /usr/local

.PHONY: p4rt-deps build-deps help build release install test test-rust test-p4 test-p4-vectors test-alerts lint fmt bench p4 demo fuzz clean test-make
.PHONY: deps-mininet test-e2e mininet-demo bench-ha bench-shard bench-scale bench-idle p4-tna test-p4-parity test-htsim crosscheck

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

build: build-deps ## Debug build of every crate
	$(CARGO) build --workspace --all-targets

release: build-deps ## Optimized metaroce binary
	$(CARGO) build --release -p metaroce-cli

install: release ## Install metaroce into $(PREFIX)/bin, the Grafana dashboard and alert rules into $(PREFIX)/share/metaroce (PREFIX=~/.local for your own)
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/metaroce
	install -m 0755 $(METAROCE) $(DESTDIR)$(PREFIX)/bin/metaroce
	install -m 0644 ctrl/controller/grafana/metaroce.json ctrl/controller/prometheus/metaroce-rules.yml $(DESTDIR)$(PREFIX)/share/metaroce/
	@echo "installed $(DESTDIR)$(PREFIX)/bin/metaroce (it carries the v1model program) and $(DESTDIR)$(PREFIX)/share/metaroce/"

test: test-make test-rust test-alerts test-p4 test-p4-parity test-p4-vectors test-htsim test-e2e ## L0-L2 everywhere; L3-L4 where their tools exist
	@echo "make test: all tiers that can run here passed"

test-make: ## Every .PHONY target has a rule (a lost one would do nothing and pass)
	@tests/makefile-targets.sh

test-rust: build-deps
	$(CARGO) test --workspace --all-targets
	@m=; for t in chromium chromedriver; do command -v $$t >/dev/null || m="$$m $$t"; done; \
	  [ -z "$$m" ] || echo "skip: L2 page browser test (ctrl/cli/tests/page_browser.rs):$$m not installed (apt-get install chromium chromium-driver)"
	$(CARGO) test --workspace --doc

test-alerts: ## Prometheus alert rules (ctrl/controller/prometheus) with promtool; one skip line without it
	@if command -v promtool >/dev/null; then \
	  promtool test rules ctrl/controller/prometheus/metaroce-rules.test.yml; \
	else echo "skip: alert rule tests (ctrl/controller/prometheus): promtool not installed (apt-get install prometheus)"; fi

test-p4: ## P4 contract freshness (needs p4c)
	@tests/p4-fresh.sh

test-p4-parity: ## Tofino build freshness (p4src/build/tofino) where bf-p4c exists, one skip line without; the P4Info parity runs in test-rust
	@tests/tna-fresh.sh

p4-tna: ## Compile p4src/tna with the Tofino compiler into p4src/build/tofino: P4Info, bf-rt.json, tofino.bin, context.json (BF_P4C; one skip line without it)
	@p4src/compile-tna.sh

test-p4-vectors: build-deps ## L3: P4 packet vectors (tests/p4) on BMv2; one skip line without it
	$(CARGO) run -q -p metaroce-p4-vectors

test-htsim: build-deps ## Cross-check one small case against htsim (HTSIM_DIR, default /opt/htsim); one skip line without it
	@CARGO=$(CARGO) tests/htsim/crosscheck.py --quick --build debug -o target/crosscheck-quick

crosscheck: release ## Our simulator vs htsim on the same host pairs: permutations on k=4 and k=8 fat-trees, ECMP and spray, several seeds
	tests/htsim/crosscheck.py --metaroce $(METAROCE) -o target/crosscheck

# Mininet testbed (mininet/, README "Mininet with BMv2"). Debian's python3
# has the Mininet API; the PATH python3 may be another one.
MN_PY := /usr/bin/python3
TOPO ?= topologies/mininet-2x2.yaml

test-e2e: ## L4: Mininet + BMv2 end-to-end (tests/e2e); one skip line without root/Mininet/BMv2
	@if [ -x $(MN_PY) ]; then $(MN_PY) tests/e2e/run.py; else echo "skip: L4 Mininet end-to-end ($(MN_PY) not installed)"; fi

# Fabric sizes of the scale bench, as fat-tree k: 8, 16, 32 are 80, 320 and
# 1,280 switches (SCALE_K=8,16 for the two smaller on a small machine).
SCALE_K ?= 8,16,32

bench-scale: build-deps ## sim serve of fat-trees (SCALE_K=8,16,32) + controller run: programming time, idle CPU and memory per switch, a 10,000-flow job
	SCALE_K=$(SCALE_K) $(CARGO) bench -p metaroce-cli --bench scale

# The idle controller's instructions: fat-tree k and seconds counted.
IDLE_K ?= 8
IDLE_S ?= 20
bench-idle: release ## The idle controller in instructions per switch-second under callgrind (steadier than CPU time on a shared VM; IDLE_K=8, IDLE_S=20; needs valgrind)
	tests/idle-instructions.sh target/release/metaroce $(IDLE_K) $(IDLE_S)

bench-ha: build-deps ## Controller takeover time over 10 leader kills, p50 / max (needs etcd: Debian etcd-server)
	$(CARGO) test --workspace --test serve_ha -- --ignored --nocapture takeover_time

bench-shard: build-deps ## Takeover of a killed shard owner's switches over 8 kills, p50 / max (needs etcd: Debian etcd-server)
	$(CARGO) test --workspace --test serve_shard -- --ignored --nocapture takeover_time

deps-mininet: ## Debian packages for the Mininet testbed (Mininet, iperf3, scapy, ...; run as root)
	apt-get update -qq
	apt-get install -y --no-install-recommends mininet iperf3 iputils-ping ethtool iproute2 python3-yaml python3-scapy python3-matplotlib

mininet-demo: release ## Mininet + BMv2: one scenario, controller in observe then act mode (TOPO=...; root, Mininet, BMv2)
	$(MN_PY) mininet/demo.py $(TOPO) --controller-bin $(METAROCE) -o target/mininet-demo

lint: build-deps ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt: ## Format every crate
	$(CARGO) fmt --all

bench: build-deps ## Benchmarks; prints the figures
	$(CARGO) bench -p metaroce-topo --bench routing
	$(CARGO) bench -p metaroce-p4rt --bench inserts
	$(CARGO) bench -p metaroce-sim --bench engine
	$(CARGO) bench -p metaroce-sim --bench twin
	$(CARGO) bench -p metaroce-policy --bench decide
	$(CARGO) bench -p metaroce-te --bench plan
	$(CARGO) bench -p metaroce-te --bench phase
	$(CARGO) bench -p metaroce-telemetry --bench ingest
	$(CARGO) bench -p metaroce-controller --bench reaction
	@$(MAKE) --no-print-directory bench-scale
	@$(MAKE) --no-print-directory bench-ha
	@$(MAKE) --no-print-directory bench-shard
	@$(MAKE) --no-print-directory bench-idle
	@tests/p4/throughput/run.sh

p4: ## Compile p4src/ into p4src/build/ (needs p4c)
	@p4src/compile.sh

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

p4rt-deps: $(P4RT_STAMP) $(PROTOC_STAMP) ## Python venv with p4runtime==1.6.0 for the P4Runtime protos and grpcio-tools for protoc

# Say what is wrong before cargo fails deep in a build script.
build-deps: p4rt-deps ## Check what the build needs besides Rust: the P4Runtime venv, protoc and its well-known types
	@command -v $(PROTOC) >/dev/null || { echo "make: $(PROTOC) (protoc, for the etcd client's build) is missing; run make p4rt-deps, or set PROTOC" >&2; exit 1; }
	@d=$$(mktemp -d) && echo 'syntax = "proto3"; import "google/protobuf/descriptor.proto";' > $$d/wkt.proto \
	  && $(PROTOC) -I$$d --descriptor_set_out=/dev/null $$d/wkt.proto 2>/dev/null; rc=$$?; rm -rf $$d; \
	  [ $$rc = 0 ] || { echo "make: $(PROTOC) cannot find google/protobuf/descriptor.proto, which the etcd client's build imports (a system protoc needs Debian's libprotobuf-dev)" >&2; exit 1; }

$(P4RT_STAMP):
	@command -v python3 >/dev/null || { echo "make: python3 is needed to get the P4Runtime definitions (Debian: apt-get install python3 python3-venv)" >&2; exit 1; }
	@python3 -m venv $(P4RT_VENV) || { echo "make: cannot create $(P4RT_VENV) (Debian: apt-get install python3-venv)" >&2; exit 1; }
	@$(P4RT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check p4runtime==1.6.0 || { echo "make: cannot install p4runtime==1.6.0 from PyPI into $(P4RT_VENV)" >&2; exit 1; }
	@touch $@

# grpcio-tools runs protoc in-process and adds its own copy of the
# well-known types (grpc_tools/_proto) to the include path; the wrapper
# makes it a protoc executable for cargo's build scripts (PROTOC).
$(PROTOC_STAMP): $(P4RT_STAMP)
	@$(P4RT_VENV)/bin/python -m pip install --quiet --disable-pip-version-check grpcio-tools==$(GRPCIO_TOOLS) || { echo "make: cannot install grpcio-tools==$(GRPCIO_TOOLS) (protoc) from PyPI into $(P4RT_VENV)" >&2; exit 1; }
	@printf '#!/bin/sh\n# protoc from the PyPI package grpcio-tools (make p4rt-deps)\nexec "$$(dirname "$$0")/python" -m grpc_tools.protoc "$$@"\n' > $(P4RT_VENV)/bin/protoc
	@chmod +x $(P4RT_VENV)/bin/protoc
	@touch $@

clean:
	$(CARGO) clean
	rm -rf $(DEMO_OUT)
