//! `account`, `qos`, `credits` and `why`.

use crate::api::{AccountChange, AccountsView, CreditsView, GrantRequest, WhyView};
use crate::args::{AccountCommand, CreditsArgs, CreditsCommand, QosCommand, ShowArgs};
use crate::client::Client;
use crate::render::{print, table};
use crate::settings::Config;

async fn change(config: &Config, change: AccountChange) -> anyhow::Result<()> {
    let message: String = Client::new(&config.controller.socket)
        .post("/v1/accounts", &change)
        .await?;
    crate::out!("{message}");
    Ok(())
}

fn dash(v: &[String], sep: &str) -> String {
    if v.is_empty() {
        "-".to_string()
    } else {
        v.join(sep)
    }
}

/// Runs `labpool account`.
pub async fn account(command: &AccountCommand, config: &Config) -> anyhow::Result<()> {
    let c = match command {
        AccountCommand::Add { name, description } => AccountChange::Add {
            name: name.clone(),
            description: description.clone(),
        },
        AccountCommand::Rm { name } => AccountChange::Remove { name: name.clone() },
        AccountCommand::AddUser { account, user } => AccountChange::AddUser {
            account: account.clone(),
            user: user.clone(),
        },
        AccountCommand::RmUser { account, user } => AccountChange::RemoveUser {
            account: account.clone(),
            user: user.clone(),
        },
        AccountCommand::List(a) => {
            let v: AccountsView = Client::new(&config.controller.socket)
                .get("/v1/accounts")
                .await?;
            print(a.json, &v, |v| {
                let rows = v
                    .accounts
                    .iter()
                    .map(|a| {
                        vec![
                            a.name.clone(),
                            dash(&a.members, ","),
                            dash(&a.limits, " "),
                            a.gpus_in_use.to_string(),
                            a.description.clone(),
                        ]
                    })
                    .collect();
                table(
                    &["ACCOUNT", "MEMBERS", "LIMITS", "GPUS-IN-USE", "DESCRIPTION"],
                    rows,
                )
            });
            return Ok(());
        }
    };
    change(config, c).await
}

/// Runs `labpool qos`.
pub async fn qos(command: &QosCommand, config: &Config) -> anyhow::Result<()> {
    match command {
        QosCommand::Set { user, items } => {
            let (account, settings) = match user {
                Some(_) => (None, items.clone()),
                None => {
                    if items[0].contains('=') {
                        anyhow::bail!(
                            "name the account first: labpool qos set ACCOUNT {}\nhint: or set one user's limits with --user USER",
                            items.join(" ")
                        );
                    }
                    (Some(items[0].clone()), items[1..].to_vec())
                }
            };
            change(
                config,
                AccountChange::SetQos {
                    account,
                    user: user.clone(),
                    settings,
                },
            )
            .await
        }
        QosCommand::List(a) => {
            let v: AccountsView = Client::new(&config.controller.socket)
                .get("/v1/accounts")
                .await?;
            print(a.json, &v, |v| {
                let mut rows: Vec<Vec<String>> = v
                    .accounts
                    .iter()
                    .map(|a| vec!["account".into(), a.name.clone(), dash(&a.limits, " ")])
                    .collect();
                rows.extend(
                    v.user_limits
                        .iter()
                        .map(|(u, l)| vec!["user".into(), u.clone(), dash(l, " ")]),
                );
                table(&["ON", "NAME", "LIMITS"], rows)
            });
            Ok(())
        }
    }
}

