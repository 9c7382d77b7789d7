// Routing on Tofino: LPM to a weighted next-hop group (action selector),
// flowlet pinning, steering, next hop; the same names and the same
// behaviour as v1model/routing.p4, arranged for stateful ALUs, which
// touch each register once per packet:
//
//  - the slot's signature and last-seen time are compared and stamped in
//    one access each (flowlet_sig, flowlet_last_seen);
//  - a new flowlet follows its steer entry, or bumps its flowlet number
//    (flowlet_id) and draws from the group; its next hop is pinned
//    (flowlet_nhop written), a running flowlet's is read. The steer
//    tables are looked up for every packet, beside the LPM (a lookup
//    changes nothing), so that a new flowlet does not wait for them;
//  - port_down is checked on the port of the next hop the packet is about
//    to use, after `nhop`: for a running flowlet that is its pinned port,
//    for a steered new flowlet its steer entry's (the controller keeps
//    `steer`'s port equal to the next hop's); a drawn new flowlet checks
//    nothing, as on v1model (PORT_NONE): the table is not applied. A
//    hit resubmits the packet, which comes back as a new flowlet that
//    draws and ignores its steer entries (what mark_port_down does on
//    v1model). Ports are rarely down, so resubmits are rare;
//  - the new flowlet's port is pinned once it is forwarded (flowlet_port,
//    written only: the check above reads the port from `nhop`).
#ifndef METAROCE_TNA_ROUTING_P4
#define METAROCE_TNA_ROUTING_P4

#include "metadata.p4"
#include "drain.p4"

