"""Static forwarding over Thrift, for running without the controller.

The controller owns forwarding (P4Runtime). Without it, the launcher can
write a plain ECMP configuration straight into BMv2 over Thrift so that the
fabric forwards: every switch gets, per destination, the neighbours on its
shortest paths (in a Clos those are the valley-free up/down paths) as an
equal-weight group of the action selector. No INT reports, no digests
(no clone sessions), no reaction. A controller that connects later pushes
the pipeline again, which empties these tables.

Names are the pipeline contract's (p4src/README.md).
"""

from collections import deque

from bmv2 import gateway_mac

ING = "MetaroceIngress"
EGR = "MetaroceEgress"
IP_MTU = 1500


def distances(topo, target):
    """Hops from every switch to switch `target` over fabric links."""
    dist = {target.name: 0}
    todo = deque([target])
    while todo:
        sw = todo.popleft()
        for kind, *rest in sw.ports.values():
            if kind != "switch":
                continue
            peer = rest[0]
            if peer.name not in dist:
                dist[peer.name] = dist[sw.name] + 1
                todo.append(peer)
    return dist


def commands(topo, sw):
    """simple_switch_CLI lines that make `sw` forward to every host."""
    f = topo.fabric
    timeout_us = int((f.get("flowlet_timeout") or 0.05) * 1e6)
    qh, ql = f.get("queue_high") or 0, f.get("queue_low") or 0
    ecn = f.get("ecn_threshold") or 0
    mine = gateway_mac(sw.device_id)
    cmds = [f"table_set_default {ING}.config {ING}.configure {sw.device_id} {timeout_us}"]
    # One next hop per port: nhop_id = port number.
    for port, (kind, *rest) in sorted(sw.ports.items()):
        if kind == "host":
            host = rest[0]
            cmds.append(f"table_add {ING}.routing.nhop {ING}.routing.forward {port} => {port} {mine} {host.mac}")
            cmds.append(f"table_add {ING}.ingress_port_role {ING}.set_edge {port} =>")
            cmds.append(f"table_add {EGR}.egress_port_config {EGR}.set_port {port} => 1 {IP_MTU} {qh} {ql} {ecn}")
        else:
            peer = rest[0]
            cmds.append(f"table_add {ING}.routing.nhop {ING}.routing.forward {port} => "
                        f"{port} {mine} {gateway_mac(peer.device_id)}")
            cmds.append(f"table_add {EGR}.egress_port_config {EGR}.set_port {port} => 0 0 {qh} {ql} {ecn}")
    members, groups = {}, {}
    sel = f"{ING}.routing.nhop_selector"

    def nhops_to(leaf):
        dist = distances(topo, leaf)
        here = dist.get(sw.name)
        if here is None:
            return []
        return sorted(port for port, (kind, *rest) in sw.ports.items()
                      if kind == "switch" and dist.get(rest[0].name) == here - 1)

    def route(prefix, ports):
        if len(ports) == 1:
            cmds.append(f"table_add {ING}.routing.ipv4_lpm {ING}.routing.set_nhop {prefix} => {ports[0]}")
            return
        key = tuple(ports)
        if key not in groups:
            for p in ports:
                if p not in members:
                    members[p] = len(members)  # BMv2 hands out member handles 0, 1, ...
                    cmds.append(f"act_prof_create_member {sel} {ING}.routing.select_nhop {p}")
            handle = len(groups)
            cmds.append(f"act_prof_create_group {sel}")
            for p in ports:
                cmds.append(f"act_prof_add_member_to_group {sel} {members[p]} {handle}")
            gid = handle + 1  # group_id 0 is reserved
            cmds.append(f"table_indirect_add_with_group {ING}.routing.nhop_group {gid} => {handle}")
            groups[key] = gid
        cmds.append(f"table_add {ING}.routing.ipv4_lpm {ING}.routing.set_group {prefix} => {groups[key]}")

    by_leaf = {}
    for h in topo.hosts.values():
        by_leaf.setdefault(h.leaf.name, []).append(h)
    for leaf_name, hosts in sorted(by_leaf.items()):
        leaf = topo.switches[leaf_name]
        if leaf is sw:
            for h in hosts:
                cmds.append(f"table_add {ING}.routing.ipv4_lpm {ING}.routing.set_nhop {h.ip}/32 => {h.port}")
            continue
        ports = nhops_to(leaf)
        if not ports:
            continue
        if leaf.subnet is not None:
            route(str(leaf.subnet), ports)
        else:
            for h in hosts:
                route(f"{h.ip}/32", ports)
    return cmds
