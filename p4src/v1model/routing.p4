// Routing: LPM to a weighted next-hop group, flowlet pinning, steering,
// next hop.
//
// A new flowlet draws a member from the group's action selector, whose
// hash covers the flow's RoCE entropy and its flowlet number; the chosen
// next hop is pinned in registers and reused for the rest of the flowlet,
// so rewriting a group never moves a running flowlet. A pinned next hop
// whose port the controller marked down (port_down) starts a new flowlet
// at once: fast failover without waiting for the gap.
//
// A new flowlet first looks its flow up in steer_flow, then (on a miss)
// its host pair in steer_pair: a hit pins the entry's next hop instead of
// a draw, unless the entry's port is down, when the group draws as if
// there were no entry (failover beats steering). A running flowlet never
// looks: a steer entry moves a flow only at its next flowlet boundary.
//
// Where a flowlet ends depends on the flow. A flow that follows the drain
// rule (drain.p4; its first leaf marks every packet) starts a new flowlet
// exactly on a packet marked fresh: nothing of it is in flight, so no
// path it takes can reorder it. Every other flow starts one after an idle
// gap longer than the flowlet timeout. A slot that another flow took
// (signature) or a down port starts one for either.
#ifndef METAROCE_V1MODEL_ROUTING_P4
#define METAROCE_V1MODEL_ROUTING_P4

#include "metadata.p4"
#include "drain.p4"

