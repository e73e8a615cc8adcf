//! Hugging Face: where its hub cache is, finding a file there, and downloading into it with
//! hf-hub (after a quick check that the endpoint can be reached at all).

use std::fs;
use std::net::{TcpStream, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::cache::{check_file, stamp_path_hf};
use super::error::FetchError;
use super::presets::Preset;
use super::progress::Progress;
use super::{Attempt, FetchOptions};

/// The endpoint used when `HF_ENDPOINT` is not set.
pub const DEFAULT_HF_ENDPOINT: &str = "https://huggingface.co";

/// The proxy variables that make the quick reachability check pointless (the proxy decides).
pub const PROXY_VARS: [&str; 6] = [
    "HTTPS_PROXY",
    "https_proxy",
    "HTTP_PROXY",
    "http_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// Where the Hugging Face hub cache is and how to reach Hugging Face: part of
/// [`FetchOptions`], built by the caller (the CLI reads the environment with
/// [`HfOptions::from_vars`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HfOptions {
    /// The hub cache folder searched and downloaded into; `None` when there is none (no home
    /// folder): then nothing is found there and hf-hub is not tried.
    pub cache: Option<PathBuf>,
    /// The endpoint, e.g. `https://huggingface.co`.
    pub endpoint: String,
    /// Whether a proxy is configured: then the quick reachability check is skipped.
    pub proxied: bool,
}

impl HfOptions {
    /// The options the Hugging Face tools take from their variables, looked up with `var`
    /// (which should treat an empty value as unset): the cache is `$HF_HUB_CACHE`, else
    /// `$HF_HOME/hub`, else `HOME/.cache/huggingface/hub`; the endpoint `$HF_ENDPOINT`, else
    /// [`DEFAULT_HF_ENDPOINT`]; proxied when any of [`PROXY_VARS`] is set.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>, home: Option<&Path>) -> HfOptions {
        let cache = var("HF_HUB_CACHE")
            .map(PathBuf::from)
            .or_else(|| var("HF_HOME").map(|h| PathBuf::from(h).join("hub")))
            .or_else(|| home.map(|h| h.join(".cache").join("huggingface").join("hub")));
        HfOptions {
            cache,
            endpoint: var("HF_ENDPOINT").unwrap_or_else(|| DEFAULT_HF_ENDPOINT.to_string()),
            proxied: PROXY_VARS.iter().any(|v| var(v).is_some()),
        }
    }
}

/// Where `repo`'s `file` is in the Hugging Face cache, if it is there.
pub(super) fn hf_cached_file(hf: &HfOptions, repo: &str, file: &str) -> Option<PathBuf> {
    hf_hub::Cache::new(hf.cache.clone()?)
        .model(repo.to_string())
        .get(file)
}

/// A quick connection test before hf-hub, whose client waits up to 30 s to connect: without
/// a network this fails in milliseconds and the pip fallback starts at once.
fn check_reachable(hf: &HfOptions) -> Result<(), String> {
    if hf.proxied {
        return Ok(());
    }
    let endpoint = hf.endpoint.as_str();
    let (default_port, rest) = if let Some(r) = endpoint.strip_prefix("https://") {
        (443, r)
    } else if let Some(r) = endpoint.strip_prefix("http://") {
        (80, r)
    } else {
        return Err(format!("unsupported endpoint {endpoint}"));
    };
    let authority = rest.split('/').next().unwrap_or(rest);
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || authority.starts_with('[') => match p.parse() {
            Ok(port) => (h.trim_matches(['[', ']']), port),
            Err(_) => (authority, default_port),
        },
        _ => (authority.trim_matches(['[', ']']), default_port),
    };
    let addrs: Vec<_> = (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {host}: {e}"))?
        .take(3)
        .collect();
    let mut last = format!("no address for {host}");
    for addr in addrs {
        match TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(_) => return Ok(()),
            Err(e) => last = format!("cannot connect to {host}:{port}: {e}"),
        }
    }
    Err(last)
}

/// An hf-hub client for `cache` and the endpoint, without hf-hub's own progress bar.
fn hf_api(cache: &Path, hf: &HfOptions) -> Result<hf_hub::api::sync::Api, String> {
    hf_hub::api::sync::ApiBuilder::from_cache(hf_hub::Cache::new(cache.to_path_buf()))
        .with_endpoint(hf.endpoint.clone())
        .with_progress(false)
        .build()
        .map_err(|e| e.to_string())
}

