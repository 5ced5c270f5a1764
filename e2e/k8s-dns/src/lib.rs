//! `sarena-test-dns`: a small cluster DNS for Sarena's Kubernetes
//! end-to-end tests (test infrastructure, never shipped). It answers the
//! names of the Kubernetes DNS-Based Service Discovery specification 1.1.0
//! for Services, headless endpoints and pods from a watch of the API
//! server; names outside the cluster zone and the reverse zones are
//! REFUSED (the test cluster has no upstream resolver).
//!
//! [`view`] holds what is answered from, [`records`] the name-to-answer
//! logic, [`watch`] the API watches ([`client`] connects), [`server`]
//! UDP/TCP serving and [`health`] the probes' endpoint.

#![cfg_attr(test, allow(clippy::unwrap_used, clippy::expect_used, clippy::panic))]

pub mod client;
pub mod health;
pub mod records;
pub mod server;
pub mod view;
pub mod watch;
