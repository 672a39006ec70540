//! Reservations over the API: what an admin books, and how they are listed.

use serde::{Deserialize, Serialize};

/// `POST /v1/reservations`: book GPUs ahead (admins).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CreateReservation {
    /// Its name.
    pub name: String,
    /// When it starts, ms since the epoch (read by the client in its own time zone).
    pub start_ms: i64,
    /// How long, seconds.
    pub duration_s: u64,
    /// How many GPUs.
    pub gpus: u32,
    /// On this node only.
    #[serde(default)]
    pub node: Option<String>,
    /// Users who may run in it.
    #[serde(default)]
    pub users: Vec<String>,
    /// An account whose members may run in it.
    #[serde(default)]
    pub account: Option<String>,
}

/// What a reservation request does.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ReservationChange {
    /// List them (anyone).
    List,
    /// Book one (admins).
    Create(CreateReservation),
    /// Delete one (admins).
    Delete {
        /// Its name.
        name: String,
    },
}

/// A reservation as `labpool reservation list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReservationView {
    /// Its name.
    pub name: String,
    /// `upcoming` or `active`.
    pub state: String,
    /// Start (RFC 3339).
    pub start: String,
    /// End (RFC 3339).
    pub end: String,
    /// Its node.
    pub node: String,
    /// Its GPUs there.
    pub gpus: Vec<u32>,
    /// Who may use it.
    pub users: Vec<String>,
    /// The account whose members may use it.
    pub account: Option<String>,
    /// Jobs running in it now.
    pub jobs: Vec<u64>,
}

/// `POST /v1/reservations/delete`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DeleteReservation {
    /// Its name.
    pub name: String,
}
