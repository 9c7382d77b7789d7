//! The BMv2 side of a run: finding the tools, veth pairs for the data
//! ports, the `simple_switch_grpc` process, and raw packet I/O on the
//! veths. Every resource is released by `Drop`, so a failing or panicking
//! run still removes its veths and kills its switch.

use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use pnet_datalink::{self as datalink, Channel, DataLinkSender};

use crate::check::Sent;

/// Data ports every case may use (1..=PORTS); 255 is the CPU port.
pub const PORTS: u32 = 5;

/// What a run needs, or why it cannot run here (one line).
#[derive(Debug, Clone)]
pub struct Tools {
    pub switch: PathBuf,
    pub ip: PathBuf,
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Finds `simple_switch_grpc` (`$SIMPLE_SWITCH_GRPC`, PATH, `/opt/p4/bin`)
/// and `ip`, and checks that we may create veth pairs.
pub fn find_tools() -> std::result::Result<Tools, String> {
    let switch = std::env::var_os("SIMPLE_SWITCH_GRPC")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| on_path("simple_switch_grpc"))
        .or_else(|| Some(PathBuf::from("/opt/p4/bin/simple_switch_grpc")).filter(|p| p.is_file()))
        .ok_or("simple_switch_grpc not installed")?;
    Ok(Tools { switch, ip: veth_tools()? })
}

/// The `ip` command, if we may also create veth pairs (root).
pub fn veth_tools() -> std::result::Result<PathBuf, String> {
    let ip = on_path("ip")
        .or_else(|| ["/usr/sbin/ip", "/sbin/ip"].into_iter().map(PathBuf::from).find(|p| p.is_file()))
        .ok_or("the `ip` command (iproute2) is not installed")?;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let uid = status.lines().find_map(|l| l.strip_prefix("Uid:")).and_then(|l| l.split_whitespace().next());
    if uid != Some("0") {
        return Err("not root: veth pairs need CAP_NET_ADMIN".into());
    }
    Ok(ip)
}

fn run_ip(ip: &Path, args: &[&str]) -> Result<()> {
    let out =
        Command::new(ip).args(args).output().with_context(|| format!("running ip {}", args.join(" ")))?;
    if !out.status.success() {
        bail!("ip {} failed: {}", args.join(" "), String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(())
}

/// Veth pairs `(port, switch end, our end)`, deleted on drop.
#[derive(Debug)]
pub struct Veths {
    ip: PathBuf,
    pub pairs: Vec<(u32, String, String)>,
}

impl Veths {
    pub fn create(ip: &Path) -> Result<Self> {
        let tag = std::process::id() % 100_000;
        let mut v = Veths { ip: ip.to_owned(), pairs: vec![] };
        for port in 1..=PORTS {
            let (a, b) = (format!("mrv{tag}s{port}"), format!("mrv{tag}h{port}"));
            run_ip(ip, &["link", "add", &a, "type", "veth", "peer", "name", &b])?;
            v.pairs.push((port, a.clone(), b.clone()));
            for end in [&a, &b] {
                // No IPv6: the kernel would send router solicitations and
                // MLD reports into the switch.
                let _ = std::fs::write(format!("/proc/sys/net/ipv6/conf/{end}/disable_ipv6"), "1");
                run_ip(ip, &["link", "set", "dev", end, "up"])?;
            }
        }
        Ok(v)
    }
}

impl Drop for Veths {
    fn drop(&mut self) {
        for (_, a, _) in &self.pairs {
            if let Err(e) = run_ip(&self.ip, &["link", "del", a]) {
                eprintln!("cleanup: {e:#}");
            }
        }
    }
}

/// A running `simple_switch_grpc`, killed on drop.
#[derive(Debug)]
pub struct Switch {
    child: Child,
    pub grpc: u16,
    pub thrift: u16,
    pub log: PathBuf,
    /// The nanomsg notifications socket file, removed on drop.
    notify: PathBuf,
}

#[path = "../../../support/ports.rs"]
mod ports;

/// A port for BMv2 to listen on, below the kernel's ephemeral range (see
/// `tests/support/ports.rs`: a port-0 pick could be handed to another
/// socket before BMv2 binds it).
fn free_port() -> Result<u16> {
    ports::try_free_port().context("finding a free local port")
}

impl Switch {
    pub fn start(tools: &Tools, veths: &Veths, log: &Path) -> Result<Self> {
        let (grpc, thrift) = (free_port()?, free_port()?);
        let file = std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let err = file.try_clone().with_context(|| format!("opening {}", log.display()))?;
        let mut cmd = Command::new(&tools.switch);
        // A notifications socket of our own: another BMv2 with device id 1
        // on this machine must not receive our digests.
        let notify = PathBuf::from(format!("/tmp/metaroce-p4-vectors-{}-{grpc}.ipc", std::process::id()));
        let addr = format!("ipc://{}", notify.display());
        cmd.args(["--device-id", "1", "--thrift-port", &thrift.to_string(), "--notifications-addr", &addr]);
        cmd.args(["--log-console", "-L", "info", "--dump-packet-data", "256"]);
        for (port, a, _) in &veths.pairs {
            cmd.args(["-i", &format!("{port}@{a}")]);
        }
        cmd.args(["--no-p4", "--", "--grpc-server-addr", &format!("127.0.0.1:{grpc}"), "--cpu-port", "255"]);
        let child = cmd
            .stdin(Stdio::null())
            .stdout(file)
            .stderr(err)
            .spawn()
            .with_context(|| format!("starting {}", tools.switch.display()))?;
        Ok(Switch { child, grpc, thrift, log: log.to_owned(), notify })
    }

    /// Fails if the process has exited.
    pub fn alive(&mut self) -> Result<()> {
        if let Some(status) = self.child.try_wait().context("checking simple_switch_grpc")? {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            let mut tail: Vec<&str> = log.lines().rev().take(3).collect();
            tail.reverse();
            bail!("simple_switch_grpc exited ({status}): {} (log {})", tail.join(" / "), self.log.display());
        }
        Ok(())
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.notify);
    }
}

type Echoes = Arc<Mutex<HashMap<u32, VecDeque<Vec<u8>>>>>;

/// Raw frames in and out of the switch through our veth ends.
pub struct PacketIo {
    tx: HashMap<u32, Box<dyn DataLinkSender>>,
    rx: mpsc::Receiver<Sent>,
    /// Frames we sent per port: a packet socket also sees its own outgoing
    /// frames, which are dropped here in order.
    echoes: Echoes,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl std::fmt::Debug for PacketIo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PacketIo").field("ports", &self.tx.keys().collect::<Vec<_>>()).finish()
    }
}

