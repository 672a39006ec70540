//! `env create`, `list`, `show` and `rm`: names pointed at builds, reused or built anew.

use crate::api::envs::{CreateEnv, EnvCreated, EnvRemoved, EnvView, RemoveEnv};
use crate::clock::{now_ms, rfc3339};
use crate::envs::EnvService;
use crate::envs::db::EnvRow;
use crate::envs::service::{check_env_name, kind_of};
use crate::envs::store::is_sealed;
use crate::error::ApiError;
use crate::identity::Caller;
use std::path::PathBuf;
use std::sync::Arc;

impl EnvService {
    /// `env create`: reuses a build with the same id, or builds one; then points the name at it.
    /// The work runs in a task of its own, so a client that hangs up (Ctrl-C) never leaves a
    /// build half-done, unsealed or unrecorded.
    pub async fn create(
        self: &Arc<Self>,
        caller: &Caller,
        req: CreateEnv,
    ) -> Result<EnvCreated, ApiError> {
        check_env_name(&req.name)?;
        if req.shared {
            crate::http::admin_only(&self.config, caller, "publish shared environments")?;
        }
        labpool_envs::verify::check_lock(&req.lock).map_err(|e| {
            ApiError::bad_request(
                e.to_string(),
                Some("lock the spec again with `labpool env create` of this version".to_string()),
            )
        })?;
        // The platform is part of the id: it must be this pool's, not the client's idea of it.
        let (kind, tools) = (req.lock.kind, self.tools.clone());
        let platform =
            tokio::task::spawn_blocking(move || labpool_envs::id::platform(kind, &tools))
                .await
                .map_err(ApiError::internal)?
                .map_err(|e| ApiError::bad_request(e.to_string(), None))?;
        if platform != req.lock.platform {
            return Err(ApiError::bad_request(
                format!(
                    "the lock is for platform {}, but this pool builds for {platform}",
                    req.lock.platform
                ),
                Some(
                    "run `labpool env create` with the pool's config, so that it locks with [envs] python"
                        .to_string(),
                ),
            ));
        }
        let this = self.clone();
        let caller = caller.clone();
        tokio::spawn(async move { this.create_now(&caller, req).await })
            .await
            .map_err(ApiError::internal)?
    }

    async fn create_now(&self, caller: &Caller, req: CreateEnv) -> Result<EnvCreated, ApiError> {
        let lock = req.lock;
        let id = lock.id.clone();
        let owner = if req.shared {
            String::new()
        } else {
            caller.user.clone()
        };
        let _guard = self.building.lock().await;
        let dir = self.config.env_store().join(&id);
        let existing = self.db.env(&id).await?;
        let reused = match &existing {
            Some(_) if is_sealed(&dir) => true,
            // Recorded, but gone from this node's store: the packed build comes back.
            Some(row) => {
                let (archive, to) = (PathBuf::from(&row.archive), dir.clone());
                let unpacked =
                    tokio::task::spawn_blocking(move || labpool_envs::pack::unpack(&archive, &to))
                        .await
                        .map_err(ApiError::internal)?;
                if unpacked.is_ok() && is_sealed(&dir) {
                    true
                } else {
                    let row = self.build(caller, &lock, &dir).await?;
                    self.db.insert_env(&row).await?;
                    false
                }
            }
            None => {
                let row = self.build(caller, &lock, &dir).await?;
                self.db.insert_env(&row).await?;
                false
            }
        };
        let moved = self
            .db
            .set_env_name(&owner, &req.name, &id, now_ms())
            .await?;
        self.collect_garbage().await?;
        tracing::info!(name = req.name, owner, id, reused, "environment ready");
        let row = self.db.env(&id).await?.expect("just recorded");
        Ok(EnvCreated {
            env: self.view(caller, &owner, &req.name, &row).await?,
            reused,
            moved_from: moved,
        })
    }

    async fn view(
        &self,
        caller: &Caller,
        owner: &str,
        name: &str,
        row: &EnvRow,
    ) -> Result<EnvView, ApiError> {
        // Other members' names are theirs to know.
        let visible = (!caller.admin).then_some(caller.user.as_str());
        let names = self
            .db
            .env_names(visible)
            .await?
            .into_iter()
            .filter(|(_, _, id)| *id == row.id)
            .map(|(o, n, _)| if o.is_empty() { n } else { format!("{o}/{n}") })
            .collect();
        Ok(EnvView {
            name: name.to_string(),
            owner: owner.to_string(),
            id: row.id.clone(),
            kind: kind_of(row)?,
            platform: row.platform.clone(),
            dir: row.dir.clone().into(),
            archive: row.archive.clone().into(),
            bytes: row.bytes as u64,
            archive_bytes: row.archive_bytes as u64,
            built: rfc3339(row.built),
            built_by: row.built_by.clone(),
            build_s: row.build_ms as f64 / 1000.0,
            build_log: row.build_log.clone().into(),
            lock: row.lock.clone(),
            spec: row.spec.clone(),
            names,
        })
    }

    /// `env list`: the caller's names and the shared ones (every user's with `all`, admins).
    pub async fn list(&self, caller: &Caller, all: bool) -> Result<Vec<EnvView>, ApiError> {
        if all {
            crate::http::admin_only(&self.config, caller, "list every user's environments")?;
        }
        let owner = (!all).then_some(caller.user.as_str());
        let mut out = Vec::new();
        for (o, n, id) in self.db.env_names(owner).await? {
            if let Some(row) = self.db.env(&id).await? {
                out.push(self.view(caller, &o, &n, &row).await?);
            }
        }
        Ok(out)
    }

    /// `env show NAME`.
    pub async fn show(&self, caller: &Caller, name: &str) -> Result<EnvView, ApiError> {
        let (owner, row) = self.resolve(caller, name).await?;
        let short = name.rsplit('/').next().unwrap_or(name);
        self.view(caller, &owner, short, &row).await
    }

    /// `env rm NAME`: the name goes; the build too when nothing else uses it.
    pub async fn remove(&self, caller: &Caller, req: RemoveEnv) -> Result<EnvRemoved, ApiError> {
        let owner = if req.shared {
            crate::http::admin_only(&self.config, caller, "remove shared environments")?;
            String::new()
        } else {
            caller.user.clone()
        };
        let Some(id) = self.db.env_name(&owner, &req.name).await? else {
            let whose = if req.shared { "shared" } else { "your" };
            return Err(ApiError::not_found(
                format!("there is no {whose} environment {:?}", req.name),
                Some(if req.shared {
                    "`labpool env list` shows the names".to_string()
                } else {
                    "`labpool env list` shows the names; a shared one is removed with --shared by an admin".to_string()
                }),
            ));
        };
        let _guard = self.building.lock().await;
        self.db.remove_env_name(&owner, &req.name).await?;
        self.collect_garbage().await?;
        let build_deleted = self.db.env(&id).await?.is_none();
        tracing::info!(
            name = req.name,
            owner,
            id,
            build_deleted,
            "environment name removed"
        );
        Ok(EnvRemoved {
            name: req.name,
            id,
            build_deleted,
        })
    }
}
