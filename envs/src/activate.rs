//! How a job's command runs inside an environment.

use crate::EnvKind;
use crate::kind::ImageFormat;
use crate::run::quote;
use crate::tools::{Tool, Tools};
use crate::{EnvError, container, modules};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What `PATH` is taken to be when the job's environment has none.
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// Run by `/bin/sh` inside a ch-run container before the job: `cd` to the job's working
/// directory when the image has it, else stay in `/` and say so. (ch-run's own `--cd` fails
/// the job when the directory is missing, and a SquashFS image is read-only, so a host
/// directory cannot be bound where the image has no mount point.)
const CD_THEN_EXEC: &str = "cd \"$1\" 2>/dev/null || echo \"labpool: $1 is not inside the image; \
                            the job runs in /\" >&2; shift; exec \"$@\"";

/// A command to run: program, arguments and the environment to run it with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// Program.
    pub program: PathBuf,
    /// Arguments.
    pub args: Vec<String>,
    /// The whole environment.
    pub env: BTreeMap<String, String>,
}

/// What to wrap: a job's script, its arguments and environment, and the environment to run it in.
#[derive(Debug, Clone)]
pub struct WrapRequest<'a> {
    /// The environment's kind.
    pub kind: EnvKind,
    /// Where the environment is built.
    pub dir: &'a Path,
    /// The tools found on this node.
    pub tools: &'a Tools,
    /// The job's script, an executable file.
    pub script: &'a Path,
    /// The script's content (containers run the text; the file is not visible inside).
    pub text: &'a str,
    /// The script's arguments.
    pub args: &'a [String],
    /// The job's working directory (for containers; it must exist inside the image).
    pub workdir: &'a Path,
    /// The job's whole environment, before the environment's own variables.
    pub env: BTreeMap<String, String>,
}

/// Wraps the request's script and args so that they run inside the environment of `kind`
/// built at `dir`. `LABPOOL_ENV_KIND` and `LABPOOL_ENV_DIR` are always set.
/// - venv, conda: the script itself, with `PATH`, `VIRTUAL_ENV` or `CONDA_PREFIX` set (conda's
///   `activate.d` scripts are not run);
/// - modules: `bash -c '. LMOD_INIT && . DIR/modules.sh && exec "$0" "$@"' script args`, which
///   stops before the job if a `module` line fails;
/// - container: `ch-run IMAGE -- /bin/sh -c 'cd WORKDIR; exec "$@"' INTERPRETER -c TEXT NAME
///   args` for SquashFS (apptainer when ch-run is missing), `apptainer exec --nv --pwd WORKDIR
///   IMAGE INTERPRETER -c TEXT NAME args` for SIF;
///   the interpreter is the script's `#!` line's (see [`crate::shebang::command`]). ch-run
///   needs `USER` in `env`.
pub fn wrap(req: &WrapRequest<'_>) -> Result<Command, EnvError> {
    let &WrapRequest {
        kind,
        dir,
        tools,
        script,
        text,
        args,
        workdir,
        ref env,
    } = req;
    let mut env = env.clone();
    let dir_str = dir.to_string_lossy().into_owned();
    env.insert("LABPOOL_ENV_KIND".into(), kind.as_str().into());
    env.insert("LABPOOL_ENV_DIR".into(), dir_str.clone());
    let plain = |env| Command {
        program: script.to_path_buf(),
        args: args.to_vec(),
        env,
    };
    match kind {
        EnvKind::Venv => {
            prepend_path(&mut env, dir);
            env.insert("VIRTUAL_ENV".into(), dir_str);
            env.remove("PYTHONHOME");
            Ok(plain(env))
        }
        EnvKind::Conda => {
            prepend_path(&mut env, dir);
            env.insert("CONDA_PREFIX".into(), dir_str.clone());
            env.insert("CONDA_DEFAULT_ENV".into(), dir_str);
            env.remove("PYTHONHOME");
            Ok(plain(env))
        }
        EnvKind::Modules => {
            let init = modules::lmod_init(tools)?;
            let sourced = dir.join(modules::SCRIPT);
            let line = format!(
                ". {} && . {} && exec \"$0\" \"$@\"",
                quote(&init.to_string_lossy()),
                quote(&sourced.to_string_lossy())
            );
            let mut all = vec![
                "-c".to_string(),
                line,
                script.to_string_lossy().into_owned(),
            ];
            all.extend(args.iter().cloned());
            Ok(Command {
                program: PathBuf::from("/bin/bash"),
                args: all,
                env,
            })
        }
        EnvKind::Container => {
            let (image, format) = container::built_image(dir)?;
            let inner = crate::shebang::command(script, text, args)?;
            let image = image.to_string_lossy().into_owned();
            let workdir = workdir.to_string_lossy().into_owned();
            let (program, mut all) = match (format, &tools.ch_run, &tools.apptainer) {
                (ImageFormat::Squashfs, Some(ch_run), _) => {
                    let cd = vec![
                        "/bin/sh".into(),
                        "-c".into(),
                        CD_THEN_EXEC.into(),
                        "labpool-cd".into(),
                    ];
                    let all = [vec![image, "--".into()], cd, vec![workdir]].concat();
                    (ch_run.clone(), all)
                }
                (_, _, Some(apptainer)) => {
                    let all = vec!["exec".into(), "--nv".into(), "--pwd".into(), workdir, image];
                    (apptainer.clone(), all)
                }
                (ImageFormat::Squashfs, None, None) => return Err(missing(Tool::ChRun)),
                (ImageFormat::Sif, _, None) => return Err(missing(Tool::Apptainer)),
            };
            all.extend(inner);
            Ok(Command {
                program,
                args: all,
                env,
            })
        }
    }
}

fn missing(tool: Tool) -> EnvError {
    EnvError::MissingTool {
        tool,
        kind: EnvKind::Container,
    }
}

/// `PATH=DIR/bin:<PATH, or a default>`.
fn prepend_path(env: &mut BTreeMap<String, String>, dir: &Path) {
    let rest = env.get("PATH").map_or(DEFAULT_PATH, |p| p.as_str());
    let path = format!("{}:{rest}", dir.join("bin").display());
    env.insert("PATH".into(), path);
}
