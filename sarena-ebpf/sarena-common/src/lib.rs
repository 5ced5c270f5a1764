//! Map layouts shared by Sarena's eBPF programs and user space.
//!
//! Filled in by the eBPF dataplane work; kept `no_std` so the kernel side can use it.
#![no_std]