control Routing(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_sig;
    register<bit<48>, bit<32>>(FLOWLET_SLOTS) flowlet_last_seen;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_nhop;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_port;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_id;
    counter<bit<9>>(PORT_COUNT, CounterType.packets) new_flowlets;
    counter<bit<9>>(PORT_COUNT, CounterType.packets) steered;
    action_selector(HashAlgorithm.crc16, GROUP_SELECTOR_SIZE, GROUP_SELECTOR_HASH_BITS) nhop_selector;
    Drain() drain;


    // Counted by reason, and the end of ingress for the packet.
    action drop(bit<8> reason) {
        mark_to_drop(standard_metadata);
        drop_reasons.count(reason);
        exit;
    }

    HIDDEN_STEP(new_flowlet_sig, meta.scratch_16 = meta.flow_hash[31:16];)
    HIDDEN_STEP(new_flowlet_port, meta.scratch_16 = (bit<16>)standard_metadata.egress_spec;)
    // A new flowlet checks no port unless a steer entry names one: no
    // port_down entry has this key (ports are 9 bits).
    HIDDEN_STEP(no_port_to_check, meta.scratch_16 = PORT_NONE;)

    // One hash: its low bits index the flowlet slot, its high 16 bits are
    // the slot's signature.
    @hidden action flow_hash() {
        hash(meta.flow_hash, HashAlgorithm.crc32, 32w0, hdr.flow_key, 32w0xffffffff);
        meta.flow_slot = meta.flow_hash & (FLOWLET_SLOTS - 1);
    }

    // What the flowlet check needs from the flow's slot, in one step (BMv2
    // pays per table applied): its signature (into flowlet_id, until a new
    // flowlet reads the number), last packet time, pinned port and next
    // hop; and the slot is stamped with this packet's time, as every packet
    // of a group does.
    HIDDEN_STEP(read_slot,
        flowlet_sig.read(meta.flowlet_id, meta.flow_slot);
        flowlet_last_seen.read(meta.scratch_time, meta.flow_slot);
        flowlet_last_seen.write(meta.flow_slot, standard_metadata.ingress_global_timestamp);
        flowlet_port.read(meta.scratch_16, meta.flow_slot);
        flowlet_nhop.read(meta.nhop_id, meta.flow_slot);)

    // The flow hash, in the route's own action.
    action set_group(bit<16> group_id) {
        meta.group_id = group_id;
        flow_hash();
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
            hdr.flow_key.l4_ports: selector @name("l4_ports");  // source ++ destination
            hdr.flow_key.entropy: selector @name("dest_qp");
            meta.flowlet_id: selector @name("flowlet_id");
        }
        actions = {
            select_nhop;
        }
        implementation = nhop_selector;
        size = GROUP_SELECTOR_SIZE;
    }

    // The next hop, and its port for the port_down check, that a new
    // flowlet of this flow (steer_flow) or host pair (steer_pair) pins
    // instead of drawing from the group. `port` must be the next hop's
    // own (the controller checks it; the pinned port is the next hop's).
    action steer(bit<16> nhop_id, bit<9> port) {
        meta.nhop_id = nhop_id;
        meta.scratch_16 = (bit<16>)port;
        FLAG_STEERED(meta) = 1;
    }

    // Exact tables (SRAM on Tofino, no TCAM), one per granularity: the
    // flow's entry takes precedence over its pair's (applied on a miss).
    table steer_flow {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
            hdr.flow_key.l4_ports[31:16]: exact @name("udp_src_port");  // 0 unless TCP or UDP
            hdr.flow_key.entropy: exact @name("dest_qp");  // BTH destination QP, 0 unless RoCEv2
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

    // A port out of service: a steer entry on it does not hold, and the
    // next hop read from the flowlet's slot is forgotten, so that whatever
    // the group gives (nothing, if its entry were missing: next hop 0,
    // which no next hop has, drops) never leaves on the down port.
    action mark_port_down() {
        meta.nhop_id = 0;
        FLAG_NEW_FLOWLET(meta) = 1;
        FLAG_STEERED(meta) = 0;
    }

    // Ports the controller has taken out of service.
    table port_down {
        key = {
            // The port to check: the running flowlet's pinned port, a
            // new flowlet's steer entry's, or PORT_NONE.
            meta.scratch_16: exact @name("port");
        }
        actions = {
            mark_port_down;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PORT_COUNT;
    }

    action forward(bit<9> port, mac_addr_t src_mac, mac_addr_t dst_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.src_addr = src_mac;
        hdr.ethernet.dst_addr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
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

    apply {
        // TTL expiry is dropped by the caller (its common-case test).
        // No route: the default action drops and ends ingress (exit).
        // set_group sets a group (never 0); set_nhop leaves it 0.
        ipv4_lpm.apply();
        // RoCEv2 data entering the fabric gets its mark; an ACK routed
        // straight to its host (the sender's leaf) updates its data's slot.
        // (Drain checks which; BMv2 evaluates every term of a condition,
        // so other packets pay for one test.)
        if (hdr.bth.isValid()) {
            drain.apply(hdr, meta, standard_metadata);
        }
        if (meta.group_id != 0) {
            read_slot.apply();
            // Same flow (signature): the flowlet goes on, on its pinned
            // next hop, unless its port is down (below), until a fresh
            // packet if the flow follows the drain rule, else until an
            // idle gap past the timeout. Otherwise a new one starts: its
            // steer entry, if it has one, else the group.
            if (hdr.bth.isValid() && hdr.bth.reserved0[1:1] == 1) {
                if (meta.flowlet_id != meta.flow_hash[31:16] || hdr.bth.reserved0[0:0] == 1) {
                    FLAG_NEW_FLOWLET(meta) = 1;
                }
            } else if (meta.flowlet_id != meta.flow_hash[31:16]
                    || standard_metadata.ingress_global_timestamp - meta.scratch_time
                       > CFG_FLOWLET_TIMEOUT(meta)) {
                FLAG_NEW_FLOWLET(meta) = 1;
            }
            if (FLAG_NEW_FLOWLET(meta) == 1) {
                no_port_to_check.apply();
                if (!steer_flow.apply().hit) {
                    steer_pair.apply();
                }
            }
            // A down port turns a running flowlet into a new one, and
            // a steered new flowlet into a drawn one (mark_port_down).
            port_down.apply();
            if (FLAG_NEW_FLOWLET(meta) == 1) {
                if (FLAG_STEERED(meta) == 0) {
                    flowlet_id.read(meta.flowlet_id, meta.flow_slot);
                    meta.flowlet_id = meta.flowlet_id + 1;
                    nhop_group.apply();
                    flowlet_id.write(meta.flow_slot, meta.flowlet_id);
                }
                new_flowlet_sig.apply();
                flowlet_sig.write(meta.flow_slot, meta.scratch_16);
                flowlet_nhop.write(meta.flow_slot, meta.nhop_id);
            }
        } else if (hdr.int_hdr.isValid()) {
            // The flow hash serves flowlets and the INT sink's report
            // sampling; packets routed straight to a next hop without INT
            // skip it.
            flow_hash();
        }
        // A new flowlet that is forwarded (the next hop exists) pins its
        // port.
        if (nhop.apply().hit) {
            if (FLAG_NEW_FLOWLET(meta) == 1) {
                new_flowlet_port.apply();
                flowlet_port.write(meta.flow_slot, meta.scratch_16);
                new_flowlets.count(standard_metadata.egress_spec);
                if (FLAG_STEERED(meta) == 1) {
                    steered.count(standard_metadata.egress_spec);
                }
            }
        }
    }
}

#endif
