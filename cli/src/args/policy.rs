//! `labpool account`, `qos` and `credits`: who may use what.

use super::JsonArg;
use clap::{Args, Subcommand};

// `labpool account`.
#[derive(Subcommand, Debug)]
pub enum AccountCommand {
    /// Create an account
    Add {
        /// Name
        name: String,
        /// What it is for
        #[arg(long, default_value = "")]
        description: String,
    },
    /// Remove an account (its jobs keep running, without its limits)
    Rm {
        /// Name
        name: String,
    },
    /// Accounts, members, limits and GPUs in use
    List(JsonArg),
    /// Add a member
    AddUser {
        /// Account
        account: String,
        /// User
        user: String,
    },
    /// Remove a member
    RmUser {
        /// Account
        account: String,
        /// User
        user: String,
    },
}

// `labpool qos`.
#[derive(Subcommand, Debug)]
pub enum QosCommand {
    /// Set limits: `qos set ACCOUNT KEY=VALUE...` or `qos set --user U KEY=VALUE...`
    /// (GrpTRES=gres/gpu=N, MaxTRESPerUser=gres/gpu=N, MaxWall=HH:MM:SS, MaxJobsPerUser=N,
    /// MaxSubmitJobsPerUser=N; -1 removes one)
    Set {
        /// Set a user's own limits instead of an account's
        #[arg(long, value_name = "USER")]
        user: Option<String>,
        /// ACCOUNT (without --user), then KEY=VALUE settings
        #[arg(required = true, value_name = "ACCOUNT|KEY=VALUE")]
        items: Vec<String>,
    },
    /// Every limit in force
    List(JsonArg),
}

// `labpool credits`.
#[derive(Args, Debug)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CreditsArgs {
    /// Whose credits [default: yours]
    #[arg(long, short = 'u', value_name = "USER")]
    pub user: Option<String>,
    /// Print JSON instead of text
    #[arg(long)]
    pub json: bool,
    /// What to do.
    #[command(subcommand)]
    pub command: Option<CreditsCommand>,
}

// `labpool credits grant`.
#[derive(Subcommand, Debug)]
pub enum CreditsCommand {
    /// Give a user more credit this month (admins)
    Grant {
        /// User
        user: String,
        /// Credits
        amount: f64,
        /// Why, for the ledger
        #[arg(long)]
        note: Option<String>,
    },
}