fn credits_text(v: &CreditsView) -> String {
    let mut out = format!(
        "Credits of {} for {} (they reset on {})\n  monthly grant   {:>10.2}\n  granted         {:>10.2}\n  rebated         {:>10.2}\n  charged         {:>10.2}\n  running jobs    {:>10.2}\n  balance         {:>10.2}{}\n  emergency tokens left: {} of {}\n",
        v.user,
        v.month,
        v.resets,
        v.monthly_grant,
        v.granted,
        v.rebated,
        v.charged,
        v.accruing,
        v.balance,
        if v.balance <= 0.0 {
            "  (overdrawn: your jobs run only on GPUs nobody in credit wants, and are preempted when someone in credit needs them)"
        } else {
            ""
        },
        v.tokens_left,
        v.tokens_per_month,
    );
    if !v.entries.is_empty() {
        let rows = v
            .entries
            .iter()
            .map(|e| {
                vec![
                    crate::commands::jobs::moment(Some(&e.time)),
                    e.kind.clone(),
                    format!("{:.2}", e.amount),
                    e.job.map_or_else(|| "-".to_string(), |j| j.to_string()),
                    e.note.clone().unwrap_or_default(),
                ]
            })
            .collect();
        out.push_str("Ledger\n");
        for line in table(&["TIME", "KIND", "AMOUNT", "JOB", "NOTE"], rows).lines() {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out.trim_end().to_string()
}

/// Runs `labpool credits`.
pub async fn credits(args: &CreditsArgs, config: &Config) -> anyhow::Result<()> {
    let client = Client::new(&config.controller.socket);
    let view: CreditsView = match &args.command {
        Some(CreditsCommand::Grant { user, amount, note }) => {
            let req = GrantRequest {
                user: user.clone(),
                amount: *amount,
                note: note.clone(),
            };
            client.post("/v1/credits/grant", &req).await?
        }
        None => {
            let query = crate::api::CreditsQuery {
                user: args.user.clone(),
            };
            client.get_query("/v1/credits", &query).await?
        }
    };
    print(args.json, &view, credits_text);
    Ok(())
}

fn why_text(w: &WhyView) -> String {
    let mut out = format!("Job {}: {}\n", w.id, w.state);
    for warning in &w.warnings {
        out.push_str(&format!("  warning: {warning}\n"));
    }
    match &w.note {
        None => out.push_str(&format!("  {}\n", w.summary)),
        Some(n) => {
            let f = &n.factors;
            out.push_str(&format!("  waits: {}\n", n.reason));
            out.push_str(&format!(
                "  stopped at: {} (position {} in the queue)\n",
                n.stage, n.position
            ));
            out.push_str(&format!(
                "  tier: {} (balance {:.2}); priority {:.1} = age {:.3}, fair-share {:.3}, partition {:.3} (weighted)\n",
                f.tier.as_str(),
                f.balance,
                f.priority,
                f.age,
                f.fairshare,
                f.partition
            ));
            if let Some((node, at)) = &n.reservation {
                out.push_str(&format!(
                    "  reserved: {node} at {}\n",
                    crate::clock::when(at.0)
                ));
            }
            if let Some(r) = &n.rejections {
                out.push_str(&format!(
                    "  placement: {}/{} nodes fit\n",
                    r.fit, r.considered
                ));
                let rows = w
                    .filters
                    .iter()
                    .map(|stage| {
                        vec![
                            stage.clone(),
                            r.by_stage
                                .iter()
                                .find(|(s, _)| s == stage)
                                .map_or(0, |(_, n)| *n)
                                .to_string(),
                        ]
                    })
                    .collect();
                for line in table(&["STAGE", "NODES REJECTED"], rows).lines() {
                    out.push_str(&format!("    {line}\n"));
                }
                out.push_str(&format!("  then scored by: {}\n", w.scorers.join(", ")));
            }
        }
    }
    for node in &w.nodes_off {
        out.push_str(&format!("  takes no new job: {node}\n"));
    }
    if !w.limits.is_empty() {
        out.push_str(&format!("  limits: {}\n", w.limits.join(" ")));
    }
    if let Some(advice) = &w.advice {
        out.push_str(&format!("  advice: {advice}\n"));
    }
    out.trim_end().to_string()
}

/// Runs `labpool why`.
pub async fn why(args: &ShowArgs, config: &Config) -> anyhow::Result<()> {
    let w: WhyView = Client::new(&config.controller.socket)
        .get(&format!("/v1/jobs/{}/why", args.id))
        .await?;
    print(args.json, &w, why_text);
    Ok(())
}
