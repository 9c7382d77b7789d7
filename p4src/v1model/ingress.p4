// Ingress: controller packet I/O, sanity checks, routing, INT watchlist,
// and the threshold digests that egress hands back by recirculation
// (v1model allows digests only in ingress).
#ifndef METAROCE_V1MODEL_INGRESS_P4
#define METAROCE_V1MODEL_INGRESS_P4

#include "metadata.p4"

// Dropped packets by reason. Every drop action counts its own reason, so
// a forwarded packet pays nothing for it; the counter is declared outside
// the controls so that Routing's drops count in it too, under its name in
// the contract.
@name(".MetaroceIngress.drop_reasons")
counter<bit<8>>(DROP_REASON_COUNT, CounterType.packets) drop_reasons;

#include "routing.p4"
#include "large_flows.p4"

control MetaroceIngress(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    Routing() routing;
    LargeFlows() large_flows;

    // Switch-wide settings: the default action of a keyless table, which the
    // controller rewrites. Defaults suit BMv2 (timestamps in microseconds).
    action configure(bit<32> switch_id, bit<48> flowlet_timeout_us) {
        meta.config = switch_id ++ flowlet_timeout_us;
    }

    table config {
        key = {}
        actions = {
            configure;
        }
        default_action = configure(0, 50000);
    }

    // Noted for routing (the drain rule marks data entering the fabric)
    // and for the INT watchlist and the large-flow detector after it.
    action set_edge() {
        FLAG_EDGE(meta) = 1;
    }

    // Host-facing ports: where INT sources instrument traffic, and where
    // the large-flow detector watches flows enter the fabric.
    table ingress_port_role {
        key = {
            standard_metadata.ingress_port: exact @name("port");
        }
        actions = {
            set_edge;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = PORT_COUNT;
    }

    action int_source(bit<8> max_hops) {
        FLAG_INT_SOURCE(meta) = 1w1 ++ max_hops;
    }

    // Flows to instrument with INT-MD at the source leaf (UDP only).
    table int_watchlist {
        key = {
            hdr.ipv4.src_addr: ternary @name("src_addr");
            hdr.ipv4.dst_addr: ternary @name("dst_addr");
            hdr.udp.dst_port: ternary @name("l4_dst_port");  // applied to UDP only
        }
        actions = {
            int_source;
            @defaultonly NoAction;
        }
        const default_action = NoAction();
        size = INT_WATCHLIST_SIZE;
    }

    action drop(bit<8> reason) {
        mark_to_drop(standard_metadata);
        drop_reasons.count(reason);
    }

    action to_cpu(bit<8> reason) {
        standard_metadata.egress_spec = CPU_PORT;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = (bit<16>)standard_metadata.ingress_port;
        hdr.packet_in.reason = reason;
        hdr.packet_in.reserved = 0;
    }

    apply {
        // The common case, a well-formed IPv4 packet from a port with TTL
        // to spare, is one condition rather than one per check below.
        if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_NORMAL && !hdr.packet_out.isValid()
                && standard_metadata.parser_error == error.NoError && standard_metadata.checksum_error == 0
                && hdr.ipv4.isValid() && hdr.ipv4.ttl > 1) {
            config.apply();
            // Only UDP from a host-facing port can become an INT source,
            // have its RoCEv2 data marked by the drain rule, or be watched
            // for large flows.
            if (hdr.udp.isValid() && !hdr.int_hdr.isValid()) {
                ingress_port_role.apply();
            }
            // A packet that is not forwarded ends ingress here (exit).
            routing.apply(hdr, meta, standard_metadata);
            // Routing decided first: the detector reports the egress port;
            // nothing in routing reads the INT flag. Only flows routed to
            // a group are watched for large flows.
            if (FLAG_EDGE(meta) == 1) {
                int_watchlist.apply();
                if (meta.group_id != 0) {
                    large_flows.apply(hdr, meta, standard_metadata);
                }
            }
        } else if (standard_metadata.instance_type == PKT_INSTANCE_TYPE_RECIRC && IS_DIGEST_COPY(meta)) {
            digest<queue_digest_t>(DIGEST_QUEUE, { DIGEST_DATA(meta, 167, 136), DIGEST_DATA(meta, 135, 120),
                                                  DIGEST_DATA(meta, 119, 88), DIGEST_DATA(meta, 87, 40),
                                                  DIGEST_DATA(meta, 39, 8), DIGEST_DATA(meta, 7, 0) });
            mark_to_drop(standard_metadata);
        } else if (hdr.packet_out.isValid()) {
            standard_metadata.egress_spec = (bit<9>)hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else if (standard_metadata.parser_error != error.NoError) {
            if (standard_metadata.parser_error == error.IntUnsupported
                    || standard_metadata.parser_error == error.IntStackMalformed) {
                drop(DROP_INT_MALFORMED);
            } else if (standard_metadata.parser_error == error.IPv4IncorrectVersion
                    || standard_metadata.parser_error == error.IPv4OptionsNotSupported) {
                drop(DROP_IPV4_INVALID);
            } else {
                drop(DROP_PARSER_ERROR);
            }
        } else if (standard_metadata.checksum_error == 1) {
            drop(DROP_IPV4_INVALID);
        } else if (hdr.ipv4.isValid() && standard_metadata.instance_type == PKT_INSTANCE_TYPE_NORMAL) {
            // Well-formed IPv4 that failed only the common case's TTL test.
            drop(DROP_TTL_EXPIRED);
        } else if (hdr.ethernet.ether_type == ETHERTYPE_ARP) {
            to_cpu(PACKET_IN_ARP);
        } else {
            drop(DROP_UNSUPPORTED);
        }
    }
}

#endif
