//! `labpool node` and `labpool partition`.

use super::JsonArg;
use clap::Subcommand;

// `labpool partition`.
#[derive(Subcommand, Debug)]
pub enum PartitionCommand {
    /// Partitions with their time limits and priorities
    List(JsonArg),
}

// `labpool node ...`.
#[derive(Subcommand, Debug)]
pub enum NodeCommand {
    /// Take no new jobs on NODE; running ones finish (it then shows DRAINED)
    Drain {
        /// Node name (`labpool nodes`)
        node: String,
        /// Why, shown to everyone whose jobs wait
        #[arg(long)]
        reason: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// Take jobs on NODE again
    Resume {
        /// Node name
        node: String,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
}
