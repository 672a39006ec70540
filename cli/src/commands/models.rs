//! `labpool model …`: the lab model cache.

use crate::api::models::{AddModelRequest, ModelAdded, ModelView};
use crate::args::ModelCommand;
use crate::client::Client;
use crate::render::{print, spinner, table};
use crate::settings::Config;
use labpool_cache::hub::{RepoId, check_revision, export};

/// Runs `labpool model …`.
pub async fn run(command: &ModelCommand, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    match command {
        ModelCommand::Add {
            spec,
            from,
            shared,
            json,
        } => {
            let from = std::path::absolute(from)?;
            let bar = spinner(format!("copying {spec} from {}", from.display()));
            let req = AddModelRequest {
                spec: spec.clone(),
                from,
                shared: *shared,
            };
            let result: Result<ModelAdded, _> = client.post("/v1/models", &req).await;
            bar.finish_and_clear();
            let added = result?;
            print(*json, &added, |a| {
                format!(
                    "added {}@{} (commit {}): {}, {} new; {} namespace\njobs read it with --model {}; from_pretrained(\"{}\") finds it staged on their node",
                    a.model.repo,
                    a.revision,
                    a.commit,
                    labpool_units::count(a.files, "file"),
                    labpool_units::format_size(a.new_bytes),
                    if a.model.owner.is_empty() {
                        "the lab's shared".to_string()
                    } else {
                        format!("{}'s", a.model.owner)
                    },
                    a.model.repo,
                    a.model.repo,
                )
            });
        }
        ModelCommand::List(a) => {
            let all: Vec<ModelView> = client.get("/v1/models").await?;
            print(a.json, &all, |all| {
                if all.is_empty() {
                    return "no models yet; add one with `labpool model add ORG/NAME --from DIR`"
                        .to_string();
                }
                let rows = all
                    .iter()
                    .map(|m| {
                        vec![
                            m.repo.clone(),
                            if m.owner.is_empty() {
                                "(shared)".into()
                            } else {
                                m.owner.clone()
                            },
                            m.refs
                                .iter()
                                .map(|(name, commit)| {
                                    format!("{name}={}", &commit[..commit.len().min(12)])
                                })
                                .collect::<Vec<_>>()
                                .join(" "),
                            labpool_units::format_size(m.bytes),
                            m.dataset.clone(),
                        ]
                    })
                    .collect();
                table(&["MODEL", "OWNER", "REFS", "SIZE", "DATASET"], rows)
            });
        }
        ModelCommand::Export { .. } => unreachable!("run before the runtime starts"),
    }
    Ok(())
}

/// `labpool model export DIR --repo R --revision V`: started by the controller as the member
/// who adds a model; writes the revision's files to standard output as a tar stream.
pub fn export(dir: &std::path::Path, repo: &str, revision: &str) -> anyhow::Result<()> {
    let repo = RepoId::parse(repo)?;
    check_revision(revision)?;
    let found = export::find(dir, &repo, revision)?;
    let out = std::io::BufWriter::with_capacity(1 << 20, std::io::stdout().lock());
    export::write(&found, out, &|_| {})?;
    Ok(())
}
