//! Software environments in the controller: builds, names, and the submit-time checks (the
//! `CUDA_VISIBLE_DEVICES` lint and resolving `--env`).
//!
//! Decisions recorded here:
//! - The CLI locks the spec as the user (it reads their files); the controller recomputes the
//!   id from the lock, so a client cannot name a build it did not describe.
//! - The build runs as the user who asked (`labpool env build-locked`, with their uid, groups
//!   and home), because pip and conda run code from the packages they install. It builds at
//!   the fixed path STORE/ID, which the controller creates for it. Once it succeeds the build
//!   is sealed (owned by root, no write bits for anyone else) and packed, so it cannot change
//!   under a job, and other nodes unpack the same bytes at the same path.
//! - One build at a time: builds are rare, and two builds of one id must never race.
//! - Names: a member's names are theirs (`env create NAME`); an admin publishes shared ones
//!   (`--shared`). `--env NAME` looks for the user's own name first, then a shared one.
//! - Removing a name deletes the build only when no other name and no unfinished job uses it.
//! - A failed build's log is kept and named in the error; the half-built directory goes.

use crate::api::SubmitRequest;
use crate::db::Db;
use crate::envs::db::EnvRow;
use crate::error::ApiError;
use crate::identity::Caller;
use crate::settings::{Config, OverridePolicy};
use labpool_envs::EnvKind;
use labpool_isolation::Support;
use std::sync::Arc;

/// Builds, names and checks.
pub struct EnvService {
    pub(super) config: Arc<Config>,
    pub(super) db: Db,
    /// The node's cgroups, for the builds' own group.
    pub(super) support: Support,
    /// The tools, for the platform of this pool.
    pub(super) tools: labpool_envs::tools::Tools,
    /// Held for the whole of a build.
    pub(super) building: tokio::sync::Mutex<()>,
}

/// Checks an environment name: 1 to 64 of letters, digits, `.`, `_`, `-`, `+`, not starting
/// with `.` or `-`.
pub fn check_env_name(name: &str) -> Result<(), ApiError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with(['.', '-'])
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b'+'));
    if ok {
        Ok(())
    } else {
        Err(ApiError::bad_request(
            format!("invalid environment name {name:?}"),
            Some(
                "use 1 to 64 letters, digits, '.', '_', '-' or '+', not starting with '.' or '-' (e.g. tf215)"
                    .to_string(),
            ),
        ))
    }
}

impl EnvService {
    /// The service over `db`.
    pub fn new(
        config: Arc<Config>,
        db: Db,
        support: Support,
        tools: labpool_envs::tools::Tools,
    ) -> Arc<EnvService> {
        Arc::new(EnvService {
            config,
            db,
            support,
            tools,
            building: tokio::sync::Mutex::new(()),
        })
    }

    /// Resolves `--env` and lints the script. Returns warnings for the submitter; an error
    /// refuses the submit and changes nothing.
    pub async fn check_submit(
        &self,
        req: &mut SubmitRequest,
        caller: &Caller,
    ) -> Result<Vec<String>, ApiError> {
        let mut warnings = Vec::new();
        let findings = labpool_envs::lint::cuda_visible_devices_overrides(&req.script);
        if !findings.is_empty() {
            match self.config.jobs.cuda_visible_devices {
                OverridePolicy::Refuse => {
                    // The message carries its own hint: one, not two.
                    return Err(ApiError::bad_request(
                        labpool_envs::lint::explain(&findings, true, req.wrapped),
                        None,
                    ));
                }
                OverridePolicy::Warn => {
                    warnings.push(labpool_envs::lint::explain(&findings, false, req.wrapped));
                }
            }
        }
        // Only the controller fills these in.
        req.env_id = None;
        req.env_kind = None;
        if let Some(name) = req.env.clone() {
            let (_, row) = self.resolve(caller, &name).await?;
            req.env_kind = Some(kind_of(&row)?);
            req.env_id = Some(row.id);
        }
        Ok(warnings)
    }

    /// The build a caller's name points at: their own, else a shared one. An admin may also
    /// write `owner/name`; anyone may give an id.
    pub(super) async fn resolve(
        &self,
        caller: &Caller,
        name: &str,
    ) -> Result<(String, EnvRow), ApiError> {
        let (owner, short) = match name.split_once('/') {
            Some((o, n)) if caller.admin || o == caller.user => (Some(o.to_string()), n),
            Some(_) => {
                return Err(ApiError::forbidden(
                    format!("{name:?} is another user's environment"),
                    Some("use your own or a shared one (`labpool env list`)".to_string()),
                ));
            }
            None => (None, name),
        };
        let owners: Vec<String> = match owner {
            Some(o) => vec![o],
            None => vec![caller.user.clone(), String::new()],
        };
        for o in &owners {
            if let Some(id) = self.db.env_name(o, short).await? {
                let row = self.db.env(&id).await?.ok_or_else(|| {
                    ApiError::internal(format!(
                        "environment name {name} points at unknown build {id}"
                    ))
                })?;
                return Ok((o.clone(), row));
            }
        }
        // By id: a build one of the caller's names (or a shared one) points at; any for admins.
        if short.len() >= 8 && short.bytes().all(|b| b.is_ascii_hexdigit()) {
            let visible = (!caller.admin).then_some(caller.user.as_str());
            let names = self.db.env_names(visible).await?;
            if let Some((o, _, _)) = names.iter().find(|(_, _, id)| id == short)
                && let Some(row) = self.db.env(short).await?
            {
                return Ok((o.clone(), row));
            }
        }
        let names: Vec<String> = self
            .db
            .env_names(Some(&caller.user))
            .await?
            .into_iter()
            .map(|(_, n, _)| n)
            .collect();
        let hint = if names.is_empty() {
            "there are none yet; make one with `labpool env create NAME --file requirements.txt`"
                .to_string()
        } else {
            format!(
                "yours and the shared ones: {}; `labpool env list` shows them",
                names.join(", ")
            )
        };
        Err(ApiError::not_found(
            format!("no environment {name:?}"),
            Some(hint),
        ))
    }
}

pub(super) fn kind_of(row: &EnvRow) -> Result<EnvKind, ApiError> {
    row.kind
        .parse()
        .map_err(|e| ApiError::internal(format!("environment {}: {e}", row.id)))
}
