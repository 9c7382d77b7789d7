//! BMv2's Thrift runtime service (the one `simple_switch_CLI` talks to,
//! port 9090 by default), for what BMv2's P4Runtime server lacks: register
//! reads and writes, and egress queue depth and rate.
//!
//! Only the handful of calls needed are implemented, over Thrift's strict
//! binary protocol on an unframed (buffered) transport, multiplexed by
//! service name (`standard`, `simple_switch`) the way BMv2 serves them.
//! [`StandIn`] answers the same calls from an in-process [`Switch`], so the
//! fallback path is tested without BMv2.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::server::Switch;

const VERSION_1: u32 = 0x8001_0000;
const CALL: u8 = 1;
const REPLY: u8 = 2;
const EXCEPTION: u8 = 3;
const T_STOP: u8 = 0;
const T_I32: u8 = 8;
const T_I64: u8 = 10;
const T_STRING: u8 = 11;
const T_STRUCT: u8 = 12;
const T_LIST: u8 = 15;
/// Largest reply accepted.
const MAX_MESSAGE: usize = 16 << 20;

/// Where BMv2's Thrift server listens.
#[derive(Debug, Clone)]
pub struct ThriftConfig {
    pub addr: SocketAddr,
    pub timeout: Duration,
}

impl ThriftConfig {
    pub fn new(addr: SocketAddr) -> Self {
        ThriftConfig { addr, timeout: Duration::from_secs(5) }
    }
}

/// Why a Thrift call failed.
#[derive(Debug, thiserror::Error)]
pub enum ThriftError {
    #[error("cannot reach BMv2 Thrift at {addr}")]
    Connect {
        addr: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("{method}: connection failed")]
    Io {
        method: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{method}: no answer within {after:?}")]
    Deadline { method: String, after: Duration },
    #[error("{method}: malformed reply: {message}")]
    Protocol { method: String, message: String },
    #[error("{method}: server exception: {message}")]
    Application { method: String, message: String },
    /// BMv2's InvalidRegisterOperation: 1 bad name, 2 bad index, 3 other.
    #[error("{method}: register operation refused (code {code})")]
    Register { method: String, code: i32 },
}

/// A decoded Thrift value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    I32(i32),
    I64(i64),
    Str(Vec<u8>),
    Struct(Vec<(i16, Value)>),
    List(Vec<Value>),
    Void,
}

fn type_of(v: &Value) -> u8 {
    match v {
        Value::I32(_) => T_I32,
        Value::I64(_) => T_I64,
        Value::Str(_) => T_STRING,
        Value::Struct(_) | Value::Void => T_STRUCT,
        Value::List(_) => T_LIST,
    }
}

fn put(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::I32(i) => out.extend_from_slice(&i.to_be_bytes()),
        Value::I64(i) => out.extend_from_slice(&i.to_be_bytes()),
        Value::Str(s) => {
            out.extend_from_slice(&(s.len() as i32).to_be_bytes());
            out.extend_from_slice(s);
        }
        Value::Struct(fields) => {
            for (id, f) in fields {
                out.push(type_of(f));
                out.extend_from_slice(&id.to_be_bytes());
                put(out, f);
            }
            out.push(T_STOP);
        }
        Value::List(items) => {
            out.push(items.first().map(type_of).unwrap_or(T_I64));
            out.extend_from_slice(&(items.len() as i32).to_be_bytes());
            items.iter().for_each(|i| put(out, i));
        }
        Value::Void => out.push(T_STOP),
    }
}

/// Encodes a whole message: header, then the argument/result struct.
pub fn encode_message(kind: u8, name: &str, seq: i32, body: &Value) -> Vec<u8> {
    let mut out = (VERSION_1 | u32::from(kind)).to_be_bytes().to_vec();
    put(&mut out, &Value::Str(name.as_bytes().to_vec()));
    out.extend_from_slice(&seq.to_be_bytes());
    put(&mut out, body);
    out
}

/// `Ok(None)` means "need more bytes".
struct Cur<'a>(&'a [u8], usize);

