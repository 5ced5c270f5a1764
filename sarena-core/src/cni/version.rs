//! CNI specification versions.

/// A CNI spec version Sarena speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    /// 0.1.0 (also what a config without `cniVersion` means).
    V0_1_0,
    /// 0.2.0.
    V0_2_0,
    /// 0.3.0.
    V0_3_0,
    /// 0.3.1.
    V0_3_1,
    /// 0.4.0: adds CHECK.
    V0_4_0,
    /// 1.0.0.
    V1_0_0,
    /// 1.1.0: adds STATUS and GC.
    V1_1_0,
}
