//! Validation of container ids, interface names and network names.
