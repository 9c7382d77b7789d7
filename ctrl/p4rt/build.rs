//! Generates the P4Runtime protobuf code at build time.
//!
//! Nothing from the P4Runtime repository is committed here. The definitions
//! come from the PyPI package `p4runtime==1.6.0`, which ships them as
//! compiled descriptors: a short Python script imports
//! `p4.v1.p4runtime_pb2` (pure-Python protobuf, so the descriptors stay
//! introspectable), copies the descriptor of every file in its import
//! closure into a `FileDescriptorSet`, and tonic-prost-build generates Rust
//! from that set without running protoc. The same set is embedded in the
//! crate so that text-format P4Info can be parsed by reflection.

use std::env;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

const PYTHON_ENV: &str = "METAROCE_P4RT_PYTHON";
const PACKAGE: &str = "p4runtime";
const PACKAGE_VERSION: &str = "1.6.0";

const SCRIPT: &str = r#"
import sys
from importlib import metadata
try:
    version = metadata.version("p4runtime")
except metadata.PackageNotFoundError:
    sys.stderr.write("the Python package p4runtime is not installed\n")
    sys.exit(3)
if version != sys.argv[2]:
    sys.stderr.write("found p4runtime %s, need %s\n" % (version, sys.argv[2]))
    sys.exit(4)
from google.protobuf import descriptor_pb2
import p4.v1.p4runtime_pb2 as root

out = descriptor_pb2.FileDescriptorSet()
done = set()

def add(fd):
    if fd.name in done:
        return
    for dep in fd.dependencies:
        add(dep)
    done.add(fd.name)
    fd.CopyToProto(out.file.add())

add(root.DESCRIPTOR)
with open(sys.argv[1], "wb") as f:
    f.write(out.SerializeToString())
"#;

fn main() {
    if let Err(message) = run() {
        // A build script reports failure by exiting non-zero; the message is
        // what the user sees under "failed to run custom build command".
        eprintln!("error: {message}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed={PYTHON_ENV}");
    let out_dir = PathBuf::from(env::var("OUT_DIR").map_err(|e| format!("OUT_DIR: {e}"))?);
    let manifest =
        PathBuf::from(env::var("CARGO_MANIFEST_DIR").map_err(|e| format!("CARGO_MANIFEST_DIR: {e}"))?);
    let python = find_python(&manifest);
    let fds_path = out_dir.join("p4runtime_fds.bin");
    let output = Command::new(&python)
        .arg("-c")
        .arg(SCRIPT)
        .arg(&fds_path)
        .arg(PACKAGE_VERSION)
        .env("PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION", "python")
        .output()
        .map_err(|e| missing(&python, &format!("cannot run it: {e}")))?;
    if !output.status.success() {
        let said = String::from_utf8_lossy(&output.stderr);
        let last = said.lines().last().unwrap_or("no message").to_owned();
        return Err(missing(&python, &last));
    }
    let bytes = fs::read(&fds_path).map_err(|e| format!("reading {}: {e}", fds_path.display()))?;
    let fds = <prost_types::FileDescriptorSet as prost::Message>::decode(bytes.as_slice())
        .map_err(|e| format!("descriptor set from {} does not decode: {e}", python.display()))?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .include_file("protos.rs")
        // A BMv2 JSON is megabytes, pushed to every switch of a fabric: as
        // `Bytes`, one config is shared by every push instead of copied,
        // and a served switch decodes it without another copy.
        .bytes(".p4.v1.ForwardingPipelineConfig.p4_device_config")
        .compile_fds(fds)
        .map_err(|e| format!("generating Rust from the P4Runtime descriptors: {e}"))
}

/// `$METAROCE_P4RT_PYTHON`, else the venv `make p4rt-deps` creates under
/// the workspace `target/`, else `python3` on the PATH.
fn find_python(manifest: &Path) -> PathBuf {
    if let Some(p) = env::var_os(PYTHON_ENV) {
        return PathBuf::from(p);
    }
    let venv = manifest.join("../../target/p4rt-venv/bin/python");
    if venv.exists() {
        return venv;
    }
    PathBuf::from("python3")
}

fn missing(python: &Path, why: &str) -> String {
    format!(
        "metaroce-p4rt generates its P4Runtime code from the PyPI package {PACKAGE}=={PACKAGE_VERSION}, \
         read through Python ({}): {why}. Run `make p4rt-deps` (installs it into target/p4rt-venv), \
         or set {PYTHON_ENV} to a Python that has it (`pip install {PACKAGE}=={PACKAGE_VERSION}`).",
        python.display()
    )
}
