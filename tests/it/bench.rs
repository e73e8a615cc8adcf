//! `cairn bench` on a tiny model: the engine flag, and `--vs-llama-bench`, which runs a
//! llama-bench binary beside cairn. llama.cpp is not part of cairn's test machines, so these
//! tests give it small stand-in scripts that answer the way llama-bench does (`-o json`) or
//! fail the ways a wrong path can; the real comparison is in BENCHMARKS.md.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use predicates::prelude::*;

use crate::common::{cairn, tiny_model, TinySpec};

/// Writes an executable shell script.
fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Asserts that a finished `cairn` run succeeded, showing its stderr when not.
fn succeeded(out: &std::process::Output) {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A stand-in llama-bench: logs its arguments, then prints one test in llama-bench's JSON
/// form, 100 tokens/s for prefill and 10 for decode.
const STAND_IN: &str = r#"echo "$@" >> "$(dirname "$0")/args.log"
p=0; n=0
while [ $# -gt 0 ]; do
  case "$1" in -p) p=$2; shift;; -n) n=$2; shift;; esac
  shift
done
if [ "$n" = 0 ]; then ts=100; else ts=10; fi
printf '[{"build_commit": "abc123", "n_prompt": %s, "n_gen": %s, "avg_ts": %s}]\n' "$p" "$n" "$ts""#;

#[test]
fn vs_llama_bench_runs_it_on_the_same_file_and_threads_after_each_repetition() {
    let (dir, model) = tiny_model(&TinySpec::llama());
    let exe = script(dir.path(), "llama-bench", STAND_IN);
    let out = cairn(dir.path())
        .args(["bench", "--threads", "2", "-p", "8", "-n", "4", "-r", "2"])
        .args(["--no-constrained", "--json", "--model"])
        .arg(&model)
        .arg("--vs-llama-bench")
        .arg(&exe)
        .output()
        .unwrap();
    succeeded(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let l = &report["vs_llama_bench"];
    assert_eq!(l["build"], "abc123");
    assert_eq!(l["prefill_tok_s"]["median"], 100.0);
    assert_eq!(l["decode_tok_s"]["median"], 10.0);
    let cairn_pp = report["prefill_tok_s"]["median"].as_f64().unwrap();
    let ratio = l["prefill_ratio"].as_f64().unwrap();
    assert!(
        (ratio - cairn_pp / 100.0).abs() < 1e-9,
        "{ratio} vs {cairn_pp}"
    );
    let log = std::fs::read_to_string(dir.path().join("args.log")).unwrap();
    let m = model.display();
    let want = [
        format!("-m {m} -t 2 -p 8 -n 0 -ngl 0 -r 1 -o json"),
        format!("-m {m} -t 2 -p 8 -n 0 -ngl 0 -r 1 -o json"),
        format!("-m {m} -t 2 -p 0 -n 4 -ngl 0 -r 1 -o json"),
        format!("-m {m} -t 2 -p 0 -n 4 -ngl 0 -r 1 -o json"),
    ];
    assert_eq!(log.lines().collect::<Vec<_>>(), want);

    // The table form prints the ratios.
    cairn(dir.path())
        .args([
            "bench",
            "-p",
            "8",
            "-n",
            "4",
            "-r",
            "1",
            "--no-constrained",
            "--model",
        ])
        .arg(&model)
        .arg("--vs-llama-bench")
        .arg(&exe)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("cairn/llama.cpp").and(predicate::str::contains("abc123")),
        );
}

#[test]
fn a_missing_llama_bench_is_named_before_the_model_loads() {
    let (dir, model) = tiny_model(&TinySpec::llama());
    cairn(dir.path())
        .args(["bench", "--model"])
        .arg(&model)
        .arg("--vs-llama-bench")
        .arg(dir.path().join("nope"))
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("nope: no such file")
                .and(predicate::str::contains("llama-bench binary"))
                .and(predicate::str::contains("panicked").not()),
        );
}

#[test]
fn a_failing_or_foreign_llama_bench_gives_its_reason() {
    let (dir, model) = tiny_model(&TinySpec::llama());
    let failing = script(
        dir.path(),
        "failing",
        "echo 'main: error: failed to load model' >&2\nexit 1",
    );
    let foreign = script(dir.path(), "foreign", "echo hello");
    for (exe, words) in [
        (failing, "failed to load model"),
        (foreign, "not llama-bench's JSON"),
    ] {
        cairn(dir.path())
            .args([
                "bench",
                "-p",
                "8",
                "-n",
                "4",
                "-r",
                "1",
                "--no-constrained",
                "--model",
            ])
            .arg(&model)
            .arg("--vs-llama-bench")
            .arg(&exe)
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains(words)
                    .and(predicate::str::contains("llama-bench ("))
                    .and(predicate::str::contains("panicked").not()),
            );
    }
}

#[test]
fn the_engine_flag_picks_the_forward_pass_and_rejects_unknown_names() {
    let (dir, model) = tiny_model(&TinySpec::qwen2());
    for engine in ["native", "candle"] {
        let out = cairn(dir.path())
            .args([
                "bench",
                "-p",
                "8",
                "-n",
                "4",
                "-r",
                "1",
                "--no-constrained",
                "--json",
            ])
            .args(["--engine", engine, "--model"])
            .arg(&model)
            .output()
            .unwrap();
        succeeded(&out);
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(report["engine"], engine);
        // On the CPU there is no copy of the logits to time and no GPU memory to read.
        assert_eq!(report["device"], "cpu");
        assert!(report["logits_copy_us"].is_null());
        assert!(report["gpu_memory_bytes"].is_null());
        assert_eq!(
            report["kernels"].as_str().unwrap().is_empty(),
            engine == "candle"
        );
    }
    cairn(dir.path())
        .args(["bench", "--engine", "gpu", "--model"])
        .arg(&model)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "unknown engine `gpu`: expected `native` or `candle`",
        ));
    cairn(dir.path())
        .env("CAIRN_ENGINE", "fast")
        .args(["bench", "--model"])
        .arg(&model)
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "CAIRN_ENGINE: unknown engine `fast`",
        ));
}

