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
        let hostport = u
            .url
            .trim_start_matches("http://")
            .split('/')
            .next()
            .unwrap_or_default();
        let port = hostport.rsplit_once(':').map_or("9402", |(_, p)| p);
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_else(|| "this-machine".into());
        format!(
            "Open this URL in a browser within {} to log in as {} (it works once):\n\n    {}\n\nFrom your laptop, tunnel first (ssh -L {port}:{hostport} {host}) and open it with localhost:{port}.",
            labpool_units::format_duration(std::time::Duration::from_secs(u.expires_in_s)),
            u.user,
            u.url
        )
    });
    Ok(())
}
