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
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_sig;
    register<bit<48>, bit<32>>(FLOWLET_SLOTS) flowlet_last_seen;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_nhop;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_port;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_id;
    counter<bit<9>>(PORT_COUNT, CounterType.packets) new_flowlets;
    action_selector(HashAlgorithm.crc16, GROUP_SELECTOR_SIZE, GROUP_SELECTOR_HASH_BITS) nhop_selector;


    // Counted by reason, and the end of ingress for the packet.
    action drop(bit<8> reason) {
        mark_to_drop(standard_metadata);
        drop_reasons.count(reason);
        exit;
    }

    HIDDEN_STEP(new_flowlet_sig, meta.scratch_16 = meta.flow_hash[31:16];)
    HIDDEN_STEP(new_flowlet_port, meta.scratch_16 = (bit<16>)standard_metadata.egress_spec;)

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

    // A hit is all that matters (see apply).
    action mark_port_down() {
    }

    // Ports the controller has taken out of service.
    table port_down {
        key = {
            meta.scratch_16: exact @name("port");  // the flowlet's pinned port
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
        switch (ipv4_lpm.apply().action_run) {
            set_group: {
                read_slot.apply();
                // Same flow (signature), within the timeout and its port
                // in service: the flowlet goes on. Otherwise a new one
                // starts.
                if (meta.flowlet_id == meta.flow_hash[31:16]
                        && standard_metadata.ingress_global_timestamp - meta.scratch_time
                           <= CFG_FLOWLET_TIMEOUT(meta)) {
                    if (port_down.apply().hit) {  // key: the pinned port
                        FLAG_NEW_FLOWLET(meta) = 1;
                    }
                } else {
                    FLAG_NEW_FLOWLET(meta) = 1;
                }
                if (FLAG_NEW_FLOWLET(meta) == 1) {
                    flowlet_id.read(meta.flowlet_id, meta.flow_slot);
                    meta.flowlet_id = meta.flowlet_id + 1;
                    nhop_group.apply();
                    new_flowlet_sig.apply();
                    flowlet_sig.write(meta.flow_slot, meta.scratch_16);
                    flowlet_nhop.write(meta.flow_slot, meta.nhop_id);
                    flowlet_id.write(meta.flow_slot, meta.flowlet_id);
                }
            }
            set_nhop: {
                // The flow hash serves flowlets and the INT sink's report
                // sampling; packets routed straight to a next hop
                // without INT skip it.
                if (hdr.int_hdr.isValid()) {
                    flow_hash();
                }
            }
        }
        // A new flowlet that is forwarded (the next hop exists) pins its
        // port.
        if (nhop.apply().hit) {
            if (FLAG_NEW_FLOWLET(meta) == 1) {
                new_flowlet_port.apply();
                flowlet_port.write(meta.flow_slot, meta.scratch_16);
                new_flowlets.count(standard_metadata.egress_spec);
            }
        }
    }
}

#endif
