//! The device config of a Tofino switch run by the SDE's P4Runtime server
//! (PI on `bf_switchd`): a `p4.tmp.P4DeviceConfig` whose `device_data` is
//! three parts, each a little-endian u32 length and then the bytes: the
//! program name, the compiler's `tofino.bin`, and its `context.json`.
//!
//! [`TofinoConfig`] builds it from a build directory and checks one read
//! back (whole, and for the expected program) before anything is sent.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use prost::Message;

use crate::session::DeviceConfig;

/// `p4.tmp.P4DeviceConfig` (PI's `proto/p4/tmp/p4config.proto`).
#[derive(Clone, PartialEq, Message)]
pub struct P4DeviceConfig {
    /// Re-assign the device (load the new binary) when it already runs a program.
    #[prost(bool, tag = "1")]
    pub reassign: bool,
    #[prost(message, optional, tag = "2")]
    pub extras: Option<Extras>,
    #[prost(bytes = "vec", tag = "3")]
    pub device_data: Vec<u8>,
}

/// `p4.tmp.P4DeviceConfig.Extras`: options passed to the device assignment.
#[derive(Clone, PartialEq, Message)]
pub struct Extras {
    #[prost(map = "string, string", tag = "1")]
    pub kv: HashMap<String, String>,
}

/// Why a Tofino device config was refused.
#[derive(Debug, thiserror::Error)]
pub enum TofinoConfigError {
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{dir} holds no Tofino build: no {file} in it or in its pipe/ directory")]
    Missing { dir: PathBuf, file: &'static str },
    #[error("not a p4.tmp.P4DeviceConfig")]
    NotDeviceConfig(#[source] prost::DecodeError),
    #[error("the device config is truncated: {part} needs {need} bytes at offset {offset}, {left} left")]
    Truncated { part: &'static str, offset: usize, need: usize, left: usize },
    #[error("the device config has {0} bytes after its three parts")]
    Trailing(usize),
    #[error("the {part} part of the device config is empty")]
    Empty { part: &'static str },
    #[error("the {part} part is too large for a u32 length ({len} bytes)")]
    TooLarge { part: &'static str, len: usize },
    #[error("the program name is not UTF-8")]
    Name,
    #[error("the device config is for program {found:?}, not {expected:?}")]
    OtherProgram { expected: String, found: String },
    #[error("its context.json is for program {found:?}, not {expected:?}")]
    OtherContext { expected: String, found: String },
    #[error("its context.json is not JSON")]
    Context(#[source] serde_json::Error),
    #[error("its tofino.bin is not a whole bfas binary: {what} at byte {offset}")]
    Binary { offset: usize, what: String },
    #[error("its tofino.bin is for program {found:?}, not {expected:?}")]
    OtherBinary { expected: String, found: String },
    #[error(
        "its tofino.bin and context.json come from different compiles (run ids {bin:?} and {context:?})"
    )]
    RunIds { bin: String, context: String },
}

/// A Tofino program as the SDE loads it.
#[derive(Clone, PartialEq, Eq)]
pub struct TofinoConfig {
    /// The program name (`bf_switchd`'s `p4_name`; bf-p4c names it after
    /// the source file: `main` for `main.p4`).
    pub program: String,
    pub tofino_bin: Vec<u8>,
    pub context_json: Vec<u8>,
}

impl std::fmt::Debug for TofinoConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TofinoConfig")
            .field("program", &self.program)
            .field("tofino_bin", &self.tofino_bin.len())
            .field("context_json", &self.context_json.len())
            .finish()
    }
}

const PARTS: [&str; 3] = ["program name", "tofino.bin", "context.json"];

impl TofinoConfig {
    /// Reads `tofino.bin` and `context.json` from a bf-p4c output
    /// directory (`dir/` or, as bf-p4c writes them, `dir/pipe/`) and checks
    /// them for `program`.
    pub fn load_dir(dir: &Path, program: &str) -> Result<Self, TofinoConfigError> {
        let find = |file: &'static str| -> Result<Vec<u8>, TofinoConfigError> {
            let path = [dir.join(file), dir.join("pipe").join(file)]
                .into_iter()
                .find(|p| p.is_file())
                .ok_or_else(|| TofinoConfigError::Missing { dir: dir.to_owned(), file })?;
            std::fs::read(&path).map_err(|source| TofinoConfigError::Read { path, source })
        };
        let config = TofinoConfig {
            program: program.to_owned(),
            tofino_bin: find("tofino.bin")?,
            context_json: find("context.json")?,
        };
        config.check(program)?;
        Ok(config)
    }

    /// `device_data`: the three parts, each a little-endian u32 length and the bytes.
    pub fn device_data(&self) -> Result<Vec<u8>, TofinoConfigError> {
        let parts = [self.program.as_bytes(), &self.tofino_bin, &self.context_json];
        let mut out = Vec::with_capacity(12 + parts.iter().map(|p| p.len()).sum::<usize>());
        for (part, bytes) in PARTS.iter().zip(parts) {
            let len = u32::try_from(bytes.len())
                .map_err(|_| TofinoConfigError::TooLarge { part, len: bytes.len() })?;
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(bytes);
        }
        Ok(out)
    }

    /// Splits `device_data` into its parts; a part that runs past the end,
    /// or bytes after the third, are refused.
    pub fn parse_device_data(data: &[u8]) -> Result<Self, TofinoConfigError> {
        let mut offset = 0;
        let mut parts: Vec<&[u8]> = Vec::with_capacity(3);
        for part in PARTS {
            let left = data.len() - offset;
            let Some(len) = data.get(offset..offset + 4) else {
                return Err(TofinoConfigError::Truncated { part, offset, need: 4, left });
            };
            let len = u32::from_le_bytes([len[0], len[1], len[2], len[3]]) as usize;
            offset += 4;
            let left = data.len() - offset;
            let bytes = data.get(offset..offset.saturating_add(len)).ok_or(TofinoConfigError::Truncated {
                part,
                offset,
                need: len,
                left,
            })?;
            if bytes.is_empty() {
                return Err(TofinoConfigError::Empty { part });
            }
            parts.push(bytes);
            offset += len;
        }
        if offset != data.len() {
            return Err(TofinoConfigError::Trailing(data.len() - offset));
        }
        let program = std::str::from_utf8(parts[0]).map_err(|_| TofinoConfigError::Name)?.to_owned();
        Ok(TofinoConfig { program, tofino_bin: parts[1].to_vec(), context_json: parts[2].to_vec() })
    }

    /// The `p4_device_config` bytes: a `P4DeviceConfig` that reassigns the
    /// device.
    pub fn encode(&self) -> Result<Vec<u8>, TofinoConfigError> {
        let msg = P4DeviceConfig { reassign: true, extras: None, device_data: self.device_data()? };
        Ok(msg.encode_to_vec())
    }

    /// Reads back `p4_device_config` bytes and checks them for `program`.
    pub fn decode(bytes: &[u8], program: &str) -> Result<Self, TofinoConfigError> {
        let msg = P4DeviceConfig::decode(bytes).map_err(TofinoConfigError::NotDeviceConfig)?;
        let config = Self::parse_device_data(&msg.device_data)?;
        config.check(program)?;
        Ok(config)
    }

    /// The name is `program`'s, and so is context.json's `program_name`
    /// when it has one (bf-p4c writes the source file's name, `main.p4`);
    /// `tofino.bin` is whole (every record complete, see `tofino_bin`), its
    /// header names `program`, and its run id is context.json's (both from
    /// one compile).
    pub fn check(&self, program: &str) -> Result<(), TofinoConfigError> {
        if self.program != program {
            return Err(TofinoConfigError::OtherProgram {
                expected: program.into(),
                found: self.program.clone(),
            });
        }
        if self.tofino_bin.is_empty() {
            return Err(TofinoConfigError::Empty { part: PARTS[1] });
        }
        let context: serde_json::Value =
            serde_json::from_slice(&self.context_json).map_err(TofinoConfigError::Context)?;
        if let Some(name) = context.get("program_name").and_then(|n| n.as_str()) {
            let stem = name.strip_suffix(".p4").unwrap_or(name);
            if stem != program {
                return Err(TofinoConfigError::OtherContext { expected: program.into(), found: name.into() });
            }
        }
        let header = crate::tofino_bin::scan(&self.tofino_bin)
            .map_err(|e| TofinoConfigError::Binary { offset: e.offset, what: e.what })?;
        if let Some(found) = header.program_name.filter(|n| n != program) {
            return Err(TofinoConfigError::OtherBinary { expected: program.into(), found });
        }
        let context_run = context.get("run_id").and_then(|r| r.as_str());
        if let (Some(bin), Some(ctx)) = (header.run_id, context_run) {
            if bin != ctx {
                return Err(TofinoConfigError::RunIds { bin, context: ctx.into() });
            }
        }
        Ok(())
    }
}

/// A checked, encoded Tofino device config, ready to push.
#[derive(Debug, Clone)]
pub struct TofinoDeviceConfig(pub Vec<u8>);

impl DeviceConfig for TofinoDeviceConfig {
    fn bytes(&self) -> crate::session::Bytes {
        crate::session::Bytes::copy_from_slice(&self.0)
    }
}