/// Downloads `repo`'s `file` into the Hugging Face cache with hf-hub; the error says why in
/// words.
fn hf_download(
    repo: &str,
    file: &str,
    opts: &FetchOptions,
    size_hint: u64,
) -> Result<PathBuf, String> {
    let cache = opts
        .hf
        .cache
        .as_deref()
        .ok_or("no Hugging Face cache folder (set HF_HOME)")?;
    check_reachable(&opts.hf)?;
    let api = hf_api(cache, &opts.hf)?;
    let progress = Progress::new(
        opts.progress.as_ref(),
        format!("downloading {file}"),
        size_hint,
    );
    api.model(repo.to_string())
        .download_with_progress(file, progress)
        .map_err(|e| e.to_string())
}

/// A preset from Hugging Face, checked like a cached file; a bad download is deleted.
pub(super) fn fetch_preset_from_hf(p: &Preset, opts: &FetchOptions) -> Result<PathBuf, Attempt> {
    let path =
        hf_download(p.hf_repo, p.hf_file, opts, p.size_bytes).map_err(Attempt::Unavailable)?;
    let stamp = stamp_path_hf(p, opts);
    match check_file(p, &path, &stamp, opts) {
        Ok(()) => {
            opts.note(&format!(
                "fetched {} from Hugging Face: {}",
                p.name,
                path.display()
            ));
            Ok(path)
        }
        Err(bad) => {
            // The download is ours: remove the bad blob and its snapshot link.
            if let Ok(blob) = fs::canonicalize(&path) {
                let _ = fs::remove_file(blob);
            }
            let _ = fs::remove_file(&path);
            Err(Attempt::Fatal(bad.into_error(
                &path,
                p,
                "; the download was deleted and nothing was cached".to_string(),
            )))
        }
    }
}

/// An `hf:` file: from the Hugging Face cache, else downloaded when allowed (unverified: no
/// checksum is known).
pub(super) fn fetch_hf(repo: &str, file: &str, opts: &FetchOptions) -> Result<PathBuf, FetchError> {
    if let Some(path) = hf_cached_file(&opts.hf, repo, file) {
        return Ok(path);
    }
    if opts.offline {
        return Err(FetchError::OfflineHf {
            repo: repo.to_string(),
            file: file.to_string(),
            cache: opts
                .hf
                .cache
                .as_ref()
                .map_or("none: no home folder".to_string(), |c| {
                    c.display().to_string()
                }),
        });
    }
    let path = hf_download(repo, file, opts, 0).map_err(|message| FetchError::Hf {
        repo: repo.to_string(),
        file: file.to_string(),
        message,
    })?;
    // Said once, when the file arrives, rather than on every load from the cache.
    opts.note(&format!(
        "note: no checksum is known for hf:{repo}/{file}; {} is not verified",
        path.display()
    ));
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)], home: Option<&Path>) -> HfOptions {
        HfOptions::from_vars(
            |k| {
                vars.iter()
                    .find(|(name, _)| *name == k)
                    .map(|(_, v)| v.to_string())
            },
            home,
        )
    }

    /// The precedence the Hugging Face tools use: HF_HUB_CACHE, then HF_HOME/hub, then the
    /// home folder's cache; the public endpoint unless HF_ENDPOINT says otherwise.
    #[test]
    fn hf_variables_are_read_like_the_hugging_face_tools() {
        let home = Path::new("/home/u");
        let all = from(
            &[
                ("HF_HUB_CACHE", "/c"),
                ("HF_HOME", "/h"),
                ("HF_ENDPOINT", "http://mirror:8080"),
            ],
            Some(home),
        );
        assert_eq!(all.cache, Some(PathBuf::from("/c")));
        assert_eq!(all.endpoint, "http://mirror:8080");
        assert!(!all.proxied);
        let hf_home = from(&[("HF_HOME", "/h")], Some(home));
        assert_eq!(hf_home.cache, Some(PathBuf::from("/h/hub")));
        assert_eq!(hf_home.endpoint, DEFAULT_HF_ENDPOINT);
        let none = from(&[], Some(home));
        assert_eq!(
            none.cache,
            Some(PathBuf::from("/home/u/.cache/huggingface/hub"))
        );
        assert_eq!(from(&[], None).cache, None);
        assert!(from(&[("https_proxy", "http://p:3128")], None).proxied);
    }
}
