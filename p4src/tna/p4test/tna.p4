// A stand-in for TNA's <tna.p4>, used only to write the TNA program's
// P4Info with p4test (p4src/tna-p4info.sh); the data plane is always built
// by bf-p4c against the real tna.p4.
//
// Why: p4test has no P4Runtime handler for TNA. Its PSA handler serializes
// what the P4Info needs (tables, actions, action selectors, counters,
// registers, digests, controller headers) and finds the externs by the
// names TNA shares with PSA, but it reads two things by PSA's spelling:
// a counter's size parameter (`n_counters`, TNA's is `size`) and a table's
// implementation property (`psa_implementation`). This file declares what
// p4src/tna uses, with TNA's shapes (types, type parameters, field widths)
// and those two spellings; nothing in it reaches the P4Info except
// through the program's own declarations.
#ifndef METAROCE_TNA_P4TEST_STANDIN
#define METAROCE_TNA_P4TEST_STANDIN

#include <core.p4>

#define TABLE_IMPLEMENTATION psa_implementation

// The match kind of a table's selector fields.
match_kind { selector }

const bit<32> PORT_METADATA_SIZE = 64;

typedef bit<3> MirrorType_t;
typedef bit<10> MirrorId_t;
typedef bit<3> DigestType_t;
typedef bit<3> ResubmitType_t;

enum CounterType_t { PACKETS, BYTES, PACKETS_AND_BYTES }
enum SelectorMode_t { FAIR, RESILIENT }
enum HashAlgorithm_t { IDENTITY, RANDOM, CRC8, CRC16, CRC32, CRC64, CUSTOM }

header ingress_intrinsic_metadata_t {
    bit<1> resubmit_flag;
    bit<1> pad1;
    bit<2> packet_version;
    bit<3> pad2;
    bit<9> ingress_port;
    bit<48> ingress_mac_tstamp;
}

struct ingress_intrinsic_metadata_for_tm_t {
    bit<9> ucast_egress_port;
    bit<1> bypass_egress;
    bit<3> ingress_cos;
    bit<5> qid;
}

struct ingress_intrinsic_metadata_from_parser_t {
    bit<48> global_tstamp;
    bit<32> global_ver;
    bit<16> parser_err;
}

struct ingress_intrinsic_metadata_for_deparser_t {
    bit<3> drop_ctl;
    DigestType_t digest_type;
    ResubmitType_t resubmit_type;
    MirrorType_t mirror_type;
}

header egress_intrinsic_metadata_t {
    bit<7> pad0;
    bit<9> egress_port;
    bit<5> pad1;
    bit<19> enq_qdepth;
    bit<6> pad2;
    bit<2> enq_congest_stat;
    bit<14> pad3;
    bit<18> enq_tstamp;
    bit<5> pad4;
    bit<19> deq_qdepth;
    bit<16> pkt_length;
}

struct egress_intrinsic_metadata_from_parser_t {
    bit<48> global_tstamp;
    bit<32> global_ver;
    bit<16> parser_err;
}

struct egress_intrinsic_metadata_for_deparser_t {
    bit<3> drop_ctl;
    MirrorType_t mirror_type;
    bit<1> coalesce_flush;
    bit<7> coalesce_length;
}

struct egress_intrinsic_metadata_for_output_port_t {
    bit<1> capture_tstamp_on_tx;
    bit<1> update_delay_on_tx;
}

extern Checksum {
    Checksum();
    void add<T>(in T data);
    bool verify();
    bit<16> update<T>(in T data);
}

extern Hash<W> {
    Hash(HashAlgorithm_t algo);
    W get<D>(in D data);
}

@noWarn("unused")
extern Counter<W, I> {
    Counter(bit<32> n_counters, CounterType_t type);
    void count(in I index);
}

extern Register<T, I> {
    Register(bit<32> size);
    T read(in I index);
    T write(in I index, in T value);
}

extern RegisterAction<T, I, U> {
    RegisterAction(Register<_, _> reg);
    U execute(in I index);
    @synchronous(execute)
    abstract void apply(inout T value, @optional out U rv);
}

extern ActionSelector {
    ActionSelector(bit<32> size, Hash<_> hash, SelectorMode_t mode);
}

extern Mirror {
    Mirror();
    void emit<T>(in MirrorId_t session_id, in T hdr);
}

extern Resubmit {
    Resubmit();
    void emit<T>(in T hdr);
}

extern Digest<T> {
    Digest();
    void pack(in T data);
}

parser IngressParserT<H, M>(packet_in pkt, out H hdr, out M ig_md,
                            @optional out ingress_intrinsic_metadata_t ig_intr_md);

parser EgressParserT<H, M>(packet_in pkt, out H hdr, out M eg_md,
                           @optional out egress_intrinsic_metadata_t eg_intr_md);

control IngressT<H, M>(inout H hdr, inout M ig_md,
                       @optional in ingress_intrinsic_metadata_t ig_intr_md,
                       @optional in ingress_intrinsic_metadata_from_parser_t ig_intr_md_from_prsr,
                       @optional inout ingress_intrinsic_metadata_for_deparser_t ig_intr_md_for_dprsr,
                       @optional inout ingress_intrinsic_metadata_for_tm_t ig_intr_md_for_tm);

control EgressT<H, M>(inout H hdr, inout M eg_md,
                      @optional in egress_intrinsic_metadata_t eg_intr_md,
                      @optional in egress_intrinsic_metadata_from_parser_t eg_intr_md_from_prsr,
                      @optional inout egress_intrinsic_metadata_for_deparser_t eg_intr_md_for_dprsr,
                      @optional inout egress_intrinsic_metadata_for_output_port_t eg_intr_md_for_oport);

control IngressDeparserT<H, M>(packet_out pkt, inout H hdr, in M metadata,
                               @optional in ingress_intrinsic_metadata_for_deparser_t ig_intr_md_for_dprsr);

control EgressDeparserT<H, M>(packet_out pkt, inout H hdr, in M metadata,
                              @optional in egress_intrinsic_metadata_for_deparser_t eg_intr_md_for_dprsr);

package Pipeline<IH, IM, EH, EM>(IngressParserT<IH, IM> ingress_parser, IngressT<IH, IM> ingress,
                                 IngressDeparserT<IH, IM> ingress_deparser, EgressParserT<EH, EM> egress_parser,
                                 EgressT<EH, EM> egress, EgressDeparserT<EH, EM> egress_deparser);

package Switch<IH0, IM0, EH0, EM0>(Pipeline<IH0, IM0, EH0, EM0> pipe0);

#endif
