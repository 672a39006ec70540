//! Registering datasets and recording their versions. The slow part (walking and hashing the
//! source) runs in the API handler, off the engine; the engine only checks and records.

use crate::api::data::{DatasetVersionView, DatasetView};
use crate::clock::rfc3339;
use crate::datasets::db::{DatasetRow, VersionRow};
use crate::datasets::errors::unknown_dataset;
use crate::db::Db;
use crate::engine::Engine;
use crate::error::ApiError;
use crate::identity::Caller;
use labpool_cache::manifest::Manifest;

/// The hint for a dataset name that is not registered: the names that are.
pub fn registered_hint<'a>(known: impl IntoIterator<Item = &'a str>) -> String {
    let known: Vec<&str> = known.into_iter().collect();
    if known.is_empty() {
        "no datasets are registered yet; an admin adds one with `labpool dataset add NAME PATH`"
            .to_string()
    } else {
        format!("registered datasets: {}", known.join(", "))
    }
}

/// The error for registering a name twice.
pub fn already_registered(old: &DatasetRow) -> ApiError {
    ApiError::bad_request(
        format!(
            "dataset {:?} is registered already, from {}",
            old.name,
            old.path.display()
        ),
        Some(format!(
            "to record changes in its source run `labpool dataset rescan {}`",
            old.name
        )),
    )
}

/// The API view of a dataset, from its row and its versions (newest first).
pub fn dataset_view(d: &DatasetRow, versions: &[VersionRow]) -> DatasetView {
    let current = versions.iter().find(|v| v.version == d.current);
    DatasetView {
        name: d.name.clone(),
        path: d.path.clone(),
        description: d.description.clone(),
        created: rfc3339(d.created),
        created_by: d.created_by.clone(),
        current: d.current.clone(),
        files: current.map_or(0, |v| v.files),
        bytes: current.map_or(0, |v| v.bytes),
        versions: versions.len() as u32,
        env_var: labpool_cache::registry::env_var(&d.name),
    }
}

/// The API view of a version.
pub fn version_view(v: &VersionRow, current: &str) -> DatasetVersionView {
    DatasetVersionView {
        version: v.version.clone(),
        created: rfc3339(v.created),
        files: v.files,
        bytes: v.bytes,
        changed_files: v.changed_files,
        changed_bytes: v.changed_bytes,
        current: v.version == current,
    }
}

/// A version's row from its manifest, with what changed since the version before.
pub fn version_row(manifest: &Manifest, at_ms: i64, changed: (u64, u64)) -> VersionRow {
    VersionRow {
        version: manifest.version(),
        created: at_ms,
        files: manifest.files().count() as u64,
        bytes: manifest.bytes(),
        changed_files: changed.0,
        changed_bytes: changed.1,
    }
}

impl Engine {
    /// Records a new dataset whose manifest the caller has scanned and saved. The API handler
    /// decides who may (admins for datasets, members for their own models).
    pub(crate) async fn add_dataset(
        &mut self,
        dataset: DatasetRow,
        manifest: Manifest,
        caller: &Caller,
    ) -> anyhow::Result<Result<DatasetView, ApiError>> {
        if let Some(old) = self.data.datasets.get(&dataset.name) {
            return Ok(Err(already_registered(old)));
        }
        let files = manifest.files().count() as u64;
        let version = version_row(&manifest, dataset.created, (files, manifest.bytes()));
        let mut tx = self.db.begin().await?;
        Db::insert_dataset(&mut tx, &dataset, &version).await?;
        tx.commit().await?;
        tracing::info!(
            name = dataset.name,
            version = version.version,
            files,
            by = caller.user,
            "dataset registered"
        );
        let view = dataset_view(&dataset, std::slice::from_ref(&version));
        self.data.remember(&dataset.name, manifest);
        self.data.datasets.insert(dataset.name.clone(), dataset);
        Ok(Ok(view))
    }

    /// Records a rescanned version as current: jobs placed from now on get it; running and
    /// staging jobs keep theirs. The API handler decides who may.
    pub(crate) async fn add_version(
        &mut self,
        name: &str,
        version: VersionRow,
        manifest: Manifest,
        caller: &Caller,
    ) -> anyhow::Result<Result<DatasetView, ApiError>> {
        if !self.data.datasets.contains_key(name) {
            return Ok(Err(unknown_dataset(name, &self.data)));
        }
        let mut tx = self.db.begin().await?;
        Db::insert_version(&mut tx, name, &version).await?;
        tx.commit().await?;
        tracing::info!(
            name,
            version = version.version,
            by = caller.user,
            "new dataset version"
        );
        self.data.remember(name, manifest);
        let row = self.data.datasets.get_mut(name).expect("checked above");
        row.current = version.version.clone();
        let versions = self.db.dataset_versions(name).await?;
        Ok(Ok(dataset_view(row, &versions)))
    }
}