// Fields written in the same stage by different tables (the steer tables
// beside the LPM; the signature and time registers side by side) must not
// share a PHV container: the compiler would put the second a stage later.
@pa_solitary("ingress", "meta.steer_nhop")
@pa_solitary("ingress", "meta.steer_port")
@pa_solitary("ingress", "meta.steered")
@pa_solitary("ingress", "meta.flowlet_other")
@pa_solitary("ingress", "meta.flowlet_gap")
control Routing(inout ingress_headers_t hdr, inout ingress_metadata_t meta,
                in ingress_intrinsic_metadata_t ig_intr_md,
                in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    // Time registers hold the low 32 bits of the ns clock (4.29 s wrap).
    Register<bit<16>, bit<13>>(FLOWLET_SLOTS) flowlet_sig;
    Register<bit<32>, bit<13>>(FLOWLET_SLOTS) flowlet_last_seen;
    Register<bit<16>, bit<13>>(FLOWLET_SLOTS) flowlet_nhop;
    Register<bit<16>, bit<13>>(FLOWLET_SLOTS) flowlet_port;
    Register<bit<16>, bit<13>>(FLOWLET_SLOTS) flowlet_id;
    Counter<bit<32>, bit<9>>(PORT_COUNT, CounterType_t.PACKETS) new_flowlets;
    Counter<bit<32>, bit<9>>(PORT_COUNT, CounterType_t.PACKETS) steered;
    Hash<bit<16>>(HashAlgorithm_t.CRC16) selector_hash;
    // The selector's action profile takes the selector's name in P4Info
    // (bf-p4c names the profile after a selector declared with a size).
    ActionSelector(GROUP_SELECTOR_SIZE, selector_hash, SelectorMode_t.FAIR) nhop_selector;
    Drain() drain;

    // 1: the slot held another flow. The slot takes this flow either way.
    RegisterAction<bit<16>, bit<13>, bit<1>>(flowlet_sig) swap_sig = {
        void apply(inout bit<16> value, out bit<1> other) {
            if (value != meta.flow_sig) {
                other = 1;
            } else {
                other = 0;
            }
            value = meta.flow_sig;
        }
    };

    // 1: the gap since the slot's last packet exceeds the timeout.
    RegisterAction<bit<32>, bit<13>, bit<1>>(flowlet_last_seen) stamp_time = {
        void apply(inout bit<32> value, out bit<1> gap) {
            // now - last > timeout, as (now - timeout) - last > 0: a
            // stateful ALU's test takes one field besides the register.
            // Exact while the gap is under timeout + 2^31 ns (2.1 s). A
            // slot never used (0) has a gap whatever the clock's half.
            // Here (now - timeout) - last > 0 is written
            // last + (timeout - now) < 0: `config` gives timeout - now in
            // stage 0 (Tofino subtracts a field from action data, not the
            // other way).
            if (value == 0 || (int<32>)(value + meta.flowlet_cutoff) < 0) {
                gap = 1;
            } else {
                gap = 0;
            }
            value = ig_prsr_md.global_tstamp[31:0];
        }
    };

    RegisterAction<bit<16>, bit<13>, bit<16>>(flowlet_id) next_flowlet_id = {
        void apply(inout bit<16> value, out bit<16> id) {
            value = value + 1;
            id = value;
        }
    };

    // A new flowlet pins its next hop; a running one reads it. One action
    // on both paths: two on one register must share a stage, which the
    // new-flowlet path (steer tables, the selector) reaches later than
    // the other, and the compiler cannot place them.
    RegisterAction<bit<16>, bit<13>, bit<16>>(flowlet_nhop) pin_or_read_nhop = {
        void apply(inout bit<16> value, out bit<16> pinned) {
            if (meta.new_flowlet) {
                value = meta.nhop_id;
            }
            pinned = value;
        }
    };

    RegisterAction<bit<16>, bit<13>, bit<16>>(flowlet_port) pin_port = {
        void apply(inout bit<16> value) {
            value = (bit<16>)ig_tm_md.ucast_egress_port;
        }
    };

    // The caller counts the reason and drops.
    action drop(bit<8> reason) {
        meta.drop_reason = reason;
    }

    action set_group(bit<16> group_id) {
        meta.group_id = group_id;
    }

    // Directly attached hosts: no group, no flowlet.
    action set_nhop(bit<16> nhop_id) {
        meta.nhop_id = nhop_id;
    }

    table ipv4_lpm {
        key = {
            hdr.ipv4.dst_addr: lpm @name("dst_addr");
        }
        actions = {
            set_group;
            set_nhop;
            @defaultonly drop;
        }
        const default_action = drop(DROP_NO_ROUTE);
        size = ROUTE_TABLE_SIZE;
    }

    action select_nhop(bit<16> nhop_id) {
        meta.nhop_id = nhop_id;
    }

    table nhop_group {
        key = {
            meta.group_id: exact @name("group_id");
            hdr.ipv4.src_addr: selector @name("src_addr");
            hdr.ipv4.dst_addr: selector @name("dst_addr");
            hdr.ipv4.protocol: selector @name("protocol");
            meta.l4_src_port: selector @name("l4_src_port");
            meta.l4_dst_port: selector @name("l4_dst_port");
            meta.dest_qp: selector @name("dest_qp");
            meta.flowlet_id: selector @name("flowlet_id");
        }
        actions = {
            select_nhop;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        implementation = nhop_selector;
        size = GROUP_SELECTOR_SIZE;
    }

    // The next hop, and its port, that a new flowlet of this flow
    // (steer_flow) or host pair (steer_pair) pins instead of drawing.
    // Looked up for every packet, beside the LPM (a lookup changes
    // nothing): only a new flowlet of a group route follows the entry.
    action steer(bit<16> nhop_id, bit<9> port) {
        meta.steer_nhop = nhop_id;
        meta.steer_port = (bit<16>)port;
        meta.steered = true;
    }

    table steer_flow {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
            meta.l4_src_port: exact @name("udp_src_port");  // 0 unless TCP or UDP
            meta.dest_qp: exact @name("dest_qp");  // BTH destination QP, 0 unless RoCEv2
        }
        actions = {
            steer;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = STEER_FLOW_TABLE_SIZE;
    }

    table steer_pair {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
        }
        actions = {
            steer;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = STEER_PAIR_TABLE_SIZE;
    }

    // The port is out of service: come back as a new flowlet that draws.
    action mark_port_down() {
        meta.resubmit.setValid();
        meta.resubmit.redraw = 1;
        meta.resubmit.pad = 0;
        ig_dprsr_md.resubmit_type = RESUBMIT_PORT_DOWN;
    }

    table port_down {
        key = {
            meta.egress_port: exact @name("port");
        }
        actions = {
            mark_port_down;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PORT_COUNT;
    }

    action forward(bit<9> port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        meta.forwarded = true;
        // port_down's key, the large-flow digest's egress port, and the
        // sink's report copy: set here rather than by a step after this
        // table's, which would cost a stage.
        meta.egress_port = (bit<16>)port;
        meta.report_copy.egress_port = (bit<16>)port;
    }

    table nhop {
        key = {
            meta.nhop_id: exact @name("nhop_id");
        }
        actions = {
            forward;
            @defaultonly drop;
        }
        const default_action = drop(DROP_NO_NHOP);
        size = NHOP_TABLE_SIZE;
    }

    // The stages (Tofino 1 has 12): the LPM spans two, the steer tables
    // sit beside it; then the slot's signature and time, the new
    // flowlet's number, the selector, the pinned next hop, `nhop`, and
    // `port_down` with what a forwarded new flowlet records. Conditions
    // test tables' results and registers' outputs directly: a flag set
    // by an action and tested after costs a stage.
    apply {
        meta.group_id = 0;
        meta.nhop_id = 0;
        meta.steered = false;
        meta.forwarded = false;
        meta.new_flowlet = false;
        // A resubmitted flowlet (its port was down) draws.
        if (!meta.redraw) {
            if (!steer_flow.apply().hit) {
                steer_pair.apply();
            }
        }
        switch (ipv4_lpm.apply().action_run) {
            set_group: {
                meta.flowlet_other = swap_sig.execute(meta.flow_slot);
                meta.flowlet_gap = stamp_time.execute(meta.flow_slot);
            }
        }
        // RoCEv2 data entering the fabric gets its mark (drain_fresh);
        // an ACK routed straight to its host updates its data's slot.
        drain.apply(hdr, meta, ig_prsr_md, ig_dprsr_md);
        if (meta.group_id != 0) {
            // A governed flow (mark bit 1) starts a new flowlet exactly
            // on a fresh packet (bit 0), any other after an idle gap;
            // a slot another flow took, or a redraw, starts one too.
            if (meta.flowlet_other == 1 || meta.redraw
                    || meta.drain_arrived == BTH_MARK_FRESH || meta.drain_fresh == 1
                    || (meta.drain_arrived[1:1] == 0 && meta.drain_kind != DRAIN_KIND_DATA
                        && meta.flowlet_gap == 1)) {
                meta.new_flowlet = true;
                if (meta.steered) {
                    meta.nhop_id = meta.steer_nhop;
                } else {
                    meta.flowlet_id = next_flowlet_id.execute(meta.flow_slot);
                    nhop_group.apply();
                }
            }
            meta.nhop_id = pin_or_read_nhop.execute(meta.flow_slot);
        }
        // A route's drop (no route) set drop_reason: the caller drops.
        if (meta.drop_reason == 0) {
            nhop.apply();
        }
        if (meta.forwarded && meta.group_id != 0) {
            // A drawn new flowlet checks nothing (PORT_NONE on v1model).
            if (!meta.new_flowlet || meta.steered) {
                if (port_down.apply().hit) {
                    return;
                }
            }
            if (meta.new_flowlet) {
                pin_port.execute(meta.flow_slot);
                new_flowlets.count(ig_tm_md.ucast_egress_port);
                if (meta.steered) {
                    steered.count(ig_tm_md.ucast_egress_port);
                }
            }
        }
    }
}

#endif
