//! End-to-end tests: the real binary, real processes, real SQLite, real sockets.

mod agent_auth;
mod agent_bodies;
mod agents;
mod bad_input;
mod datasets;
mod demo;
mod drain;
mod envs;
mod envs_refused;
mod exclusivity;
mod forged_reports;
mod full_disk;
mod history_pages;
mod isolation;
mod lifecycle;
mod node_faults;
mod nodes;
mod nvml;
mod peer_staging;
mod permissions;
mod policy;
mod pool;
mod quotas;
mod recovery;
mod show_settings;
mod snapshots;
