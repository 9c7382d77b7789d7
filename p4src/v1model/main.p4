// metaroce data plane for v1model (BMv2 simple_switch_grpc).
// This file only wires the controls; each lives in its own file.
// This version of v1model lets counters and registers take an index of any
// width (a port, a reason) without a cast, which p4c turns into a
// temporary field that BMv2 resets for every packet.
#define V1MODEL_VERSION 20200408
#include <core.p4>
#include <v1model.p4>

#include "../shared/constants.p4"
#include "../shared/headers.p4"
#include "metadata.p4"
#include "parser.p4"
#include "ingress.p4"
#include "egress.p4"

V1Switch(MetaroceParser(), MetaroceVerifyChecksum(), MetaroceIngress(), MetaroceEgress(),
         MetaroceComputeChecksum(), MetaroceDeparser()) main;
