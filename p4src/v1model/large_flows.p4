// Large-flow detector at the flow's first switch: UDP (RoCEv2) packets
// that arrived on a host-facing port and are routed to a group (the only
// traffic a steer entry can move).
//
// Per flow slot (the flowlet slot: the same hash), a window: the
// signature of the flow that opened it, its start time, the IPv4 bytes
// the slot counted since, and whether another signature used the slot
// meanwhile. The first packet after a window's end closes it: if the
// window counted at least `threshold_bytes`, that packet raises one
// large_flow_digest_t for it (its own flow key and egress port, the
// window's bytes and actual length, the collision flag), then opens the
// next window. So a slot reports at most once per window, digests are
// bounded by the number of large flows per window, and a digest that is
// lost loses nothing: the next window reports again.
//
// A new large flow is also reported at its threshold crossing, once: a
// window opens armed (window_early 0) unless the window it closes
// reported the same flow. In an armed window, the packet of the window's
// own flow that brings the bytes to the threshold raises the digest at
// once (the bytes so far, the time since the start, the flag so far) and
// disarms it. So the controller hears of a new large flow a few packets
// after it starts, not one window later; a steady flow adds no digest.
#ifndef METAROCE_V1MODEL_LARGE_FLOWS_P4
#define METAROCE_V1MODEL_LARGE_FLOWS_P4

#include "metadata.p4"

control LargeFlows(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<16>, bit<32>>(LARGE_FLOW_SLOTS) window_sig;
    register<bit<48>, bit<32>>(LARGE_FLOW_SLOTS) window_start;
    register<bit<32>, bit<32>>(LARGE_FLOW_SLOTS) window_bytes;
    register<bit<8>, bit<32>>(LARGE_FLOW_SLOTS) window_collision;
    register<bit<8>, bit<32>>(LARGE_FLOW_SLOTS) window_early;

    // The detector's settings: the default action of a keyless table, which
    // the controller rewrites; applied only by the packets it watches.
    // threshold_bytes 0 (the default) turns the detector off.
    action configure(bit<32> window_us, bit<32> threshold_bytes) {
        meta.egress_cfg = 40w0 ++ window_us ++ threshold_bytes;
    }

    table config {
        key = {}
        actions = {
            configure;
        }
        default_action = configure(10000, 0);
    }

    // scratch_16: the window's signature; scratch_time: its start (0:
    // never); scratch_a: its bytes.
    HIDDEN_STEP(read_window,
        window_sig.read(meta.scratch_16, meta.flow_slot);
        window_start.read(meta.scratch_time, meta.flow_slot);
        window_bytes.read(meta.scratch_a, meta.flow_slot);)
    HIDDEN_STEP(add_bytes, meta.scratch_a = meta.scratch_a + (bit<32>)hdr.ipv4.total_len;)
    // scratch_time: the closed window's length; scratch_8: its collision
    // flag, also set when the packet closing it is another flow's.
    HIDDEN_STEP(closed_window,
        meta.scratch_time = standard_metadata.ingress_global_timestamp - meta.scratch_time;
        window_collision.read(meta.scratch_8, meta.flow_slot);)
    // The same for an armed window at its crossing (BMv2 applies a table
    // from one place only).
    HIDDEN_STEP(crossed_window,
        meta.scratch_time = standard_metadata.ingress_global_timestamp - meta.scratch_time;
        window_collision.read(meta.scratch_8, meta.flow_slot);)
    apply {
        config.apply();
        if (LF_THRESHOLD(meta) != 0) {
            read_window.apply();
            // One digest call for both reports (BMv2 gives each call a
            // learn list of its own, and P4Runtime serves only the first):
            // scratch_a the bytes, scratch_time the length, scratch_8 the
            // flag.
            bool report = false;
            if (meta.scratch_time != 0
                    && standard_metadata.ingress_global_timestamp - meta.scratch_time < (bit<48>)LF_WINDOW(meta)) {
                // The window runs: count, and note another flow in the slot.
                if (meta.scratch_16 != meta.flow_hash[31:16]) {
                    window_collision.write(meta.flow_slot, 1);
                }
                add_bytes.apply();
                window_bytes.write(meta.flow_slot, meta.scratch_a);
                // A new flow's crossing, in an armed window: report now.
                if (meta.scratch_16 == meta.flow_hash[31:16] && meta.scratch_a >= LF_THRESHOLD(meta)) {
                    window_early.read(meta.scratch_8, meta.flow_slot);
                    if (meta.scratch_8 == 0) {
                        window_early.write(meta.flow_slot, 1);
                        crossed_window.apply();
                        if (meta.scratch_time == 0) {
                            meta.scratch_time = 1;  // within a µs: never an empty window
                        }
                        report = true;
                    }
                }
            } else {
                // The window ended (or the slot was never used): report it
                // if it was large, then open the next one with this
                // packet, armed unless the close reported this flow.
                bit<8> early_done = 0;
                if (meta.scratch_time != 0 && meta.scratch_a >= LF_THRESHOLD(meta)) {
                    closed_window.apply();
                    if (meta.scratch_16 != meta.flow_hash[31:16]) {
                        meta.scratch_8 = 1;
                    } else {
                        early_done = 1;
                    }
                    if (meta.scratch_time > 0xffffffff) {
                        meta.scratch_time = 0xffffffff;  // window_us saturates
                    }
                    report = true;
                }
                window_sig.write(meta.flow_slot, meta.flow_hash[31:16]);
                window_start.write(meta.flow_slot, standard_metadata.ingress_global_timestamp);
                window_bytes.write(meta.flow_slot, (bit<32>)hdr.ipv4.total_len);
                window_collision.write(meta.flow_slot, 0);
                window_early.write(meta.flow_slot, early_done);
            }
            if (report) {
                digest<large_flow_digest_t>(DIGEST_LARGE_FLOW, {
                    CFG_SWITCH_ID(meta),
                    hdr.ipv4.src_addr ++ hdr.ipv4.dst_addr ++ hdr.flow_key.l4_ports[31:16] ++ hdr.flow_key.entropy,
                    (bit<16>)standard_metadata.egress_spec,
                    meta.scratch_a,
                    (bit<32>)meta.scratch_time,
                    meta.flow_slot[15:0],
                    meta.scratch_8,
                    standard_metadata.ingress_global_timestamp });
            }
        }
    }
}

#endif