impl PacketIo {
    pub fn open(veths: &Veths) -> Result<Self> {
        let interfaces = datalink::interfaces();
        let (send, rx) = mpsc::channel();
        let echoes: Echoes = Arc::default();
        let stop = Arc::new(AtomicBool::new(false));
        let mut io =
            PacketIo { tx: HashMap::new(), rx, echoes: echoes.clone(), stop: stop.clone(), threads: vec![] };
        for (port, _, ours) in &veths.pairs {
            let iface = interfaces
                .iter()
                .find(|i| &i.name == ours)
                .with_context(|| format!("interface {ours} not found"))?;
            let cfg =
                datalink::Config { read_timeout: Some(Duration::from_millis(20)), ..Default::default() };
            let (tx, mut rx) = match datalink::channel(iface, cfg) {
                Ok(Channel::Ethernet(tx, rx)) => (tx, rx),
                Ok(_) => bail!("{ours}: not an Ethernet channel"),
                Err(e) => bail!("{ours}: cannot open a packet socket: {e}"),
            };
            io.tx.insert(*port, tx);
            let (port, send, echoes, stop) = (*port, send.clone(), echoes.clone(), stop.clone());
            io.threads.push(std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let Ok(frame) = rx.next() else { continue };
                    let mut e = echoes.lock().unwrap_or_else(|p| p.into_inner());
                    let q = e.entry(port).or_default();
                    if q.front().is_some_and(|f| f.as_slice() == frame) {
                        q.pop_front();
                        continue;
                    }
                    drop(e);
                    if send.send(Sent { port, bytes: frame.to_vec(), meta: vec![] }).is_err() {
                        return;
                    }
                }
            }));
        }
        Ok(io)
    }

    pub fn send(&mut self, port: u32, frame: &[u8]) -> Result<()> {
        let tx =
            self.tx.get_mut(&port).with_context(|| format!("no data port {port} (ports are 1..={PORTS})"))?;
        self.echoes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(port)
            .or_default()
            .push_back(frame.to_vec());
        match tx.send_to(frame, None) {
            Some(Ok(())) => Ok(()),
            Some(Err(e)) => bail!("sending {} bytes on port {port}: {e}", frame.len()),
            None => bail!("sending {} bytes on port {port}: no buffer", frame.len()),
        }
    }

    /// Everything received so far.
    pub fn take(&mut self) -> Vec<Sent> {
        self.rx.try_iter().collect()
    }

    /// Forgets frames and echoes left over from an earlier case.
    pub fn reset(&mut self) {
        std::thread::sleep(Duration::from_millis(50));
        let _ = self.take();
        self.echoes.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }
}

impl Drop for PacketIo {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
