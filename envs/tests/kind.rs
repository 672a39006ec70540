//! Telling an environment's kind from its spec, the kind words, and ids.

use labpool_envs::id::{env_id, platform};
use labpool_envs::tools::Tools;
use labpool_envs::{EnvError, EnvKind};
use std::path::Path;

fn detect(name: &str, head: &[u8]) -> Result<EnvKind, EnvError> {
    EnvKind::detect(Path::new(name), head)
}

#[test]
fn kinds_come_from_names() {
    for (name, kind) in [
        ("requirements.txt", EnvKind::Venv),
        ("requirements-gpu.txt", EnvKind::Venv),
        ("deps/requirements.in", EnvKind::Venv),
        ("pyproject.toml", EnvKind::Venv),
        ("environment.yml", EnvKind::Conda),
        ("environment.yaml", EnvKind::Conda),
        ("image.sif", EnvKind::Container),
        ("image.sqfs", EnvKind::Container),
        ("image.squashfs", EnvKind::Container),
        ("cuda.modules", EnvKind::Modules),
        ("modules.txt", EnvKind::Modules),
    ] {
        assert_eq!(detect(name, b"").unwrap(), kind, "{name}");
    }
}

#[test]
fn kinds_come_from_content_where_the_name_does_not_say() {
    assert_eq!(
        detect("x.img", b"hsqs\x10\x00\x00\x00").unwrap(),
        EnvKind::Container
    );
    let mut sif = b"#!/usr/bin/env run-singularity\n\x00".to_vec();
    sif.extend_from_slice(b"SIF_MAGIC\x00");
    assert_eq!(detect("x.img", &sif).unwrap(), EnvKind::Container);
    assert_eq!(
        detect("gpu.yml", b"name: x\ndependencies:\n  - numpy\n").unwrap(),
        EnvKind::Conda
    );
    let modules = b"# cuda stack\nmodule load cuda/12.4\n\nmodule load cudnn/9\n";
    assert_eq!(detect("stack", modules).unwrap(), EnvKind::Modules);
    // A head cut off mid-line still reads as module lines.
    assert_eq!(
        detect("stack", b"module load a/1\nmodu").unwrap(),
        EnvKind::Modules
    );
}

#[test]
fn an_unknown_spec_says_what_is_accepted_and_about_kind() {
    let err = detect("notes.md", b"hello\nmodule load x\n")
        .unwrap_err()
        .to_string();
    for needed in [
        "notes.md",
        "requirements",
        "environment.yml",
        "SquashFS",
        "module load",
        "--kind",
    ] {
        assert!(err.contains(needed), "missing {needed:?} in: {err}");
    }
    assert!(detect("settings.yml", b"a: 1\n").is_err());
    assert!(detect("empty", b"").is_err());
}

#[test]
fn kind_words_round_trip() {
    for kind in [
        EnvKind::Venv,
        EnvKind::Conda,
        EnvKind::Container,
        EnvKind::Modules,
    ] {
        assert_eq!(kind.as_str().parse::<EnvKind>().unwrap(), kind);
        assert_eq!(
            serde_json::to_string(&kind).unwrap(),
            format!("\"{}\"", kind.as_str())
        );
    }
    let err = "docker".parse::<EnvKind>().unwrap_err().to_string();
    assert!(
        err.contains("docker") && err.contains("venv, conda, container, modules"),
        "{err}"
    );
}

#[test]
fn ids_hash_kind_lock_and_platform() {
    let id = env_id(
        EnvKind::Venv,
        "six==1.16.0\n",
        "linux-x86_64-glibc2.36-py3.11",
    );
    assert_eq!(id.len(), 24);
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    assert_eq!(
        id,
        env_id(
            EnvKind::Venv,
            "six==1.16.0\n",
            "linux-x86_64-glibc2.36-py3.11"
        )
    );
    assert_ne!(
        id,
        env_id(
            EnvKind::Conda,
            "six==1.16.0\n",
            "linux-x86_64-glibc2.36-py3.11"
        )
    );
    assert_ne!(
        id,
        env_id(
            EnvKind::Venv,
            "six==1.16.0\n",
            "linux-x86_64-glibc2.36-py3.12"
        )
    );
    // The separator keeps "a" + "bc" apart from "ab" + "c".
    assert_ne!(
        env_id(EnvKind::Venv, "a", "bc"),
        env_id(EnvKind::Venv, "ab", "c")
    );
}

#[test]
fn the_platform_names_os_machine_and_libc() {
    let p = platform(EnvKind::Modules, &Tools::default()).unwrap();
    let expected = format!("linux-{}-glibc", std::env::consts::ARCH);
    assert!(p.starts_with(&expected) && !p.contains("-py"), "{p}");
    let err = platform(EnvKind::Venv, &Tools::default())
        .unwrap_err()
        .to_string();
    assert!(err.contains("python3-venv"), "{err}");
}
