//! Locking: a spec becomes an exact, reproducible lock.

use crate::tools::Tools;
use crate::{EnvError, EnvKind};
use serde::{Deserialize, Serialize};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// A locked spec: everything a build needs, and what the id is computed from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Lock {
    /// Kind.
    pub kind: EnvKind,
    /// The lock text (venv: `name==version --hash=sha256:...` lines; conda: the normalised
    /// spec; container: `blake3:<hash> <file name>`; modules: the normalised lines).
    pub lock: String,
    /// The platform (see [`crate::id::platform`]).
    pub platform: String,
    /// The id ([`crate::id::env_id`] of the three above).
    pub id: String,
    /// The spec text as given (for `env show`); empty for container images.
    pub spec: String,
    /// The image file, for containers: the build copies it and checks its hash.
    pub image: Option<PathBuf>,
}

/// Reads the spec at `path` and locks it. Runs as the user who asked (it reads their files).
/// Progress and tool output go to `log`. `kind` overrides telling the kind from the file.
pub fn lock(
    path: &Path,
    kind: Option<EnvKind>,
    tools: &Tools,
    log: &mut dyn Write,
) -> Result<Lock, EnvError> {
    let kind = match kind {
        Some(kind) => kind,
        None => EnvKind::detect(path, &read_head(path)?)?,
    };
    let (lock, spec, image) = match kind {
        EnvKind::Container => {
            let (lock, image) = crate::container::lock(path)?;
            (lock, String::new(), Some(image))
        }
        EnvKind::Venv => {
            let spec = read_text(path)?;
            (crate::venv::lock(path, &spec, tools, log)?, spec, None)
        }
        EnvKind::Conda => {
            let spec = read_text(path)?;
            (crate::conda::lock(path, &spec, tools)?, spec, None)
        }
        EnvKind::Modules => {
            let spec = read_text(path)?;
            (crate::modules::lock(path, &spec, tools, log)?, spec, None)
        }
    };
    let platform = crate::id::platform(kind, tools)?;
    let id = crate::id::env_id(kind, &lock, &platform);
    crate::run::note(
        log,
        &format!(
            "locked {} as {kind} environment {id} for {platform}",
            path.display()
        ),
    );
    Ok(Lock {
        kind,
        lock,
        platform,
        id,
        spec,
        image,
    })
}

/// The first 4 KiB of the spec, for [`EnvKind::detect`]. A missing file that looks like an
/// image by its name is reported as a missing image.
fn read_head(path: &Path) -> Result<Vec<u8>, EnvError> {
    let mut head = Vec::with_capacity(4096);
    let opened = std::fs::File::open(path);
    let read = opened.and_then(|f| f.take(4096).read_to_end(&mut head));
    match read {
        Ok(_) => Ok(head),
        Err(source) if looks_like_image(path) => Err(EnvError::ImageMissing {
            path: path.to_path_buf(),
            source,
        }),
        Err(source) => Err(EnvError::UnreadableSpec {
            path: path.to_path_buf(),
            source,
        }),
    }
}

fn looks_like_image(path: &Path) -> bool {
    let ext = path.extension().map(|e| e.to_string_lossy().to_lowercase());
    matches!(
        ext.as_deref(),
        Some("sif" | "sqfs" | "squashfs" | "squash" | "img")
    )
}

/// The whole spec, as UTF-8 text.
fn read_text(path: &Path) -> Result<String, EnvError> {
    let bytes = std::fs::read(path).map_err(|source| EnvError::UnreadableSpec {
        path: path.to_path_buf(),
        source,
    })?;
    String::from_utf8(bytes).map_err(|e| EnvError::BadSpec {
        path: path.to_path_buf(),
        why: format!(
            "is not UTF-8 text (bad byte at offset {}); pass `--kind container` if it is an image, \
             else save it as UTF-8",
            e.utf8_error().valid_up_to()
        ),
    })
}