/// `--huge-pages` reads the model file into memory of 2 MB pages: the same tokens come out
/// as from the file mapped in place, and the load report says which it was. (A file of a
/// few kilobytes is copied without any such page; off Linux the flag is an error that says
/// to run without it, never a silent fallback.)
#[test]
fn huge_pages_decode_the_same_tokens_or_say_why_they_cannot() {
    let (dir, model) = tiny_model(&TinySpec::qwen2());
    let run = |huge: bool| {
        let mut cmd = cairn(dir.path());
        cmd.args(["-v", "generate", "--max-tokens", "12", "--model"])
            .arg(&model)
            .arg("one two three");
        if huge {
            cmd.arg("--huge-pages");
        }
        cmd.output().unwrap()
    };
    let mapped = run(false);
    succeeded(&mapped);
    assert!(String::from_utf8_lossy(&mapped.stderr).contains("used in place from the file"));
    let huge = run(true);
    let stderr = String::from_utf8_lossy(&huge.stderr);
    if cfg!(target_os = "linux") {
        assert!(huge.status.success(), "{stderr}");
        assert_eq!(huge.stdout, mapped.stdout, "{stderr}");
        assert!(
            stderr.contains("read into 2 MB pages (--huge-pages)"),
            "{stderr}"
        );
    } else {
        assert!(stderr.contains("run without it"), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    // The candle engine has its own reader: the flag would do nothing there, so it is refused.
    cairn(dir.path())
        .args(["generate", "--engine", "candle", "--huge-pages", "--model"])
        .arg(&model)
        .arg("one")
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--huge-pages with the candle engine",
        ));
}

/// `--device cpu` is the default spelled out: the native engine, or candle with `--engine
/// candle`; a GPU asked of a build without its feature, or the native engine asked to run on
/// a GPU, is a usage error before anything loads.
#[test]
fn the_device_flag_runs_on_the_cpu_and_refuses_what_this_build_cannot_do() {
    let (dir, model) = tiny_model(&TinySpec::qwen2());
    for engine in ["native", "candle"] {
        cairn(dir.path())
            .args(["--device", "cpu", "--engine", engine, "generate"])
            .args(["--max-tokens", "2", "--model"])
            .arg(&model)
            .arg("hi")
            .assert()
            .success();
    }
    if cfg!(feature = "cuda") {
        return;
    }
    for (flag, env) in [(Some("cuda"), None), (None, Some("cuda:1"))] {
        let mut cmd = cairn(dir.path());
        if let Some(d) = flag {
            cmd.args(["--device", d]);
        }
        if let Some(d) = env {
            cmd.env("CAIRN_DEVICE", d);
        }
        let says = if flag.is_some() {
            "--device"
        } else {
            "CAIRN_DEVICE"
        };
        cmd.args(["bench", "--model"])
            .arg(&model)
            .assert()
            .code(2)
            .stderr(
                predicate::str::contains(says)
                    .and(predicate::str::contains("--features cuda"))
                    .and(predicate::str::contains("or use --device cpu")),
            );
    }
}

/// `-d N` measures after N tokens already in the cache: llama-bench gets the same `-d`, the
/// table names the depth as llama-bench does (`pp8 … @ d40`), the JSON report carries it, and
/// a depth the context cannot hold is refused before anything is measured.
#[test]
fn a_depth_is_measured_after_that_many_cached_tokens_and_passed_to_llama_bench() {
    let (dir, model) = tiny_model(&TinySpec::llama());
    let exe = script(dir.path(), "llama-bench", STAND_IN);
    let out = cairn(dir.path())
        .args(["bench", "--threads", "2", "-p", "8", "-n", "4", "-d", "40"])
        .args(["-r", "1", "--no-constrained", "--model"])
        .arg(&model)
        .arg("--vs-llama-bench")
        .arg(&exe)
        .output()
        .unwrap();
    succeeded(&out);
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("tok/s @ d40"), "{table}");
    let log = std::fs::read_to_string(dir.path().join("args.log")).unwrap();
    let m = model.display();
    assert_eq!(
        log.lines().collect::<Vec<_>>(),
        [
            format!("-m {m} -t 2 -p 8 -n 0 -d 40 -ngl 0 -r 1 -o json"),
            format!("-m {m} -t 2 -p 0 -n 4 -d 40 -ngl 0 -r 1 -o json"),
        ]
    );

    let out = cairn(dir.path())
        .args(["bench", "-p", "8", "-n", "4", "-d", "40", "-r", "1"])
        .args(["--no-constrained", "--json", "--model"])
        .arg(&model)
        .output()
        .unwrap();
    succeeded(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["depth"], 40);
    assert!(report["decode_tok_s"]["median"].as_f64().unwrap() > 0.0);

    // The tiny model's context is 96 tokens: 90 + 8 do not fit.
    cairn(dir.path())
        .args(["bench", "-p", "8", "-n", "4", "-d", "90", "--model"])
        .arg(&model)
        .assert()
        .code(2)
        .stderr(
            predicate::str::contains("-d 90")
                .and(predicate::str::contains("context of 96 tokens"))
                .and(predicate::str::contains("panicked").not()),
        );
}
