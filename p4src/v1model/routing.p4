// Routing: LPM to a weighted next-hop group, flowlet pinning, next hop.
//
// A new flowlet draws a member from the group's action selector, whose
// hash covers the flow's RoCE entropy and its flowlet number; the chosen
// next hop is pinned in registers and reused for the rest of the flowlet,
// so rewriting a group never moves a running flowlet. A pinned next hop
// whose port the controller marked down (port_down) starts a new flowlet
// at once: fast failover without waiting for the gap.
#ifndef METAROCE_V1MODEL_ROUTING_P4
#define METAROCE_V1MODEL_ROUTING_P4

#include "metadata.p4"

control Routing(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    register<bit<16>>(FLOWLET_SLOTS) flowlet_sig;
    register<bit<48>>(FLOWLET_SLOTS) flowlet_last_seen;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_nhop;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_port;
    register<bit<16>>(FLOWLET_SLOTS) flowlet_id;
    counter(PORT_COUNT, CounterType.packets) new_flowlets;
    action_selector(HashAlgorithm.crc16, GROUP_SELECTOR_SIZE, GROUP_SELECTOR_HASH_BITS) nhop_selector;

    bit<16> pinned_nhop = 0;
    bit<16> pinned_port = 0;
    bit<1> pinned_port_down = 0;

    action drop(bit<8> reason) {
        meta.drop_reason = reason;
        mark_to_drop(standard_metadata);
    }

    action set_group(bit<16> group_id) {
        meta.group_id = group_id;
        meta.routed = 1;
    }

    // Directly attached hosts: no group, no flowlet.
    action set_nhop(bit<16> nhop_id) {
        meta.nhop_id = nhop_id;
        meta.routed = 1;
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
            meta.entropy: selector @name("dest_qp");
            meta.flowlet_id: selector @name("flowlet_id");
        }
        actions = {
            select_nhop;
        }
        implementation = nhop_selector;
        size = GROUP_SELECTOR_SIZE;
    }

    action mark_port_down() {
        pinned_port_down = 1;
    }

    // Ports the controller has taken out of service.
    table port_down {
        key = {
            pinned_port: exact @name("port");
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
        if (hdr.ipv4.ttl <= 1) {
            drop(DROP_TTL_EXPIRED);
            return;
        }
        if (!ipv4_lpm.apply().hit) {
            return;
        }
        if (meta.group_id != 0) {
            bit<32> slot = meta.flow_hash & (FLOWLET_SLOTS - 1);
            bit<16> sig;
            bit<48> last_seen;
            flowlet_sig.read(sig, slot);
            flowlet_last_seen.read(last_seen, slot);
            flowlet_nhop.read(pinned_nhop, slot);
            flowlet_port.read(pinned_port, slot);
            flowlet_id.read(meta.flowlet_id, slot);
            port_down.apply();
            bit<48> now = standard_metadata.ingress_global_timestamp;
            if (sig != meta.flow_sig || now - last_seen > meta.flowlet_timeout || pinned_port_down == 1) {
                meta.new_flowlet = 1;
                meta.flowlet_id = meta.flowlet_id + 1;
                nhop_group.apply();
                flowlet_sig.write(slot, meta.flow_sig);
                flowlet_nhop.write(slot, meta.nhop_id);
                flowlet_id.write(slot, meta.flowlet_id);
            } else {
                meta.nhop_id = pinned_nhop;
            }
            flowlet_last_seen.write(slot, now);
        }
        if (nhop.apply().hit) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            if (meta.new_flowlet == 1) {
                bit<32> slot = meta.flow_hash & (FLOWLET_SLOTS - 1);
                flowlet_port.write(slot, (bit<16>)standard_metadata.egress_spec);
                new_flowlets.count((bit<32>)standard_metadata.egress_spec);
            }
        }
    }
}

#endif
