//! Seeing the pool: what an agent samples from its GPUs ([`sample`]), what a job used
//! ([`usage`]), the Prometheus text for both ([`exposition`], [`dcgm`]), the alert rules with
//! hysteresis and "for" durations ([`alerts`]), zombie jobs and their action ladder
//! ([`zombie`]), and the chat webhooks' payload shapes ([`webhook`]).
//!
//! Deterministic: `now` comes in as an argument, subjects are ordered maps, and nothing here
//! reads a clock, a file or a socket. The agent reads NVML; the controller delivers.

pub mod alerts;
pub mod dcgm;
pub mod doctor;
pub mod exposition;
pub mod idle_sessions;
pub mod notify;
pub mod page;
pub mod sample;
pub mod slice_watch;
pub mod usage;
pub mod webhook;
pub mod zombie;
