// metaroce data plane for the Tofino Native Architecture (Tofino 1;
// bf-p4c --target tofino --arch tna). This file only wires the controls;
// each lives in its own file. Control-plane names are those of
// ../v1model (a test compares the two P4Infos); p4src/README.md says
// where the behaviour differs and why.
#include <core.p4>
#include <tna.p4>

#include "../shared/constants.p4"
#include "../shared/sizes.p4"
#include "../shared/headers.p4"
#include "metadata.p4"
#include "parser.p4"
#include "ingress.p4"
#include "egress.p4"

Pipeline(MetaroceIngressParser(), MetaroceIngress(), MetaroceIngressDeparser(),
         MetaroceEgressParser(), MetaroceEgress(), MetaroceEgressDeparser()) pipe;

Switch(pipe) main;
