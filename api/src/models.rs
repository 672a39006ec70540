//! The lab model cache: model weights in the Hugging Face hub's layout, staged like datasets.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// One model a job reads: the repository it asked for, and the dataset it is staged as.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelUse {
    /// `org/name`.
    pub repo: String,
    /// The hub's folder for it, `models--org--name`: what the job's hub cache links.
    pub folder: String,
    /// The dataset that holds it.
    pub dataset: String,
}

/// `POST /v1/models`: add a revision of a model from a directory the caller can read.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AddModelRequest {
    /// `org/name[@revision]`.
    pub spec: String,
    /// A plain download or a hub cache (its root, or the model's own folder).
    pub from: PathBuf,
    /// Into the lab's shared namespace (admins) rather than the caller's own.
    #[serde(default)]
    pub shared: bool,
}

/// A model's revision as it was added.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelAdded {
    /// The model.
    pub model: ModelView,
    /// The revision given.
    pub revision: String,
    /// The commit its snapshot is named by.
    pub commit: String,
    /// Files in the revision.
    pub files: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Bytes the store did not hold before (files shared with other revisions are kept once).
    pub new_bytes: u64,
}

/// A registered model.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ModelView {
    /// `org/name`.
    pub repo: String,
    /// Whose it is: `""` for the lab's shared namespace.
    pub owner: String,
    /// The dataset it is staged as.
    pub dataset: String,
    /// Its current version (all of its revisions).
    pub version: String,
    /// Files in that version (every revision's links and blobs).
    pub files: u64,
    /// Its bytes on a node.
    pub bytes: u64,
    /// Its refs and the commit each names, in name order.
    pub refs: Vec<(String, String)>,
    /// Where it is kept on the shared storage.
    pub path: PathBuf,
}
