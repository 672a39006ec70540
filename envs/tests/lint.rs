//! The CUDA_VISIBLE_DEVICES lint: what it flags, what it leaves alone, and its message.

use labpool_envs::lint::{Finding, cuda_visible_devices_overrides, explain};

#[test]
fn every_way_of_setting_it_is_flagged() {
    let lines = [
        "export CUDA_VISIBLE_DEVICES=0,1,2,3",
        "export CUDA_VISIBLE_DEVICES",
        "CUDA_VISIBLE_DEVICES=0 python x.py",
        "CUDA_VISIBLE_DEVICES=2",
        "env CUDA_VISIBLE_DEVICES=1 python",
        "env -u CUDA_VISIBLE_DEVICES python",
        "declare -x CUDA_VISIBLE_DEVICES=0,1",
        "typeset -x CUDA_VISIBLE_DEVICES",
        "setenv CUDA_VISIBLE_DEVICES 0",
        "unset CUDA_VISIBLE_DEVICES",
        "set -gx CUDA_VISIBLE_DEVICES 0",
        "[ -n \"$X\" ] && export CUDA_VISIBLE_DEVICES=1",
        "cd /x; CUDA_VISIBLE_DEVICES=0 torchrun train.py # go",
        "bash -c 'export CUDA_VISIBLE_DEVICES=3; python t.py'",
        "os.environ[\"CUDA_VISIBLE_DEVICES\"] = \"0\"",
        "os.environ['CUDA_VISIBLE_DEVICES']=\"0\"",
        "os.environ.setdefault(\"CUDA_VISIBLE_DEVICES\", \"0\")",
        "os.environ.update({\"CUDA_VISIBLE_DEVICES\": \"0,1\"})",
        "os.putenv(\"CUDA_VISIBLE_DEVICES\", \"0\")",
        "del os.environ['CUDA_VISIBLE_DEVICES']",
        "python -c \"import os; os.environ['CUDA_VISIBLE_DEVICES']='0'; import torch\"",
        "python3 -c 'import os; os.environ.setdefault(\"CUDA_VISIBLE_DEVICES\", \"1\")'",
        "python -c \"import os; os.putenv(\\\"CUDA_VISIBLE_DEVICES\\\", \\\"0\\\")\"",
    ];
    for line in lines {
        let script = format!("#!/bin/bash\n{line}\n");
        let found = cuda_visible_devices_overrides(&script);
        assert_eq!(
            found,
            [Finding {
                line: 2,
                text: line.to_string()
            }],
            "not flagged: {line}"
        );
    }
}

#[test]
fn reading_it_and_comments_are_not_flagged() {
    let lines = [
        "# export CUDA_VISIBLE_DEVICES=0",
        "   # CUDA_VISIBLE_DEVICES=0 python x.py",
        "#SBATCH --export=CUDA_VISIBLE_DEVICES=0",
        "#LABPOOL --env CUDA_VISIBLE_DEVICES=0",
        "echo $CUDA_VISIBLE_DEVICES",
        "echo \"gpus: ${CUDA_VISIBLE_DEVICES}\"",
        "echo 'export CUDA_VISIBLE_DEVICES=0'",
        "nvidia-smi -i $CUDA_VISIBLE_DEVICES",
        "python train.py --gpus \"$CUDA_VISIBLE_DEVICES\" # CUDA_VISIBLE_DEVICES=1",
        "print(os.environ[\"CUDA_VISIBLE_DEVICES\"])",
        "gpus = os.environ.get('CUDA_VISIBLE_DEVICES', '')",
        "if os.environ['CUDA_VISIBLE_DEVICES'] == '0':",
        "test -z \"$CUDA_VISIBLE_DEVICES\" || echo set",
        "python -c 'import os; print(os.environ[\"CUDA_VISIBLE_DEVICES\"])'",
    ];
    for line in lines {
        let script = format!("#!/bin/bash\n{line}\n");
        assert_eq!(
            cuda_visible_devices_overrides(&script),
            [],
            "flagged: {line}"
        );
    }
}

#[test]
fn a_heredoc_of_python_is_read_line_by_line() {
    let script = "#!/bin/bash\npython - <<'EOF'\nimport os\n# os.environ['CUDA_VISIBLE_DEVICES'] = '9'\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\nEOF\n";
    let found = cuda_visible_devices_overrides(script);
    assert_eq!(found.iter().map(|f| f.line).collect::<Vec<_>>(), [5]);
}

#[test]
fn the_message_lists_the_lines_and_what_to_do() {
    let findings =
        cuda_visible_devices_overrides("#!/bin/sh\nexport CUDA_VISIBLE_DEVICES=0,1\npython t.py\n");
    let refused = explain(&findings, true, false);
    for needed in [
        "line 2: export CUDA_VISIBLE_DEVICES=0,1",
        "labpool sets CUDA_VISIBLE_DEVICES to the GPUs the job was given",
        "other people's jobs",
        "device isolation",
        "--gpus N",
        "[jobs] cuda_visible_devices = \"warn\"",
    ] {
        assert!(refused.contains(needed), "missing {needed:?} in: {refused}");
    }
    assert!(refused.starts_with("refused"));
    let warned = explain(&findings, false, false);
    assert!(
        warned.starts_with("warning") && warned.contains("line 2:") && warned.contains("--gpus N"),
        "{warned}"
    );
}

#[test]
fn an_unset_is_called_so_and_a_wrap_command_has_no_line_numbers() {
    let findings =
        cuda_visible_devices_overrides("#!/bin/sh\nunset CUDA_VISIBLE_DEVICES; python t.py\n");
    let text = explain(&findings, true, true);
    assert!(
        text.contains("the --wrap command unsets CUDA_VISIBLE_DEVICES"),
        "{text}"
    );
    assert!(!text.contains("line 2"), "{text}");
    assert_eq!(text.matches("hint: remove the line").count(), 1, "{text}");
}
