//! `labpool model`: the lab model cache.

use super::JsonArg;
use clap::Subcommand;
use std::path::PathBuf;

// `labpool model`.
#[derive(Subcommand, Debug)]
pub enum ModelCommand {
    /// Add a revision of a model from a directory you can read: a download (`hf download
    /// --local-dir`) or a Hugging Face hub cache; jobs then read it with --model ORG/NAME
    Add {
        /// The model as the hub names it, ORG/NAME, optionally @REVISION (a branch, tag or
        /// commit; default main)
        spec: String,
        /// The directory to read it from
        #[arg(long, value_name = "DIR")]
        from: PathBuf,
        /// Into the lab's shared namespace, for every member (admins); otherwise your own
        #[arg(long)]
        shared: bool,
        /// Print JSON
        #[arg(long)]
        json: bool,
    },
    /// The models jobs can read, yours and the lab's, with their revisions
    List(JsonArg),
    /// Write a revision's files as a tar stream (started by the controller as the user)
    #[command(hide = true)]
    Export {
        /// The directory to read.
        dir: PathBuf,
        /// ORG/NAME.
        #[arg(long)]
        repo: String,
        /// The revision.
        #[arg(long)]
        revision: String,
    },
}
