# metaroce — one-command build, test and demo.
#
#   make demo    the main job on a fresh machine (needs only the Rust toolchain)
#   make test    every test tier this machine can run; the others say why they skip
#
# Other targets: build, lint, bench, p4, fuzz, clean. `make help` lists them.

CARGO ?= cargo
P4C ?= p4c
METAROCE := target/release/metaroce
DEMO_TOPO ?= topologies/fat-tree-k4.yaml
DEMO_OUT := target/demo

.PHONY: help build release test test-rust test-p4 lint fmt bench p4 p4-check demo fuzz clean

help: ## List the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 14

build: ## Debug build of every crate
	$(CARGO) build --workspace --all-targets

release: ## Optimized metaroce binary
	$(CARGO) build --release -p metaroce-cli

test: test-rust test-p4 ## L0-L2 everywhere; L3-L4 where their tools exist
	@echo "make test: all tiers that can run here passed"

test-rust:
	$(CARGO) test --workspace --all-targets
	$(CARGO) test --workspace --doc

test-p4: ## P4 contract freshness (needs p4c)
	@tests/p4-fresh.sh

lint: ## rustfmt check and clippy with warnings as errors
	$(CARGO) fmt --all -- --check
	$(CARGO) clippy --workspace --all-targets -- -D warnings

fmt:
	$(CARGO) fmt --all

bench: ## Benchmarks; prints the figures
	$(CARGO) bench -p metaroce-topo --bench routing

p4: ## Compile p4src/ into p4src/build/ (needs p4c)
	@p4src/compile.sh

demo: release ## Validate a shipped fabric, show its paths and draw it
	@mkdir -p $(DEMO_OUT)
	$(METAROCE) topo check topologies/*.yaml
	$(METAROCE) topo show $(DEMO_TOPO)
	$(METAROCE) topo paths $(DEMO_TOPO) h1-1 h8-2
	$(METAROCE) topo paths $(DEMO_TOPO) h1-1 h8-2 --fail p4-spine1
	$(METAROCE) topo render $(DEMO_TOPO) -o $(DEMO_OUT)/fabric.svg
	@echo "demo: picture of the fabric in $(DEMO_OUT)/fabric.svg"

fuzz: ## Fuzz the topology loader for 60 s (needs cargo-fuzz and nightly)
	cd fuzz && $(CARGO) +nightly fuzz run load_topology -- -max_total_time=60

clean:
	$(CARGO) clean
	rm -rf $(DEMO_OUT)
