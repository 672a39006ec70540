//! What a command that only talks to the controller reads of the config: where the socket is.
//!
//! Slurm's commands run once per job in a lab's shell loops (`for … do sbatch …; done`), and
//! reading the whole config (every section checked, every cron schedule parsed) was most of
//! their own work. The controller checked the whole file when it started; a command that only
//! needs the socket reads `[controller] socket` and leaves the rest to it (and to
//! `labpool doctor` and `labpool --show-settings`, which read the whole file).

use crate::{Config, ConfigError};
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The file, as far as a client reads it: unknown keys are the rest of the config.
#[derive(Deserialize)]
struct ClientView {
    controller: ControllerView,
}

#[derive(Deserialize)]
struct ControllerView {
    socket: PathBuf,
}

impl Config {
    /// The controller's socket per the config [`Config::locate`] would read, without reading
    /// the rest: a relative path is the file's directory's, as in [`Config::load`].
    pub fn locate_socket(explicit: Option<&Path>) -> Result<PathBuf, ConfigError> {
        let (text, path) = Config::read(&Config::path_of(explicit)?)?;
        let view: ClientView = Config::from_toml(&text, &path)?;
        let base = path.parent().unwrap_or(Path::new("/"));
        Ok(base.join(view.controller.socket))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_is_the_one_the_whole_config_names() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("labpool.toml");
        for socket in ["labpool.sock", "/run/labpool/labpool.sock", "sub/dir.sock"] {
            let text = format!("[controller]\nsocket = {socket:?}\nstate_dir = \"state\"\n");
            std::fs::write(&file, &text).unwrap();
            let whole = Config::locate(Some(&file)).unwrap();
            assert_eq!(
                Config::locate_socket(Some(&file)).unwrap(),
                whole.controller.socket,
                "{text}"
            );
        }
    }

    #[test]
    fn the_rest_of_the_file_is_left_to_the_controller() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("labpool.toml");
        let text = "[controller]\nsocket = \"s.sock\"\nstate_dir = \"state\"\n\n\
                    [quotas]\nscan_schedule = \"every night\"\n";
        std::fs::write(&file, text).unwrap();
        let whole = Config::locate(Some(&file)).unwrap_err().to_string();
        assert!(whole.contains("every night"), "{whole}");
        assert_eq!(
            Config::locate_socket(Some(&file)).unwrap(),
            dir.path().join("s.sock")
        );
    }

    #[test]
    fn a_missing_file_or_socket_is_the_same_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("labpool.toml");
        let e = Config::locate_socket(Some(&file)).unwrap_err().to_string();
        assert!(e.contains("no config file at"), "{e}");
        std::fs::write(&file, "[controller]\nstate_dir = \"state\"\n").unwrap();
        let e = Config::locate_socket(Some(&file)).unwrap_err().to_string();
        assert!(e.contains("missing field `socket`"), "{e}");
        assert!(e.contains("labpool.toml"), "{e}");
    }
}
