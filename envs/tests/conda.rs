//! Conda environments where neither micromamba nor conda is installed (the CI image has none).

use labpool_envs::tools::Tools;
use labpool_envs::{EnvError, EnvKind, build::build, lock::lock};

fn without_conda() -> Tools {
    Tools {
        conda: None,
        ..Tools::detect(None)
    }
}

#[test]
fn locking_without_conda_says_how_to_install_micromamba() {
    let tmp = tempfile::tempdir().unwrap();
    let spec = tmp.path().join("environment.yml");
    std::fs::write(&spec, "name: exp\ndependencies:\n  - numpy=1.26\n").unwrap();
    let err = lock(&spec, None, &without_conda(), &mut Vec::new()).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            EnvError::MissingTool {
                kind: EnvKind::Conda,
                ..
            }
        ),
        "{msg}"
    );
    for needed in [
        "conda environments need micromamba or conda",
        "https://micro.mamba.pm/api/micromamba/linux-64/latest",
        "Miniforge",
        "put it on PATH on the controller and every node",
    ] {
        assert!(msg.contains(needed), "missing {needed:?} in: {msg}");
    }
}

#[test]
fn building_without_conda_fails_the_same_way() {
    let tmp = tempfile::tempdir().unwrap();
    let locked = labpool_envs::Lock {
        kind: EnvKind::Conda,
        lock: "dependencies:\n  - numpy\n".into(),
        platform: "p".into(),
        id: "0".repeat(24),
        spec: String::new(),
        image: None,
    };
    let err = build(&locked, tmp.path(), &without_conda(), &mut Vec::new()).unwrap_err();
    assert!(err.to_string().contains("micromamba"), "{err}");
    assert!(!labpool_envs::pack::is_complete(tmp.path()));
}
