// Large-flow detector at the flow's first switch, as v1model/large_flows.p4:
// per flow slot a window (signature, start, bytes, collision flag, early
// flag); the first packet after a window's end closes it and, if it counted
// at least `threshold_bytes`, raises one large_flow_digest_t from the
// ingress deparser; in a window opened armed, the packet of the window's
// own flow that brings its bytes to the threshold raises one at once. Each
// register is touched once, by one stateful ALU, in this order: the start
// decides whether the window runs; the signature and the bytes follow it;
// the collision and early flags last (they need to know whether the
// signature differs). Three stages after the caller's verdict.
//
// Tofino's form of the rule: window_bytes' stateful ALU takes two fields
// besides the register, the length and one more. The crossing test needs
// length - threshold, so the close's test (the ended window's bytes against
// the threshold itself) would be a third: instead, bit 1 of window_early
// records that the window's bytes reached the threshold (at its first
// packet, or at a crossing test), and the close reports on it. The same
// answer while threshold_bytes does not change during a window.
//
// Times are the low 32 bits of the ns clock: window_us holds ns here, at
// most 4.29 s.
#ifndef METAROCE_TNA_LARGE_FLOWS_P4
#define METAROCE_TNA_LARGE_FLOWS_P4

#include "metadata.p4"

// window_early's outputs are the digest_type to set (its low three bits):
// max(digest_type, LF_WIN), the large-flow one, which overrides the drain
// digest's 3 as before; or digest_type | LF_KEEP, the one already set (a
// drain digest, or none). Both are ALU results on digest_type: Tofino 1
// takes a stateful ALU's output from one source.
const bit<8> LF_KEEP = 0x08;
const bit<8> LF_WIN = LF_KEEP | (bit<8>)DIGEST_TYPE_LARGE_FLOW;

