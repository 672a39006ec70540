//! How labpool's parts reach each other: one HTTP/1.1 exchange ([`http1`]) behind the CLI's
//! client over the controller's Unix socket ([`client`], with the caller's uid from
//! [`socket`]), the signed HTTP between nodes ([`transport`]), the alert webhook ([`webhook`])
//! and the `/metrics` listener ([`metrics_http`]); the proof of a shared secret that opens an
//! interactive session's or a step's TCP link ([`link_auth`]); and, for the node the controller
//! runs in-process, the seam the two meet at ([`embedded`]); and the tunnel to a port of a job
//! that rides them ([`tunnel`]). The controller and the agent depend on
//! this and on the wire types (`labpool_api`), and never on each other.

// The paths these files were written with, from when they were modules of the binary.
use labpool_api as api;
use labpool_host::{clock, env_vars};
use labpool_settings as settings;

pub mod client;
pub mod embedded;
pub mod http1;
pub mod link_auth;
pub mod metrics_http;
pub mod socket;
pub mod transport;
pub mod tunnel;
pub mod webhook;
