//! The requests API handlers and agents' routes send the engine, each with its reply channel.

use crate::api::data::{CacheStatus, DatasetView, StageQueued, StageRequest, VerifiedVersion};
use crate::api::{
    AccountChange, AccountsView, CancelOutcome, CreditsView, GrantRequest, NodeView, SubmitRequest,
    Submitted, WhyView,
};
use crate::datasets::db::{DatasetRow, VersionRow};
use crate::error::ApiError;
use crate::identity::Caller;
use labpool_cache::manifest::Manifest;
use tokio::sync::oneshot;

/// A request from an API handler.
pub enum Request {
    /// Queue a job (or an array of them).
    Submit {
        /// The job.
        req: Box<SubmitRequest>,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<Submitted, ApiError>>,
    },
    /// Check a job and predict its start, without queueing it (`--test-only`).
    TestOnly {
        /// The job.
        req: Box<SubmitRequest>,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<crate::api::test_only::WouldStart, ApiError>>,
    },
    /// Cancel jobs.
    Cancel {
        /// Which, as named (`12`, `12_3`).
        ids: Vec<String>,
        /// Who.
        caller: Caller,
        /// Answer, one per id.
        reply: oneshot::Sender<Vec<CancelOutcome>>,
    },
    /// Change a waiting job.
    Update {
        /// What to change.
        req: crate::api::UpdateRequest,
        /// Who.
        caller: Caller,
        /// Answer: what changed.
        reply: oneshot::Sender<Result<String, ApiError>>,
    },
    /// Signal running jobs.
    Signal {
        /// Which jobs, the signal, and to which processes.
        req: crate::api::SignalRequest,
        /// Who.
        caller: Caller,
        /// Answer, one per job.
        reply: oneshot::Sender<Vec<CancelOutcome>>,
    },
    /// Requeue running jobs.
    Requeue {
        /// Which, as named.
        ids: Vec<String>,
        /// Who.
        caller: Caller,
        /// Answer, one per job.
        reply: oneshot::Sender<Vec<CancelOutcome>>,
    },
    /// Hold (`hold`) or release waiting jobs.
    Hold {
        /// Which, as named (`12`, `12_3`).
        ids: Vec<String>,
        /// Hold, or release.
        hold: bool,
        /// Who.
        caller: Caller,
        /// Answer, one per id.
        reply: oneshot::Sender<Vec<CancelOutcome>>,
    },
    /// Describe the nodes.
    Nodes {
        /// Answer.
        reply: oneshot::Sender<Vec<NodeView>>,
    },
    /// Drain a node (a reason) or resume it (`None`) (admins).
    Drain {
        /// The node.
        node: String,
        /// Why; `None` resumes it.
        reason: Option<String>,
        /// Who.
        caller: Caller,
        /// Answer: the node afterwards.
        reply: oneshot::Sender<Result<NodeView, ApiError>>,
    },
    /// List, book or delete reservations (changes: admins).
    Reservation {
        /// What to do.
        change: crate::api::reservations::ReservationChange,
        /// Who.
        caller: Caller,
        /// Answer: the reservations afterwards.
        reply: oneshot::Sender<Result<Vec<crate::api::reservations::ReservationView>, ApiError>>,
    },
    /// Change accounts or limits (admins).
    Account {
        /// The change.
        change: AccountChange,
        /// Who.
        caller: Caller,
        /// Answer: what was done.
        reply: oneshot::Sender<Result<String, ApiError>>,
    },
    /// Describe accounts and limits.
    Accounts {
        /// Answer.
        reply: oneshot::Sender<AccountsView>,
    },
    /// Grant credit (admins).
    Grant {
        /// The grant.
        req: GrantRequest,
        /// Who.
        caller: Caller,
        /// Answer: the user's month after it.
        reply: oneshot::Sender<Result<CreditsView, ApiError>>,
    },
    /// A user's credits this month.
    Credits {
        /// Whose.
        user: String,
        /// Answer.
        reply: oneshot::Sender<CreditsView>,
    },
    /// Why a job waits.
    Why {
        /// Which.
        id: u64,
        /// Answer.
        reply: oneshot::Sender<Result<WhyView, ApiError>>,
    },
    /// Record a new dataset, scanned and its manifest saved (admins).
    AddDataset {
        /// The dataset.
        dataset: DatasetRow,
        /// Its first version's manifest.
        manifest: Box<Manifest>,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<DatasetView, ApiError>>,
    },
    /// Record a dataset's new version after a rescan (admins).
    AddVersion {
        /// Dataset.
        name: String,
        /// The version.
        version: VersionRow,
        /// Its manifest.
        manifest: Box<Manifest>,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<DatasetView, ApiError>>,
    },
    /// Describe node caches.
    CacheStatus {
        /// One node, or all.
        node: Option<String>,
        /// Answer.
        reply: oneshot::Sender<Result<Vec<CacheStatus>, ApiError>>,
    },
    /// Warm node caches with a dataset (admins).
    CacheStage {
        /// What and where.
        req: StageRequest,
        /// Who.
        caller: Caller,
        /// Answer.
        reply: oneshot::Sender<Result<StageQueued, ApiError>>,
    },
    /// A node agent registers.
    AgentRegister {
        /// What it says of itself.
        reg: Box<crate::api::agent::Registration>,
        /// The connection's address.
        from: std::net::SocketAddr,
        /// Answer.
        reply: oneshot::Sender<Result<crate::api::agent::Registered, ApiError>>,
    },
    /// A node agent's heartbeat.
    AgentHeartbeat {
        /// The heartbeat.
        beat: crate::api::agent::Heartbeat,
        /// Answer: refused when the agent must register again.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// Reports from a node agent.
    AgentReports {
        /// The batch.
        batch: crate::api::agent::ReportBatch,
        /// Answer: refused when the agent must register again.
        reply: oneshot::Sender<Result<(), ApiError>>,
    },
    /// What the Slurm gate read from Slurm: foreign load, nodes down or draining.
    SlurmView(crate::slurm_gate::SlurmView),
    /// The config file read again (SIGHUP): take its live sections.
    Reload {
        /// The file as it reads now.
        config: Box<crate::settings::Config>,
        /// Answer: what changed, live and at the next restart, and the engine's config now; or
        /// why nothing was taken.
        reply: oneshot::Sender<
            Result<
                (
                    crate::settings::reload::Changes,
                    std::sync::Arc<crate::settings::Config>,
                ),
                String,
            >,
        >,
    },
    /// Suspend an idle session rather than stop it (the idle rule).
    Suspend {
        /// The job.
        job: u64,
        /// Answer: its GPUs, or why it is stopped instead.
        reply: oneshot::Sender<Result<Vec<u32>, String>>,
    },
    /// A suspended session's member came back.
    WantBack {
        /// The job.
        job: u64,
    },
    /// Verify node caches (admins).
    CacheVerify {
        /// One node, or all.
        node: Option<String>,
        /// Who.
        caller: Caller,
        /// Answer, when every node has verified.
        reply: oneshot::Sender<Result<Vec<VerifiedVersion>, ApiError>>,
    },
}
