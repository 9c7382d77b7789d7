"""BMv2 (simple_switch_grpc) as a Mininet switch, and its Thrift CLI.

A switch runs in the root network namespace (like OVS would); its ports
are the root ends of veth pairs named PREFIX<device_id>p<port> (`mr1p3`
is port 3 of device 1), so the port numbers are the YAML's and every
leftover is recognisable by name.
"""

import ctypes
import os
import signal
import socket
import subprocess
import time

from mininet.node import Switch

SWITCH_BIN = "simple_switch_grpc"
CLI_BIN = "simple_switch_CLI"
CPU_PORT = 255


def intf_name(prefix, device_id, port):
    """Root-namespace name of a switch port; at most 15 characters."""
    return f"{prefix}{device_id}p{port}"


def gateway_mac(device_id):
    """The MAC a switch uses on every port, and hosts' static ARP target.

    02:fe followed by the device id (32 bits, big endian): locally
    administered, unicast, and never equal to a host MAC from the shipped
    topologies (they all start 02:00). BMv2 does not check the destination
    MAC of what it receives, so this is a convention, not a requirement.
    """
    d = device_id & 0xFFFFFFFF
    return "02:fe:" + ":".join(f"{(d >> s) & 0xff:02x}" for s in (24, 16, 8, 0))


def _die_with_parent():
    """preexec_fn: SIGTERM the child if the launcher dies (even by SIGKILL)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except OSError:
        pass
    os.setpgrp()  # Ctrl-C at the terminal goes to the launcher, which tears down in order


def listening(port):
    """Is some socket listening on TCP `port`? Read from /proc, without connecting:
    a probe connection would leave a TIME-WAIT behind on the server's port."""
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                next(f)
                for line in f:
                    parts = line.split()
                    if parts[3] == "0A" and int(parts[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            continue
    return False


def port_open(host, port, timeout=0.2):
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


class BMv2Switch(Switch):
    """One simple_switch_grpc; `ports` maps YAML port numbers to interface names."""

    def __init__(self, name, device_id=0, grpc_addr="127.0.0.1:9559", thrift_port=9090,
                 json_path=None, ports=None, run_dir="/tmp", **params):
        params.setdefault("dpid", f"{device_id + 1:016x}")
        Switch.__init__(self, name, **params)
        self.device_id = device_id
        self.grpc_addr = grpc_addr
        self.thrift_port = thrift_port
        self.json_path = json_path
        self.port_map = dict(ports or {})
        self.run_dir = run_dir
        self.log_path = os.path.join(run_dir, f"{name}.log")
        self.proc = None

    def command(self):
        cmd = [SWITCH_BIN, "--device-id", str(self.device_id), "--thrift-port", str(self.thrift_port),
               "--notifications-addr", f"ipc://{self.run_dir}/{self.name}-notifications.ipc"]
        for port, intf in sorted(self.port_map.items()):
            cmd += ["-i", f"{port}@{intf}"]
        cmd += [self.json_path] if self.json_path else ["--no-p4"]
        # No --log-console/--log-file: logging off, for speed.
        cmd += ["--", "--grpc-server-addr", self.grpc_addr, "--cpu-port", str(CPU_PORT)]
        return cmd

    def start(self, controllers=None):
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        log.close()

    def wait_ready(self, timeout=30.0):
        """Wait until Thrift and gRPC accept connections; raise with the log tail if not."""
        gport = self.grpc_addr.rsplit(":", 1)[1]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: simple_switch_grpc exited with {self.proc.returncode}:\n"
                                   + self.log_tail())
            if listening(self.thrift_port) and listening(int(gport)):
                return
            time.sleep(0.1)
        raise RuntimeError(f"{self.name}: simple_switch_grpc not ready after {timeout:.0f}s "
                           f"(thrift {self.thrift_port}, gRPC {self.grpc_addr}):\n" + self.log_tail())

    def log_tail(self, lines=15):
        try:
            with open(self.log_path, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, deleteIntfs=True):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        Switch.stop(self, deleteIntfs)

    def cli(self, commands, check=True):
        """Run simple_switch_CLI commands (one string per line); return the output."""
        return run_cli(self.thrift_port, commands, check=check, who=self.name)


def run_cli(thrift_port, commands, check=True, who="switch"):
    out = subprocess.run([CLI_BIN, "--thrift-port", str(thrift_port)], input="\n".join(commands) + "\n",
                         capture_output=True, text=True, timeout=60)
    text = out.stdout + out.stderr
    if check:
        bad = [ln for ln in text.splitlines() if _is_error(ln)]
        if out.returncode != 0 or bad:
            raise RuntimeError(f"{who}: simple_switch_CLI failed: " + ("; ".join(bad[:5]) or text[-500:]))
    return text


def _is_error(line):
    low = line.lower()
    return ("error" in low or "invalid" in low or "exception" in low) and "no error" not in low


def queue_commands(port_rates, port_depths):
    """set_queue_rate/set_queue_depth per egress port (pps, packets)."""
    cmds = []
    for port, pps in sorted(port_rates.items()):
        cmds.append(f"set_queue_rate {max(1, int(pps))} {port}")
    for port, depth in sorted(port_depths.items()):
        cmds.append(f"set_queue_depth {max(1, int(depth))} {port}")
    return cmds


def thrift_ports(thrift_port):
    """BMv2's own port list over Thrift: {port: interface name}."""
    text = run_cli(thrift_port, ["show_ports"], check=False)
    ports = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0].isdigit():
            ports[int(parts[0])] = parts[1]
    return ports
