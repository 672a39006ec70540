//! Accounts in the engine: accounts, QOS limits and credits (admins change them; everyone may
//! look), and `why` a job waits, with their tables.

pub mod changes;
pub mod credits;
pub mod db;
pub mod month_ledger;
pub mod why;
