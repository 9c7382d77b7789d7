//! The committed v1model build (`p4src/build/`), compiled into every binary
//! that links this crate: the default program, so an installed `metaroce`
//! runs anywhere, not only from the repository root. Rebuilding after
//! `make p4` picks up a new build (the files are tracked by the compiler).
//! Tofino builds are never embedded: they are loaded from explicit files.

use metaroce_p4rt::P4Info;

use crate::{Pipeline, PipelineError};

/// `p4src/build/main.p4info.txtpb` as committed when this binary was built.
pub const P4INFO_TEXT: &str = include_str!("../../../p4src/build/main.p4info.txtpb");

/// `p4src/build/main.json` (the BMv2 device config) from the same build.
pub const BMV2_JSON: &[u8] = include_bytes!("../../../p4src/build/main.json");

/// What to call the built-in program in messages.
pub const NAME: &str = "the built-in v1model program (p4src/build/ when this binary was built)";

impl Pipeline {
    /// The built-in v1model program, checked like a loaded one.
    pub fn builtin() -> Result<Self, PipelineError> {
        let info = P4Info::from_text(P4INFO_TEXT).map_err(PipelineError::P4Info)?;
        Self::new(info, BMV2_JSON.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    #[test]
    fn the_builtin_program_is_the_committed_build() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../p4src/build");
        let loaded = Pipeline::load(&dir.join("main.p4info.txtpb"), &dir.join("main.json")).unwrap();
        let builtin = Pipeline::builtin().unwrap();
        assert_eq!(builtin.target(), crate::Target::Bmv2);
        assert_eq!(builtin.device_config(), loaded.device_config());
        assert_eq!(builtin.info().raw(), loaded.info().raw());
    }
}
