//! Accounts and credits on the wire: `labpool account`, `labpool credits` and grants.

use serde::{Deserialize, Serialize};

/// An account, as `labpool account list` prints it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AccountView {
    /// Name.
    pub name: String,
    /// What it is for.
    pub description: String,
    /// Members.
    pub members: Vec<String>,
    /// Its QOS limits, Slurm spelling.
    pub limits: Vec<String>,
    /// GPUs its jobs hold now.
    pub gpus_in_use: u32,
}

/// `labpool account list`: accounts and users' own limits.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct AccountsView {
    /// Accounts.
    pub accounts: Vec<AccountView>,
    /// Users with limits of their own: user and limits.
    pub user_limits: Vec<(String, Vec<String>)>,
}

/// `POST /v1/accounts`: an admin change to accounts.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, tag = "op", rename_all = "snake_case")]
pub enum AccountChange {
    /// Create an account.
    Add {
        /// Name.
        name: String,
        /// What it is for.
        #[serde(default)]
        description: String,
    },
    /// Remove an account.
    Remove {
        /// Name.
        name: String,
    },
    /// Add a member.
    AddUser {
        /// Account.
        account: String,
        /// User.
        user: String,
    },
    /// Remove a member.
    RemoveUser {
        /// Account.
        account: String,
        /// User.
        user: String,
    },
    /// Set QOS limits on an account, or on a user (`account` absent).
    SetQos {
        /// Account.
        account: Option<String>,
        /// User.
        user: Option<String>,
        /// `KEY=VALUE` settings in Slurm's names.
        settings: Vec<String>,
    },
}

/// One ledger line, as `labpool credits` shows it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct LedgerLine {
    /// When.
    pub time: String,
    /// grant, charge, rebate or emergency_token.
    pub kind: String,
    /// Credits (positive; the kind says which way).
    pub amount: f64,
    /// Job.
    pub job: Option<u64>,
    /// Who or why.
    pub note: Option<String>,
}

/// `labpool credits`: a user's month.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct CreditsView {
    /// The user.
    pub user: String,
    /// The month, `YYYY-MM`.
    pub month: String,
    /// When credits and tokens reset.
    pub resets: String,
    /// The equal monthly grant.
    pub monthly_grant: f64,
    /// Admin grants this month.
    pub granted: f64,
    /// Rebates this month.
    pub rebated: f64,
    /// Charges of ended jobs this month.
    pub charged: f64,
    /// Credits running jobs have used so far.
    pub accruing: f64,
    /// What is left, running jobs counted (may be negative: overdrawn).
    pub balance: f64,
    /// Emergency tokens left this month.
    pub tokens_left: u32,
    /// Tokens per month.
    pub tokens_per_month: u32,
    /// The month's ledger lines, oldest first.
    pub entries: Vec<LedgerLine>,
}

/// `POST /v1/credits/grant`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrantRequest {
    /// To whom.
    pub user: String,
    /// Credits, more than 0.
    pub amount: f64,
    /// Why.
    #[serde(default)]
    pub note: Option<String>,
}
