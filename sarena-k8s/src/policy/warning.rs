//! [`Warning`]: a part of an API object the conversion could not read and
//! left out (so that it allows less, never more).

use std::fmt;

/// One unreadable part of an object, dropped by the conversion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// Where it is in the object, e.g. `spec.ingress[0].from[1].ipBlock.cidr`.
    pub field: String,
    /// Why it was dropped, and what that does.
    pub problem: String,
}

impl Warning {
    /// A warning about `field`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Warning {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}
