// Plain IPv4 forwarding: the baseline that metaroce's BMv2 throughput is
// compared against (tests/p4/throughput/run.sh). Same parser depth for TCP
// traffic up to IPv4, one LPM table, TTL and checksum update.
#include <core.p4>
#include <v1model.p4>
header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header ipv4_t { bit<4> version; bit<4> ihl; bit<8> tos; bit<16> len; bit<16> id; bit<3> flags; bit<13> frag;
                bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst; }
struct headers_t { ethernet_t eth; ipv4_t ipv4; }
struct meta_t { }
parser P(packet_in p, out headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    state start { p.extract(h.eth); transition select(h.eth.type) { 0x0800: ip; default: accept; } }
    state ip { p.extract(h.ipv4); transition accept; }
}
control VC(inout headers_t h, inout meta_t m) { apply { } }
control I(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port, bit<48> smac, bit<48> dmac) {
        sm.egress_spec = port; h.eth.src = smac; h.eth.dst = dmac; h.ipv4.ttl = h.ipv4.ttl - 1;
    }
    table lpm { key = { h.ipv4.dst: lpm; } actions = { forward; drop; } default_action = drop(); size = 1024; }
    apply { if (h.ipv4.isValid()) { lpm.apply(); } else { drop(); } }
}
control E(inout headers_t h, inout meta_t m, inout standard_metadata_t sm) { apply { } }
control CC(inout headers_t h, inout meta_t m) {
    apply {
        update_checksum(h.ipv4.isValid(), { h.ipv4.version, h.ipv4.ihl, h.ipv4.tos, h.ipv4.len, h.ipv4.id,
            h.ipv4.flags, h.ipv4.frag, h.ipv4.ttl, h.ipv4.proto, h.ipv4.src, h.ipv4.dst }, h.ipv4.csum, HashAlgorithm.csum16);
    }
}
control D(packet_out p, in headers_t h) { apply { p.emit(h.eth); p.emit(h.ipv4); } }
V1Switch(P(), VC(), I(), E(), CC(), D()) main;
