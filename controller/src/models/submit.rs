//! A submit's `--model org/name`: the member's own model, else the shared one, staged as its
//! dataset.

use crate::api::{ModelUse, SubmitRequest};
use crate::error::ApiError;
use crate::http::AppState;
use crate::identity::Caller;
use crate::models::names;
use labpool_cache::hub::RepoId;

/// The most models one job may read.
const MAX_MODELS: usize = 16;

/// Fills in `req.model_uses` from `req.models` and adds each model's dataset to the job's
/// datasets. Every model that is not there is reported at once; nothing is changed then.
pub async fn resolve(
    state: &AppState,
    req: &mut SubmitRequest,
    caller: &Caller,
) -> Result<(), ApiError> {
    // Only the controller fills this in.
    req.model_uses.clear();
    // A model's dataset is named only through --model, which checks whose it is.
    if let Some(d) = req
        .datasets
        .iter()
        .find(|d| d.starts_with(names::DATASET_PREFIX))
    {
        return Err(ApiError::bad_request(
            format!(
                "--dataset {d}: datasets named {}* are models",
                names::DATASET_PREFIX
            ),
            Some("declare the model with --model ORG/NAME (`labpool model list`)".to_string()),
        ));
    }
    if req.models.is_empty() {
        return Ok(());
    }
    if req.models.len() > MAX_MODELS {
        return Err(ApiError::bad_request(
            format!(
                "{} models asked for; a job may read at most {MAX_MODELS}",
                req.models.len()
            ),
            None,
        ));
    }
    let registered: std::collections::BTreeSet<String> = state
        .db
        .datasets()
        .await?
        .into_iter()
        .map(|d| d.name)
        .collect();
    let mut problems = Vec::new();
    let mut uses = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for spec in &req.models {
        let repo = match RepoId::parse(spec) {
            Ok(r) => r,
            Err(e) => {
                problems.push(e.to_string());
                continue;
            }
        };
        let found = [caller.user.as_str(), ""]
            .into_iter()
            .map(|owner| names::dataset_name(owner, &repo))
            .find(|d| registered.contains(d));
        match found {
            Some(dataset) if !seen.insert(dataset.clone()) => {}
            Some(dataset) => uses.push(ModelUse {
                repo: repo.as_string(),
                folder: repo.folder(),
                dataset,
            }),
            None => problems.push(format!("no model {repo} in your namespace or the lab's")),
        }
    }
    if !problems.is_empty() {
        return Err(ApiError::bad_request(
            format!("the job was not queued: {}", problems.join("; ")),
            Some(
                "`labpool model list` shows the models; add one with `labpool model add ORG/NAME --from DIR`"
                    .to_string(),
            ),
        ));
    }
    for u in &uses {
        if !req.datasets.contains(&u.dataset) {
            req.datasets.push(u.dataset.clone());
        }
    }
    req.model_uses = uses;
    Ok(())
}