control LargeFlows(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Register<bit<16>, bit<13>>(LARGE_FLOW_SLOTS) window_sig;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_start;
    Register<bit<32>, bit<13>>(LARGE_FLOW_SLOTS) window_bytes;
    Register<bit<8>, bit<13>>(LARGE_FLOW_SLOTS) window_collision;
    // Bit 0: the contract's flag (1: reported at the crossing, or opened by
    // the flow's close report; 0: armed). Bit 1: the window reached the
    // threshold.
    Register<bit<8>, bit<13>>(LARGE_FLOW_SLOTS) window_early;
    // The IPv4 length in a 32-bit word, for length - threshold (an ALU takes
    // its operands from containers of its own size).
    Hash<bit<32>>(HashAlgorithm_t.IDENTITY) ip_len;

    // The window's start in one output, odd while it runs; else it reopens
    // now and the output is its old start, even (0: never opened). A start
    // is stored with its two low bits set (3 ns late at most), so that it is
    // never 0, nor 0 once bit 0 is cleared. The test is made here: Tofino's
    // gateways order a field against constants only.
    RegisterAction<bit<32>, bit<13>, bit<32>>(window_start) open_or_keep = {
        void apply(inout bit<32> value, out bit<32> start) {
            // now - value >= window, written value + (window - now) <= 0
            // (lf_cutoff is window - now), as routing.p4's stamp_time.
            if (value == 0 || (int<32>)(value + meta.lf_cutoff) <= 0) {
                start = value & 0xfffffffe;
                value = ig_prsr_md.global_tstamp[31:0] | 3;
            } else {
                start = value | 1;  // the value as stored, through the same ALU
            }
        }
    };

    // The bytes after this packet when they reach the threshold, else 0
    // (the threshold is not 0): value + length >= threshold, written
    // value + (length - threshold) >= 0, signed (exact below 2^31 bytes).
    RegisterAction<bit<32>, bit<13>, bit<32>>(window_bytes) add_bytes = {
        void apply(inout bit<32> value, out bit<32> large) {
            if ((int<32>)(value + meta.lf_short) >= 0) {
                large = value + (bit<32>)hdr.ipv4.total_len;
            } else {
                large = 0;
            }
            value = value + (bit<32>)hdr.ipv4.total_len;
        }
    };

    // The ended window's bytes; the next window counts this packet.
    RegisterAction<bit<32>, bit<13>, bit<32>>(window_bytes) restart_bytes = {
        void apply(inout bit<32> value, out bit<32> bytes) {
            bytes = value;
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

    // The running window's flag, for a report at the crossing.
    RegisterAction<bit<8>, bit<13>, bit<8>>(window_collision) read_collision = {
        void apply(inout bit<8> value, out bit<8> collision) {
            collision = value;
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

    // window_early's outputs go straight into the deparser's digest_type:
    // no stage is left after this one for a test on a flag.

    // The window's own flow at or above the threshold: the digest if the
    // window is armed (bit 0 clear), else 0; disarmed and reached.
    RegisterAction<bit<8>, bit<13>, bit<8>>(window_early) cross_early = {
        void apply(inout bit<8> value, out bit<8> digest) {
            if (value == 0 || value == 2) {
                digest = (bit<8>)DIGEST_TYPE_LARGE_FLOW;
            } else {
                digest = 0;
            }
            value = 3;
        }
    };

    // Another flow's packet at or above the threshold (or the window's own
    // while a drain digest is raised): reached, armed as it was.
    RegisterAction<bit<8>, bit<13>, bit<8>>(window_early) note_reached = {
        void apply(inout bit<8> value) {
            value = value | 2;
        }
    };

    // The window ends: the large-flow digest if it reached the threshold,
    // else digest_type as it was. The next window is disarmed if this
    // reports the packet's own flow, and has not reached the threshold (its
    // first packet is under it) ...
    RegisterAction<bit<8>, bit<13>, bit<8>>(window_early) close_window = {
        void apply(inout bit<8> value, out bit<8> digest) {
            if (value >= 2) {
                digest = max((bit<8>)ig_dprsr_md.digest_type, LF_WIN);
            } else {
                digest = (bit<8>)ig_dprsr_md.digest_type | LF_KEEP;
            }
            if (value >= 2 && meta.lf_sig_differs == 0) {
                value = 1;
            } else {
                value = 0;
            }
        }
    };

    // ... or has (its first packet alone is at or above it).
    RegisterAction<bit<8>, bit<13>, bit<8>>(window_early) close_window_reached = {
        void apply(inout bit<8> value, out bit<8> digest) {
            if (value >= 2) {
                digest = max((bit<8>)ig_dprsr_md.digest_type, LF_WIN);
            } else {
                digest = (bit<8>)ig_dprsr_md.digest_type | LF_KEEP;
            }
            if (value >= 2 && meta.lf_sig_differs == 0) {
                value = 3;
            } else {
                value = 2;
            }
        }
    };

    // LargeFlowsConfig ran beside routing; the registers wait for the
    // caller's verdict (forwarded from a host-facing port to a group).
    apply {
        if (meta.lf_threshold != 0) {
            meta.lf_start = open_or_keep.execute(meta.flow_slot);
            meta.lf_short = ip_len.get({ hdr.ipv4.total_len }) - meta.lf_threshold;
            meta.lf_elapsed = ig_prsr_md.global_tstamp[31:0] - meta.lf_start;
            if (meta.lf_start[0:0] == 1) {
                // The window runs: count, and note another flow in the slot
                // and the threshold reached; the window's own flow reports
                // at or above the threshold, once.
                meta.lf_bytes = add_bytes.execute(meta.flow_slot);
                meta.lf_sig_differs = compare_sig.execute(meta.flow_slot);
                if (meta.lf_sig_differs != 0) {
                    note_collision.execute(meta.flow_slot);
                    if (meta.lf_bytes != 0) {
                        note_reached.execute(meta.flow_slot);
                    }
                } else {
                    meta.lf_collision = read_collision.execute(meta.flow_slot);
                    if (meta.lf_bytes != 0) {
                        if (ig_dprsr_md.digest_type == 0) {
                            ig_dprsr_md.digest_type = (DigestType_t)cross_early.execute(meta.flow_slot);
                        } else {
                            // The drain digest (stage 9) goes first; the
                            // flow's next packet reports.
                            note_reached.execute(meta.flow_slot);
                        }
                    }
                }
            } else {
                // The window ended: report it if it reached the threshold;
                // the registers already hold the next one. A slot never
                // used (start 0) raises nothing.
                meta.lf_bytes = restart_bytes.execute(meta.flow_slot);
                meta.lf_sig_differs = restart_sig.execute(meta.flow_slot);
                meta.lf_collision = restart_collision.execute(meta.flow_slot);
                if (meta.lf_short[31:31] == 0) {
                    if (meta.lf_start != 0) {
                        ig_dprsr_md.digest_type = (DigestType_t)close_window_reached.execute(meta.flow_slot);
                    } else {
                        close_window_reached.execute(meta.flow_slot);
                    }
                } else if (meta.lf_start != 0) {
                    ig_dprsr_md.digest_type = (DigestType_t)close_window.execute(meta.flow_slot);
                } else {
                    close_window.execute(meta.flow_slot);
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
