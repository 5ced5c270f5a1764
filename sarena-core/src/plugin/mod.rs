//! The plugin's sequences: ADD, DEL, CHECK, STATUS, GC, written against the
//! [`crate::api::Daemon`] and [`crate::links::Links`] traits.
