//! Jobs in the controller: the shell around the lifecycle core ([`effects`]) and the SQL side of
//! its transitions ([`store`]).

pub mod effects;
pub mod store;

pub use effects::Outbox;
