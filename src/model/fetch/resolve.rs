//! Turning a model spec (`--model PATH|PRESET|hf:OWNER/REPO/FILE`) into a local file.

use std::path::{Path, PathBuf};

use super::error::FetchError;
use super::hf::fetch_hf;
use super::presets::{preset, DEFAULT_PRESET};
use super::{fetch_preset, FetchOptions};

/// Resolves a model spec (`--model`, already defaulted from `CAIRN_MODEL`; `None` means the
/// default preset) to a local GGUF path, fetching a preset or `hf:` file when allowed.
pub fn resolve_model(spec: Option<&str>, opts: &FetchOptions) -> Result<PathBuf, FetchError> {
    let spec = spec
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .unwrap_or(DEFAULT_PRESET);
    if spec.starts_with("hf:") {
        let (repo, file) = parse_hf_spec(spec)?;
        return fetch_hf(&repo, &file, opts);
    }
    let path = Path::new(spec);
    if path.is_file() {
        return Ok(path.to_path_buf());
    }
    if let Some(p) = preset(spec) {
        if !path.exists() {
            return fetch_preset(p, opts);
        }
    }
    if path.exists() {
        return Err(FetchError::NotAFile {
            path: path.to_path_buf(),
        });
    }
    if looks_like_path(spec) {
        return Err(FetchError::NotFound {
            path: path.to_path_buf(),
        });
    }
    Err(FetchError::UnknownSpec {
        spec: spec.to_string(),
    })
}

/// Whether a spec that is neither a file nor a preset was meant as a path.
fn looks_like_path(spec: &str) -> bool {
    spec.contains('/') || spec.contains('\\') || spec.to_ascii_lowercase().ends_with(".gguf")
}

/// Splits `hf:OWNER/REPO/FILE` into the repository (`OWNER/REPO`) and the file path.
pub fn parse_hf_spec(spec: &str) -> Result<(String, String), FetchError> {
    let bad = || FetchError::BadHfSpec {
        spec: spec.to_string(),
    };
    let rest = spec.strip_prefix("hf:").ok_or_else(bad)?;
    let mut it = rest.splitn(3, '/');
    let (owner, repo, file) = match (it.next(), it.next(), it.next()) {
        (Some(o), Some(r), Some(f)) if !o.is_empty() && !r.is_empty() && !f.is_empty() => (o, r, f),
        _ => return Err(bad()),
    };
    if file.split('/').any(|c| c.is_empty() || c == "..") {
        return Err(bad());
    }
    Ok((format!("{owner}/{repo}"), file.to_string()))
}
