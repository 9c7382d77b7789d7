//! Which fabric a switch belongs to, told by its pipeline cookie
//! (P4Runtime `ForwardingPipelineConfig.cookie`): the high 32 bits hash
//! the fabric's and the switch's names, the low 32 bits the program. A
//! controller changes nothing on a switch whose cookie names another
//! fabric or switch (a typo in a `p4rt` address, two fabrics on one host)
//! unless told to adopt it. Pure: the agent reads the cookie and acts.

/// The cookie this controller pushes to switch `switch` of `fabric`,
/// running the program whose cookie is `program`
/// ([`metaroce_p4rt::pipeline_cookie`]).
pub fn cookie(program: u64, fabric: &str, switch: &str) -> u64 {
    (u64::from(owner(fabric, switch)) << 32) | ((program ^ (program >> 32)) & 0xffff_ffff)
}

/// FNV-1a over `fabric`, a zero byte and `switch`.
fn owner(fabric: &str, switch: &str) -> u32 {
    let bytes = fabric.bytes().chain(std::iter::once(0)).chain(switch.bytes());
    bytes.fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(b)).wrapping_mul(0x0100_0193))
}

/// What the cookie a switch runs says about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No pipeline (a fresh or restarted switch): ours to program.
    Fresh,
    /// Ours, with this program.
    Ours,
    /// Ours, with another program: ours to push the new one.
    OursOtherProgram,
    /// Another fabric's or another switch's (or pushed by an earlier
    /// version that put no names in its cookie): refused.
    Foreign,
    /// [`Verdict::Foreign`], taken over because the operator said so.
    Adopted,
}

impl Verdict {
    /// Judges the cookie `installed` against `want` ([`cookie`]).
    pub fn of(installed: Option<u64>, want: u64, adopt: bool) -> Verdict {
        match installed {
            None => Verdict::Fresh,
            Some(c) if c == want => Verdict::Ours,
            Some(c) if c >> 32 == want >> 32 => Verdict::OursOtherProgram,
            Some(_) if adopt => Verdict::Adopted,
            Some(_) => Verdict::Foreign,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cookie_names_fabric_switch_and_program() {
        let a = cookie(0x1234_5678_9abc_def0, "fab-a", "leaf1");
        assert_eq!(a, cookie(0x1234_5678_9abc_def0, "fab-a", "leaf1"), "the same in every process");
        assert_ne!(a >> 32, cookie(0x1234_5678_9abc_def0, "fab-b", "leaf1") >> 32, "another fabric");
        assert_ne!(a >> 32, cookie(0x1234_5678_9abc_def0, "fab-a", "leaf2") >> 32, "another switch");
        // The zero byte keeps ("ab", "c") apart from ("a", "bc").
        assert_ne!(cookie(7, "ab", "c") >> 32, cookie(7, "a", "bc") >> 32);
        let upgraded = cookie(0x1234_5678_9abc_def1, "fab-a", "leaf1");
        assert_eq!(upgraded >> 32, a >> 32);
        assert_ne!(upgraded, a, "another program");
    }

    #[test]
    fn only_a_foreign_cookie_is_refused_and_adopt_takes_it_over() {
        let want = cookie(99, "fab-a", "leaf1");
        let other_program = cookie(98, "fab-a", "leaf1");
        let other_fabric = cookie(99, "fab-b", "leaf1");
        assert_eq!(Verdict::of(None, want, false), Verdict::Fresh);
        assert_eq!(Verdict::of(Some(want), want, false), Verdict::Ours);
        assert_eq!(Verdict::of(Some(other_program), want, false), Verdict::OursOtherProgram);
        assert_eq!(Verdict::of(Some(other_fabric), want, false), Verdict::Foreign);
        assert_eq!(Verdict::of(Some(99), want, false), Verdict::Foreign, "a cookie without names");
        assert_eq!(Verdict::of(Some(other_fabric), want, true), Verdict::Adopted);
        assert_eq!(Verdict::of(Some(want), want, true), Verdict::Ours, "adopt changes nothing for ours");
    }
}
