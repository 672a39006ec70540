//! Jobs in the controller: submits ([`submit`]), cancels ([`cancel`]), the launch of an attempt
//! ([`launch`]), the shell around the lifecycle core ([`effects`]), the job rows ([`rows`]) and
//! the SQL side of their transitions ([`store`]).

pub mod cancel;
pub mod effects;
pub mod launch;
pub mod rows;
pub mod store;
pub mod submit;

pub use effects::Outbox;
pub use rows::{JobEvent, JobRow, NewJob};
