// Large-flow detector at the flow's first switch, as v1model/large_flows.p4:
// per flow slot a window (signature, start, bytes, collision flag); the
// first packet after a window's end closes it and, if it counted at least
// `threshold_bytes`, raises one large_flow_digest_t from the ingress
// deparser. Each register is touched once, by one stateful ALU, in this
// order: the start decides whether the window runs; the signature and the
// bytes follow it; the collision flag last (it needs to know whether the
// signature differs). Three stages after the caller's verdict.
// Times are the low 32 bits of the ns clock: window_us holds ns here, at
// most 4.29 s.
#ifndef METAROCE_TNA_LARGE_FLOWS_P4
#define METAROCE_TNA_LARGE_FLOWS_P4

#include "metadata.p4"

const bit<32> LF_RUNS = 2;

control LargeFlows(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Register<bit<16>, bit<13>>(LARGE_FLOW_SLOTS) window_sig;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_start;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_bytes;
    Register<bit<8>, bit<13>>(LARGE_FLOW_SLOTS) window_collision;

    // The window's state, in one output: LF_RUNS while it runs; else it
    // reopens now and the output is its old start (0: never opened). A
    // start is stored with its lowest bit set, so that it is never 0 or
    // LF_RUNS (1 ns off at most). The test is made here: Tofino's gateways
    // order a field against constants only.
    RegisterAction<bit<32>, bit<13>, bit<32>>(window_start) open_or_keep = {
        void apply(inout bit<32> value, out bit<32> old) {
            // now - value >= window, written value + (window - now) <= 0
            // (lf_cutoff is window - now), as routing.p4's stamp_time.
            if (value == 0 || (int<32>)(value + meta.lf_cutoff) <= 0) {
                old = value;
                value = ig_prsr_md.global_tstamp[31:0] | 1;
            } else {
                old = LF_RUNS;
            }
        }
    };

    RegisterAction<bit<32>, bit<13>, bit<32>>(window_bytes) add_bytes = {
        void apply(inout bit<32> value) {
            value = value + (bit<32>)hdr.ipv4.total_len;
        }
    };

    // The ended window's bytes when they reach the threshold, else 0 (the
    // threshold is not 0): the test is made here, where the bytes are read,
    // so that the digest decision needs no stage of its own.
    RegisterAction<bit<32>, bit<13>, bit<32>>(window_bytes) restart_bytes = {
        void apply(inout bit<32> value, out bit<32> large) {
            if (value >= meta.lf_threshold) {
                large = value;
            } else {
                large = 0;
            }
            value = (bit<32>)hdr.ipv4.total_len;
        }
    };

    // 1: the slot's window belongs to another flow (its signature differs).
    RegisterAction<bit<16>, bit<13>, bit<8>>(window_sig) compare_sig = {
        void apply(inout bit<16> value, out bit<8> differs) {
            if (value != meta.flow_sig) {
                differs = 1;
            } else {
                differs = 0;
            }
        }
    };

    // The same, and the slot's next window is this flow's.
    RegisterAction<bit<16>, bit<13>, bit<8>>(window_sig) restart_sig = {
        void apply(inout bit<16> value, out bit<8> differs) {
            if (value != meta.flow_sig) {
                differs = 1;
            } else {
                differs = 0;
            }
            value = meta.flow_sig;
        }
    };

    RegisterAction<bit<8>, bit<13>, bit<8>>(window_collision) note_collision = {
        void apply(inout bit<8> value) {
            value = 1;
        }
    };

    // The ended window's flag, or 1 if this packet is another flow's; the
    // next window starts clean.
    RegisterAction<bit<8>, bit<13>, bit<8>>(window_collision) restart_collision = {
        void apply(inout bit<8> value, out bit<8> collision) {
            if (value != 0 || meta.lf_sig_differs != 0) {
                collision = 1;
            } else {
                collision = 0;
            }
            value = 0;
        }
    };

    // LargeFlowsConfig ran beside routing; the registers wait for the
    // caller's verdict (forwarded from a host-facing port to a group).
    apply {
        if (meta.lf_threshold != 0) {
            meta.lf_start = open_or_keep.execute(meta.flow_slot);
            if (meta.lf_start == LF_RUNS) {
                // The window runs: count, and note another flow in the slot.
                add_bytes.execute(meta.flow_slot);
                meta.lf_sig_differs = compare_sig.execute(meta.flow_slot);
                if (meta.lf_sig_differs != 0) {
                    note_collision.execute(meta.flow_slot);
                }
            } else {
                // The window ended: report it if it was large; the
                // registers already hold the next one. (A slot never
                // opened has 0 bytes: no digest.)
                meta.lf_elapsed = ig_prsr_md.global_tstamp[31:0] - meta.lf_start;
                meta.lf_bytes = restart_bytes.execute(meta.flow_slot);
                meta.lf_sig_differs = restart_sig.execute(meta.flow_slot);
                meta.lf_collision = restart_collision.execute(meta.flow_slot);
                if (meta.lf_start != 0 && meta.lf_bytes != 0) {
                    ig_dprsr_md.digest_type = DIGEST_TYPE_LARGE_FLOW;
                }
            }
        }
    }
}

// The detector's `config`, applied before routing so that it takes none of
// its stages. Its names are LargeFlows' (the contract's).
control LargeFlowsConfig(inout ingress_metadata_t meta,
                         in ingress_intrinsic_metadata_from_parser_t ig_prsr_md) {
    @name(".MetaroceIngress.large_flows.configure")
    action configure(bit<32> window_us, bit<32> threshold_bytes) {
        meta.lf_threshold = threshold_bytes;
        // window - now, for open_or_keep.
        meta.lf_cutoff = window_us - ig_prsr_md.global_tstamp[31:0];
    }

    @name(".MetaroceIngress.large_flows.config")
    table config {
        key = {}
        actions = {
            configure;
        }
        default_action = configure(10000000, 0);
        size = 1;
    }

    apply {
        config.apply();
    }
}

#endif
