//! GPU architectures as the toolchain names them: `sm_80`, `sm_90`, and `sm_90a`, whose code
//! uses features of exactly that architecture (Hopper's `wgmma`, `setmaxnreg`) and so runs on
//! no other, neither as machine code nor as PTX.

use std::fmt;

/// An architecture `sm_<major><minor>`, with `a` when architecture-specific.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch {
    /// Compute capability's major version.
    pub major: u32,
    /// Compute capability's minor version.
    pub minor: u32,
    /// Whether the code may use features of exactly this architecture (`sm_90a`).
    pub specific: bool,
}

impl Arch {
    /// Lowest architecture accepted: sm_53, the first with f16 arithmetic.
    pub const MIN: u32 = 53;
    /// Highest architecture accepted.
    pub const MAX: u32 = 121;

    /// Reads `sm_NN` or `sm_NNa` (`sm_100a` for compute capability 10.0); `None` for anything
    /// else or outside [`Arch::MIN`]`..=`[`Arch::MAX`].
    pub fn parse(name: &str) -> Option<Arch> {
        let digits = name.strip_prefix("sm_")?;
        let (digits, specific) = match digits.strip_suffix('a') {
            Some(d) => (d, true),
            None => (digits, false),
        };
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let n: u32 = digits.parse().ok()?;
        if !(Self::MIN..=Self::MAX).contains(&n) {
            return None;
        }
        Some(Arch {
            major: n / 10,
            minor: n % 10,
            specific,
        })
    }

    /// `major * 10 + minor`, as in `sm_90`.
    pub fn number(self) -> u32 {
        self.major * 10 + self.minor
    }

    /// Whether this architecture's machine code runs on a device of compute capability
    /// `major.minor`: the same major version and a minor version not above the device's, or
    /// exactly the device's for architecture-specific code.
    pub fn cubin_runs_on(self, major: u32, minor: u32) -> bool {
        if self.specific {
            (self.major, self.minor) == (major, minor)
        } else {
            self.major == major && self.minor <= minor
        }
    }

    /// Whether the driver can compile this architecture's PTX for a device of compute
    /// capability `major.minor`: any device not older, or exactly the device for
    /// architecture-specific code.
    pub fn ptx_runs_on(self, major: u32, minor: u32) -> bool {
        if self.specific {
            (self.major, self.minor) == (major, minor)
        } else {
            self.number() <= major * 10 + minor
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "sm_{}{}",
            self.number(),
            if self.specific { "a" } else { "" }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_order() {
        for name in ["sm_53", "sm_80", "sm_90", "sm_90a", "sm_100a", "sm_120"] {
            assert_eq!(Arch::parse(name).unwrap().to_string(), name);
        }
        for bad in [
            "sm_52",
            "sm_90b",
            "sm_",
            "sm_a",
            "compute_90",
            "sm_1000",
            "sm_9x",
        ] {
            assert_eq!(Arch::parse(bad), None, "{bad}");
        }
        let p = |s| Arch::parse(s).unwrap();
        assert!(p("sm_80") < p("sm_90") && p("sm_90") < p("sm_90a") && p("sm_90a") < p("sm_100"));
    }

    #[test]
    fn specific_code_runs_on_its_own_architecture_only() {
        let a = Arch::parse("sm_90a").unwrap();
        assert!(a.cubin_runs_on(9, 0) && a.ptx_runs_on(9, 0));
        assert!(!a.cubin_runs_on(10, 0) && !a.ptx_runs_on(10, 0) && !a.ptx_runs_on(8, 0));
        let p = Arch::parse("sm_80").unwrap();
        assert!(p.cubin_runs_on(8, 6) && !p.cubin_runs_on(9, 0));
        assert!(p.ptx_runs_on(9, 0) && p.ptx_runs_on(12, 0) && !p.ptx_runs_on(7, 5));
    }
}
