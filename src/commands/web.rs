//! `labpool web`: a one-time URL that logs this user's browser in to the dashboard.

use crate::api::web::{LoginRequest, LoginUrl};
use crate::client::Client;
use crate::render::print;
use crate::settings::Config;

/// Prints the login URL (or JSON).
pub async fn login_url(next: Option<String>, as_json: bool, config: &Config) -> anyhow::Result<()> {
    let url: LoginUrl = Client::new(&config.controller.socket)
        .post("/v1/web/login", &LoginRequest { next })
        .await?;
    print(as_json, &url, |u| {
        format!(
            "Open this URL in a browser within {} to log in as {} (it works once):\n\n    {}\n\nFrom another machine, forward the port first: ssh -L PORT:HOST:PORT this-machine",
            labpool_units::format_duration(std::time::Duration::from_secs(u.expires_in_s)),
            u.user,
            u.url
        )
    });
    Ok(())
}
