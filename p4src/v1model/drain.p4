// The drain rule (p4src/README.md, "Moves that never reorder"): a flow
// changes path only when none of its packets is in flight.
//
// A flow's first leaf forwards its data up and the ACKs and NAKs that come
// back down to its sender, so it alone can tell when everything it
// forwarded has arrived. Per slot, keyed by the data's queue pair (IPv4
// source, destination, BTH destination QP), it keeps the owner's signature,
// the PSN after the highest it forwarded (fwd_next), the last cumulative
// acknowledgement (acked: every PSN below it arrived) and whether a NAK is
// outstanding (until an ACK moves acked on: a NAK leaves acked at or past
// the PSN it asked for, so that ACK has passed it). A data packet is fresh when its queue pair owns the slot,
// acked == fwd_next and no NAK is outstanding; the leaf marks it in the
// BTH's reserved bits (BTH_MARK_), and every switch on the path re-picks
// the flow's next hop only on a fresh packet. Every doubt is "not fresh":
// a slot another queue pair holds busy (a collision, counted), the first
// packet after taking a drained slot over, a NAK outstanding, a queue pair
// whose ACKs are not paired yet (qp_pair: the ACK carries the requester's
// QP, the data the responder's).
//
// ACKs update the slot at the sender's leaf: the switch that routes them
// straight to a host (no group). An ACK's PSN is the last one it
// acknowledges; a NAK's is the one the receiver expects.
//
// The controller learns qp_pair from drain_pair_digest_t: a data queue
// pair that takes a slot reports its QP and PSN (and again on a fresh
// packet, at most once per pair_interval_us per slot, so a lost report is
// made good and a pair can be learnt anew), and an ACK that no entry
// pairs reports its own QP and PSN (at most once per pair_interval_us per
// slot its key hashes to, so unpaired ACKs cannot flood it). A 24-bit PSN
// starts at random: an ACK's PSN just past one data queue pair's first
// PSN, between the same hosts, names it.
#ifndef METAROCE_V1MODEL_DRAIN_P4
#define METAROCE_V1MODEL_DRAIN_P4

#include "metadata.p4"

