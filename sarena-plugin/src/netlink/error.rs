//! [`NetlinkError`]: a netlink request that failed, with the kernel's answer.

use std::fmt::Display;

use nix::errno::Errno;

/// A netlink request that failed: what was asked, about what, and the
/// kernel's answer as the source.
#[derive(Debug, thiserror::Error)]
#[error("netlink {call} on {object}")]
pub struct NetlinkError {
    /// What was asked, e.g. `link add`, `route del`.
    pub call: &'static str,
    /// The link, route or address involved.
    pub object: String,
    /// The kernel's answer (or rtnetlink's, when the request never got
    /// there).
    #[source]
    pub source: KernelAnswer,
}

/// rtnetlink's error, shown as `EEXIST: File exists` when the kernel
/// answered with an errno and as rtnetlink's text otherwise; boxed, as it
/// is large.
#[derive(Debug)]
pub struct KernelAnswer(pub Box<rtnetlink::Error>);

impl Display for KernelAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&describe(&self.0))
    }
}

impl std::error::Error for KernelAnswer {}

impl NetlinkError {
    /// The error of `call` on `object`.
    pub fn new(call: &'static str, object: impl Display, source: rtnetlink::Error) -> Self {
        NetlinkError {
            call,
            object: object.to_string(),
            source: KernelAnswer(Box::new(source)),
        }
    }

    /// The error the kernel gives when it answers `call` on `object` with
    /// `errno` (positive, e.g. `libc::EEXIST`): for tests and fakes.
    pub fn from_errno(call: &'static str, object: impl Display, errno: i32) -> Self {
        let mut message = rtnetlink::packet_core::ErrorMessage::default();
        message.code = std::num::NonZeroI32::new(-errno.abs());
        NetlinkError::new(call, object, rtnetlink::Error::NetlinkError(message))
    }

    /// The errno the kernel answered with (positive), if it answered with one.
    pub fn errno(&self) -> Option<i32> {
        errno(&self.source.0)
    }
}

/// The errno a netlink error carries (positive), if any.
pub fn errno(error: &rtnetlink::Error) -> Option<i32> {
    match error {
        rtnetlink::Error::NetlinkError(message) if message.raw_code() != 0 => {
            Some(message.raw_code().abs())
        }
        _ => None,
    }
}

/// `EEXIST: File exists` for a kernel answer, rtnetlink's text otherwise.
fn describe(error: &rtnetlink::Error) -> String {
    match errno(error) {
        Some(code) => match Errno::from_raw(code) {
            Errno::UnknownErrno => std::io::Error::from_raw_os_error(code).to_string(),
            known => known.to_string(),
        },
        None => error.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_answer_names_the_call_the_object_and_the_errno() {
        let err = NetlinkError::from_errno("link add", "lxc1", libc::EEXIST);
        assert_eq!(err.errno(), Some(libc::EEXIST));
        assert_eq!(err.to_string(), "netlink link add on lxc1");
        assert_eq!(
            crate::error_chain(&err),
            "netlink link add on lxc1: EEXIST: File exists"
        );
    }

    #[test]
    fn other_failures_have_no_errno() {
        let err = NetlinkError::new("route dump", "main", rtnetlink::Error::RequestFailed);
        assert_eq!(err.errno(), None);
        assert_eq!(
            crate::error_chain(&err),
            "netlink route dump on main: A netlink request failed"
        );
    }
}
