//! `labpool reservation`.

use super::JsonArg;
use clap::Subcommand;

// `labpool reservation ...`.
#[derive(Subcommand, Debug)]
pub enum ReservationCommand {
    /// Book GPUs of one node for a time window, for named users or an account (admins)
    Create {
        /// Its name; jobs run in it with --reservation NAME
        name: String,
        /// When it starts: 2026-12-24T08:00, now+1day, tomorrow, 16:00 (local time, as --begin)
        #[arg(long, value_name = "TIME")]
        start: String,
        /// How long, in Slurm's format: 2-00:00:00, 48:00:00, 90 (minutes)
        #[arg(long, value_name = "TIME")]
        duration: String,
        /// How many GPUs
        #[arg(long, value_name = "N")]
        gpus: u32,
        /// On this node only [default: the first node with the GPUs free]
        #[arg(long, value_name = "NODE")]
        node: Option<String>,
        /// Users who may run in it, comma-separated
        #[arg(long, value_name = "U,...", value_delimiter = ',')]
        users: Vec<String>,
        /// An account whose members may run in it
        #[arg(long, value_name = "ACCOUNT")]
        account: Option<String>,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Reservations, upcoming and active, with their GPUs and jobs
    List(JsonArg),
    /// Delete a reservation (admins); jobs waiting for it are told it is gone
    Delete {
        /// Its name
        name: String,
    },
}