control Drain(inout headers_t hdr, inout metadata_t meta, inout standard_metadata_t standard_metadata) {
    // Per slot, as DRAIN_SIG .. DRAIN_ACKED (metadata.p4) read them; two
    // arrays of at most 64 bits (what BMv2's Thrift reads, and a Tofino
    // stateful ALU's pair of 32-bit halves holds).
    register<bit<32>, bit<16>>(DRAIN_SLOTS) slot_owner;
    register<bit<48>, bit<16>>(DRAIN_SLOTS) slot_psn;
    // When an unpaired ACK hashing to the slot was last reported (0: never).
    register<bit<48>, bit<16>>(DRAIN_SLOTS) pair_asked;
    counter<bit<8>>(DRAIN_EVENT_COUNT, CounterType.packets) events;

    // The rule on (1) or off (0, the default: flowlet gaps decide, as on
    // NICs that take packets out of order), and the least time between two
    // reports of one unpaired ACK slot: the default action of a keyless
    // table, which the controller rewrites.
    action configure(bit<1> enabled, bit<32> pair_interval_us) {
        FLAG_DRAIN_ON(meta) = enabled;
        DRAIN_PAIR_INTERVAL(meta) = pair_interval_us;
    }

    table config {
        key = {}
        actions = {
            configure;
        }
        default_action = configure(0, 1000);
    }

    // The ACK's requester QP names the data's responder QP: the slot's key
    // is the data's (source, destination, QP), the ACK's turned around.
    action pair(bit<24> data_qp) {
        hdr.flow_key.addresses = hdr.ipv4.dst_addr ++ hdr.ipv4.src_addr ++ hdr.ipv4.protocol;
        hdr.flow_key.entropy = data_qp;
    }

    // Written by the controller on a sender's leaf, one entry per queue
    // pair that sends from one of its hosts.
    // An ACK no entry pairs: its own QP stands in for the data's, so that
    // locate finds the slot its reports are limited by.
    action unpaired() {
        hdr.flow_key.addresses = hdr.ipv4.dst_addr ++ hdr.ipv4.src_addr ++ hdr.ipv4.protocol;
        hdr.flow_key.entropy = hdr.bth.dest_qp;
        FLAG_DRAIN_UNPAIRED(meta) = 1;
    }

    table qp_pair {
        key = {
            hdr.ipv4.src_addr: exact @name("src_addr");
            hdr.ipv4.dst_addr: exact @name("dst_addr");
            hdr.bth.dest_qp: exact @name("dest_qp");
        }
        actions = {
            pair;
            @defaultonly unpaired;
        }
        const default_action = unpaired();
        size = QP_PAIR_TABLE_SIZE;
    }

    // The slot of the queue pair in hdr.flow_key (addresses and QP; the
    // ports are left out, an ACK's are its own): scratch_16 its index,
    // scratch_a the signature (31 bits, never 0), and its state.
    @hidden action locate() {
        hash(meta.scratch_a, HashAlgorithm.crc32, 32w0,
             { hdr.flow_key.addresses, hdr.flow_key.entropy }, 32w0xffffffff);
        meta.scratch_16 = meta.scratch_a[15:0] & (DRAIN_SLOTS - 1);
        meta.scratch_a = 1w0 ++ meta.scratch_a[31:2] ++ 1w1;
        slot_owner.read(meta.flow_slot, meta.scratch_16);
        slot_psn.read(meta.scratch_time, meta.scratch_16);
    }
    @hidden table locate_slot {
        actions = { locate; }
        const default_action = locate();
    }

    // The queue pair takes the slot: this packet is forwarded, nothing of
    // it is acknowledged yet.
    // (Two steps: p4c would copy a value written and used in one action
    // into a temporary, which BMv2 resets for every packet.)
    HIDDEN_STEP(take_slot,
        meta.flow_slot = meta.scratch_a[30:0] ++ 1w0;
        meta.scratch_time = 24w0 ++ hdr.bth.psn_word[23:0];
        DRAIN_FWD(meta) = hdr.bth.psn_word[23:0] + 1;)
    HIDDEN_STEP(write_slot,
        slot_owner.write(meta.scratch_16, meta.flow_slot);
        slot_psn.write(meta.scratch_16, meta.scratch_time);)
    HIDDEN_STEP(forwarded,
        DRAIN_FWD(meta) = hdr.bth.psn_word[23:0] + 1;
        slot_psn.write(meta.scratch_16, meta.scratch_time);)
    // A NAK: everything below its PSN arrived (acked moves there if it was
    // behind), and a NAK is outstanding.
    HIDDEN_STEP(nak_seen,
        DRAIN_NAK(meta) = 1;
        slot_owner.write(meta.scratch_16, meta.flow_slot);
        slot_psn.write(meta.scratch_16, meta.scratch_time);)
    HIDDEN_STEP(acked,
        DRAIN_ACKED(meta) = hdr.bth.psn_word[23:0] + 1;
        slot_psn.write(meta.scratch_16, meta.scratch_time);)
    HIDDEN_STEP(nak_cleared,
        DRAIN_NAK(meta) = 0;
        slot_owner.write(meta.scratch_16, meta.flow_slot);)
    HIDDEN_STEP(read_asked, pair_asked.read(meta.scratch_time, meta.scratch_16);)
    HIDDEN_STEP(write_asked, pair_asked.write(meta.scratch_16, standard_metadata.ingress_global_timestamp);)
    // The same, where a slot is taken (a step of its own: BMv2 applies a
    // table from one place only).
    HIDDEN_STEP(stamp_asked, pair_asked.write(meta.scratch_16, standard_metadata.ingress_global_timestamp);)
    // Routing reads the flowlet slot next (flow_slot held the owner).
    HIDDEN_STEP(restore_flow_slot, meta.flow_slot = meta.flow_hash & (FLOWLET_SLOTS - 1);)

    apply {
        if (!((meta.group_id != 0 && FLAG_EDGE(meta) == 1) || (meta.group_id == 0 && hdr.aeth.isValid()))) {
            // Neither data entering the fabric nor an ACK at its sender's
            // leaf.
            return;
        }
        config.apply();
        if (meta.group_id != 0) {
            // Data entering the fabric (the caller checked the host-facing
            // port): an RC request, not an ACK, follows the rule.
            hdr.bth.reserved0[1:0] = BTH_MARK_NONE;
            if (FLAG_DRAIN_ON(meta) == 1 && hdr.bth.head[31:29] == 0
                    && hdr.bth.head[31:24] != BTH_OPCODE_RC_ACK
                    && hdr.bth.head[31:24] != BTH_OPCODE_RC_ATOMIC_ACK) {
                hdr.bth.reserved0[1:0] = BTH_MARK_GOVERNED;
                FLAG_DRAIN_SLOT(meta) = 1;
            }
        } else if (FLAG_DRAIN_ON(meta) == 1) {
            // An ACK or NAK on its way to the sender (the caller checked
            // the AETH): its data's slot if its queue pair is paired, else
            // the slot its own key hashes to (for the report's limit).
            if (!qp_pair.apply().hit) {
                events.count(DRAIN_UNKNOWN_ACK);
            }
            FLAG_DRAIN_SLOT(meta) = 1;
        }
        if (FLAG_DRAIN_SLOT(meta) == 1) {
            locate_slot.apply();
            if (meta.group_id != 0) {
                if (DRAIN_SIG(meta) == meta.scratch_a[30:0]) {
                    if (DRAINED(meta)) {
                        // Fresh: also a chance to report the queue pair
                        // again (a lost report, or a pair to learn anew).
                        hdr.bth.reserved0[1:0] = BTH_MARK_FRESH;
                        events.count(DRAIN_FRESH);
                        FLAG_DRAIN_ASK(meta) = 1;
                    }
                    if (PSN_AFTER(hdr.bth.psn_word[23:0] + 1, DRAIN_FWD(meta))) {
                        forwarded.apply();
                    }
                } else if (DRAIN_SIG(meta) == 0 || DRAINED(meta)) {
                    if (DRAIN_SIG(meta) == 0) {
                        // Never used: the queue pair's first packet here.
                        hdr.bth.reserved0[1:0] = BTH_MARK_FRESH;
                        events.count(DRAIN_FRESH);
                    } else {
                        // What it sent while it had no slot is not known:
                        // the first cumulative ACK past this packet covers it.
                        events.count(DRAIN_TAKEOVER);
                    }
                    take_slot.apply();
                    write_slot.apply();
                    stamp_asked.apply();
                    FLAG_DRAIN_REPORT(meta) = 1;
                } else {
                    events.count(DRAIN_COLLISION);
                }
            } else if (FLAG_DRAIN_UNPAIRED(meta) == 1) {
                FLAG_DRAIN_ASK(meta) = 1;
            } else if (DRAIN_SIG(meta) != meta.scratch_a[30:0]) {
                events.count(DRAIN_UNKNOWN_ACK);
            } else if (hdr.aeth.syndrome[6:5] != 0) {
                // NAK, RNR NAK (or a reserved code: a doubt all the same).
                events.count(DRAIN_NAK);
                if (PSN_AFTER(hdr.bth.psn_word[23:0], DRAIN_FWD(meta))) {
                    events.count(DRAIN_STALE_ACK);
                } else {
                    if (PSN_AFTER(hdr.bth.psn_word[23:0], DRAIN_ACKED(meta))) {
                        DRAIN_ACKED(meta) = hdr.bth.psn_word[23:0];
                    }
                    nak_seen.apply();
                }
            } else if (hdr.bth.psn_word[23:0] + 1 != DRAIN_ACKED(meta)) {
                // (A repeat of the last ACK changes nothing.)
                if (PSN_AFTER(hdr.bth.psn_word[23:0] + 1, DRAIN_ACKED(meta))
                        && !PSN_AFTER(hdr.bth.psn_word[23:0] + 1, DRAIN_FWD(meta))) {
                    if (DRAIN_NAK(meta) == 1) {
                        nak_cleared.apply();
                    }
                    acked.apply();
                } else {
                    events.count(DRAIN_STALE_ACK);
                }
            }
            // A report that waits for the slot's interval: an unpaired ACK,
            // or fresh data (its slot's state is written above already).
            if (FLAG_DRAIN_ASK(meta) == 1) {
                read_asked.apply();
                if (meta.scratch_time == 0 || standard_metadata.ingress_global_timestamp - meta.scratch_time
                        >= (bit<48>)DRAIN_PAIR_INTERVAL(meta)) {
                    write_asked.apply();
                    FLAG_DRAIN_REPORT(meta) = 1;
                }
            }
            restore_flow_slot.apply();
            // One digest call for both kinds (BMv2 copies every member that
            // is not a whole field into a field of its own, per call).
            if (FLAG_DRAIN_REPORT(meta) == 1) {
                digest<drain_pair_digest_t>(DIGEST_DRAIN_PAIR, { hdr.flow_key.addresses,
                    7w0 ++ FLAG_DRAIN_UNPAIRED(meta) ++ hdr.flow_key.entropy ++ hdr.bth.psn_word[23:0] });
            }
        }
    }
}

#endif