impl Cur<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let s = self.0.get(self.1..self.1.checked_add(n)?)?;
        self.1 += n;
        Some(s)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn i16(&mut self) -> Option<i16> {
        self.take(2).map(|b| i16::from_be_bytes([b[0], b[1]]))
    }
    fn i32(&mut self) -> Option<i32> {
        self.take(4).map(|b| i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn i64(&mut self) -> Option<i64> {
        self.take(8).and_then(|b| b.try_into().ok()).map(i64::from_be_bytes)
    }
    fn len(&mut self) -> Result<Option<usize>, String> {
        match self.i32() {
            None => Ok(None),
            Some(n) => usize::try_from(n)
                .ok()
                .filter(|n| *n <= MAX_MESSAGE)
                .map(Some)
                .ok_or(format!("bad length {n}")),
        }
    }
    fn value(&mut self, t: u8, depth: u32) -> Result<Option<Value>, String> {
        if depth > 16 {
            return Err("nesting too deep".into());
        }
        Ok(match t {
            2 | 3 => self.u8().map(|b| Value::I32(i32::from(b))),
            4 => self.i64().map(|_| Value::Void),
            6 => self.i16().map(|v| Value::I32(i32::from(v))),
            T_I32 => self.i32().map(Value::I32),
            T_I64 => self.i64().map(Value::I64),
            T_STRING => match self.len()? {
                None => None,
                Some(n) => self.take(n).map(|b| Value::Str(b.to_vec())),
            },
            T_STRUCT => {
                let mut fields = vec![];
                loop {
                    let Some(ft) = self.u8() else { return Ok(None) };
                    if ft == T_STOP {
                        break Some(Value::Struct(fields));
                    }
                    let Some(id) = self.i16() else { return Ok(None) };
                    let Some(v) = self.value(ft, depth + 1)? else { return Ok(None) };
                    fields.push((id, v));
                }
            }
            T_LIST | 14 => {
                let Some(et) = self.u8() else { return Ok(None) };
                let Some(n) = self.len()? else { return Ok(None) };
                let mut items = Vec::with_capacity(n.min(4096));
                for _ in 0..n {
                    let Some(v) = self.value(et, depth + 1)? else { return Ok(None) };
                    items.push(v);
                }
                Some(Value::List(items))
            }
            other => return Err(format!("unsupported Thrift type {other}")),
        })
    }
}

/// A decoded message: kind, method name, sequence id, body struct.
pub type Message = (u8, String, i32, Value);

/// Decodes one message from the front of `buf`; `Ok(None)` if incomplete.
pub fn decode_message(buf: &[u8]) -> Result<Option<(Message, usize)>, String> {
    let mut c = Cur(buf, 0);
    let Some(h) = c.i32() else { return Ok(None) };
    let h = h as u32;
    if h & 0xffff_0000 != VERSION_1 {
        return Err(format!("bad message header {h:#x}"));
    }
    let Some(Value::Str(name)) = c.value(T_STRING, 0)? else { return Ok(None) };
    let Some(seq) = c.i32() else { return Ok(None) };
    let Some(body) = c.value(T_STRUCT, 0)? else { return Ok(None) };
    Ok(Some(((h as u8, String::from_utf8_lossy(&name).into_owned(), seq, body), c.1)))
}

fn field(body: &Value, id: i16) -> Option<&Value> {
    match body {
        Value::Struct(f) => f.iter().find(|(i, _)| *i == id).map(|(_, v)| v),
        _ => None,
    }
}

async fn read_message(stream: &mut TcpStream, buf: &mut Vec<u8>) -> std::io::Result<Result<Message, String>> {
    loop {
        match decode_message(buf) {
            Ok(Some((m, used))) => {
                buf.drain(..used);
                return Ok(Ok(m));
            }
            Ok(None) if buf.len() > MAX_MESSAGE => return Ok(Err("message too large".into())),
            Ok(None) => {}
            Err(e) => return Ok(Err(e)),
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// A connection to BMv2's Thrift server.
#[derive(Debug)]
pub struct ThriftClient {
    cfg: ThriftConfig,
    stream: TcpStream,
    buf: Vec<u8>,
    seq: i32,
}

impl ThriftClient {
    pub async fn connect(cfg: ThriftConfig) -> Result<Self, ThriftError> {
        let connect = tokio::time::timeout(cfg.timeout, TcpStream::connect(cfg.addr)).await;
        let stream = match connect {
            Ok(Ok(s)) => s,
            Ok(Err(source)) => return Err(ThriftError::Connect { addr: cfg.addr, source }),
            Err(_) => return Err(ThriftError::Deadline { method: "connect".into(), after: cfg.timeout }),
        };
        Ok(ThriftClient { cfg, stream, buf: vec![], seq: 0 })
    }

    /// Calls `service:method` with positional arguments (field ids 1..).
    pub async fn call(
        &mut self,
        service: &str,
        method: &str,
        args: Vec<Value>,
    ) -> Result<Value, ThriftError> {
        let name = format!("{service}:{method}");
        self.seq = self.seq.wrapping_add(1);
        let body = Value::Struct(args.into_iter().enumerate().map(|(i, v)| (i as i16 + 1, v)).collect());
        let msg = encode_message(CALL, &name, self.seq, &body);
        let io = |source| ThriftError::Io { method: name.clone(), source };
        let exchange = async {
            self.stream.write_all(&msg).await.map_err(io)?;
            read_message(&mut self.stream, &mut self.buf).await.map_err(io)
        };
        let reply = tokio::time::timeout(self.cfg.timeout, exchange)
            .await
            .map_err(|_| ThriftError::Deadline { method: name.clone(), after: self.cfg.timeout })??;
        let (kind, _, seq, body) =
            reply.map_err(|message| ThriftError::Protocol { method: name.clone(), message })?;
        if kind == EXCEPTION {
            let message = match field(&body, 1) {
                Some(Value::Str(s)) => String::from_utf8_lossy(s).into_owned(),
                _ => "unknown".into(),
            };
            return Err(ThriftError::Application { method: name, message });
        }
        if kind != REPLY || seq != self.seq {
            return Err(ThriftError::Protocol {
                method: name,
                message: format!("unexpected reply kind {kind} seq {seq}"),
            });
        }
        if let Some(ouch) = field(&body, 1) {
            let code = match field(ouch, 1) {
                Some(Value::I32(c)) => *c,
                _ => 0,
            };
            return Err(ThriftError::Register { method: name, code });
        }
        Ok(field(&body, 0).cloned().unwrap_or(Value::Void))
    }

    pub async fn register_read(&mut self, register: &str, index: i32) -> Result<i64, ThriftError> {
        let args = vec![Value::I32(0), Value::Str(register.into()), Value::I32(index)];
        match self.call("standard", "bm_register_read", args).await? {
            Value::I64(v) => Ok(v),
            other => Err(ThriftError::Protocol {
                method: "bm_register_read".into(),
                message: format!("got {other:?}"),
            }),
        }
    }

    pub async fn register_read_all(&mut self, register: &str) -> Result<Vec<i64>, ThriftError> {
        let args = vec![Value::I32(0), Value::Str(register.into())];
        match self.call("standard", "bm_register_read_all", args).await? {
            Value::List(items) => Ok(items
                .into_iter()
                .filter_map(|v| if let Value::I64(i) = v { Some(i) } else { None })
                .collect()),
            other => Err(ThriftError::Protocol {
                method: "bm_register_read_all".into(),
                message: format!("got {other:?}"),
            }),
        }
    }

    pub async fn register_write(
        &mut self,
        register: &str,
        index: i32,
        value: i64,
    ) -> Result<(), ThriftError> {
        let args = vec![Value::I32(0), Value::Str(register.into()), Value::I32(index), Value::I64(value)];
        self.call("standard", "bm_register_write", args).await.map(|_| ())
    }

    /// Egress queue depth in packets; `port` `None` sets every port.
    pub async fn set_queue_depth(&mut self, port: Option<i32>, depth_pkts: i32) -> Result<(), ThriftError> {
        match port {
            Some(p) => {
                self.call(
                    "simple_switch",
                    "set_egress_queue_depth",
                    vec![Value::I32(p), Value::I32(depth_pkts)],
                )
                .await
            }
            None => {
                self.call("simple_switch", "set_all_egress_queue_depths", vec![Value::I32(depth_pkts)]).await
            }
        }
        .map(|_| ())
    }

    /// Egress queue drain rate in packets per second; `port` `None` sets every port.
    pub async fn set_queue_rate(&mut self, port: Option<i32>, rate_pps: i64) -> Result<(), ThriftError> {
        match port {
            Some(p) => {
                self.call("simple_switch", "set_egress_queue_rate", vec![Value::I32(p), Value::I64(rate_pps)])
                    .await
            }
            None => {
                self.call("simple_switch", "set_all_egress_queue_rates", vec![Value::I64(rate_pps)]).await
            }
        }
        .map(|_| ())
    }
}

/// Queue settings a [`StandIn`] received: port (`-1` = all) → value.
#[derive(Debug, Default, Clone)]
pub struct QueueSettings {
    pub depth: HashMap<i32, i32>,
    pub rate: HashMap<i32, i64>,
}

/// Serves the register and queue calls of BMv2's Thrift API from an
/// in-process [`Switch`].
#[derive(Debug, Clone)]
pub struct StandIn {
    switch: Switch,
    pub queues: Arc<Mutex<QueueSettings>>,
}

impl StandIn {
    pub fn new(switch: Switch) -> Self {
        StandIn { switch, queues: Arc::default() }
    }

    /// Accepts connections on `listener` until the task is aborted.
    pub async fn serve(self, listener: tokio::net::TcpListener) {
        while let Ok((stream, _)) = listener.accept().await {
            let me = self.clone();
            tokio::spawn(async move { me.connection(stream).await });
        }
    }

    async fn connection(&self, mut stream: TcpStream) {
        let mut buf = vec![];
        while let Ok(Ok((_, name, seq, body))) = read_message(&mut stream, &mut buf).await {
            let (kind, reply) = self.answer(&name, &body);
            if stream.write_all(&encode_message(kind, &name, seq, &reply)).await.is_err() {
                return;
            }
        }
    }

    fn answer(&self, name: &str, args: &Value) -> (u8, Value) {
        let arg = |i| field(args, i).cloned();
        let ok = |v: Value| (REPLY, Value::Struct(vec![(0, v)]));
        let ouch = |code: i32| (REPLY, Value::Struct(vec![(1, Value::Struct(vec![(1, Value::I32(code))]))]));
        let mut q = self.queues.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match (name, arg(1), arg(2), arg(3), arg(4)) {
            ("standard:bm_register_read", _, Some(Value::Str(r)), Some(Value::I32(i)), _) => {
                match self
                    .cell(&r)
                    .and_then(|(id, w)| Some((self.switch.register_cell(id, usize::try_from(i).ok()?)?, w)))
                {
                    Some((v, w)) => ok(Value::I64(crate::codec::decode_u64(&v, w).unwrap_or(0) as i64)),
                    None => ouch(if self.cell(&r).is_none() { 1 } else { 2 }),
                }
            }
            ("standard:bm_register_read_all", _, Some(Value::Str(r)), _, _) => match self.cell(&r) {
                None => ouch(1),
                Some((id, w)) => {
                    let vals = (0..).map_while(|i| self.switch.register_cell(id, i));
                    ok(Value::List(
                        vals.map(|v| Value::I64(crate::codec::decode_u64(&v, w).unwrap_or(0) as i64))
                            .collect(),
                    ))
                }
            },
            (
                "standard:bm_register_write",
                _,
                Some(Value::Str(r)),
                Some(Value::I32(i)),
                Some(Value::I64(v)),
            ) => {
                let Some((id, w)) = self.cell(&r) else { return ouch(1) };
                let Ok(bytes) = crate::codec::encode(v as u64, w) else { return ouch(3) };
                match usize::try_from(i).map(|i| self.switch.set_register_cell(id, i, bytes)) {
                    Ok(true) => ok(Value::Void),
                    _ => ouch(2),
                }
            }
            ("simple_switch:set_egress_queue_depth", Some(Value::I32(p)), Some(Value::I32(d)), _, _) => {
                q.depth.insert(p, d);
                ok(Value::I32(0))
            }
            ("simple_switch:set_all_egress_queue_depths", Some(Value::I32(d)), _, _, _) => {
                q.depth.insert(-1, d);
                ok(Value::I32(0))
            }
            ("simple_switch:set_egress_queue_rate", Some(Value::I32(p)), Some(Value::I64(r)), _, _) => {
                q.rate.insert(p, r);
                ok(Value::I32(0))
            }
            ("simple_switch:set_all_egress_queue_rates", Some(Value::I64(r)), _, _, _) => {
                q.rate.insert(-1, r);
                ok(Value::I32(0))
            }
            _ => (
                EXCEPTION,
                Value::Struct(vec![
                    (1, Value::Str(format!("unknown method {name}").into_bytes())),
                    (2, Value::I32(1)),
                ]),
            ),
        }
    }

    fn cell(&self, name: &[u8]) -> Option<(u32, i32)> {
        let info = self.switch.p4info()?;
        let r = info.registers.by_name(std::str::from_utf8(name).ok()?).ok()?;
        Some((r.preamble.as_ref()?.id, crate::entity::register_bitwidth(r)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn message_round_trip_and_truncation() {
        let body = Value::Struct(vec![
            (1, Value::I32(0)),
            (2, Value::Str(b"r".to_vec())),
            (3, Value::List(vec![Value::I64(7)])),
        ]);
        let bytes = encode_message(CALL, "standard:bm_register_read", 9, &body);
        let ((kind, name, seq, back), used) = decode_message(&bytes).unwrap().unwrap();
        assert_eq!((kind, name.as_str(), seq, used), (CALL, "standard:bm_register_read", 9, bytes.len()));
        assert_eq!(back, body);
        for cut in 0..bytes.len() {
            assert!(decode_message(&bytes[..cut]).unwrap().is_none(), "cut at {cut}");
        }
        assert!(decode_message(&[0, 0, 0, 1, 0, 0, 0, 0]).is_err());
    }
}
