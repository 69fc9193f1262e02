//! `/pkg`: the browser bundle that `cargo xtask build` wrote under content-hashed names
//! (`flightdeck.<hash>.js`, `flightdeck.<hash>_bg.wasm`, `flightdeck.<hash>.css`, each with
//! `.br` and `.gz` siblings) and the manifest naming the current set.
//!
//! The manifest is read once at start: its name becomes Leptos' `output_name`, from which
//! the shell names the script, the wasm and the stylesheet. Files are served precompressed
//! by the request's `Accept-Encoding`; a hashed name never changes content, so browsers
//! may keep it for a year without asking again.

use axum::extract::Request;
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::{from_fn, Next};
use axum::response::Response;
use axum::Router;
use std::path::Path;
use tower_http::services::ServeDir;

/// What the bundle is called when no manifest names it: the unhashed names of builds
/// before hashing. The pages then work without JavaScript until it is built.
pub const UNHASHED_NAME: &str = "flightdeck";

/// Written by `cargo xtask build` (xtask/src/bundle.rs) into the `pkg` directory.
pub const MANIFEST: &str = "manifest.json";

#[derive(serde::Deserialize)]
struct Manifest {
    output_name: String,
}

/// The bundle's current name (its stem), from `pkg_dir/manifest.json`; the unhashed name,
/// with a warning, if the manifest is missing or unusable.
pub fn output_name(pkg_dir: &Path) -> String {
    let path = pkg_dir.join(MANIFEST);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) => {
            tracing::warn!(manifest = %path.display(), error = %e, "no bundle manifest: build it with `cargo xtask build`");
            return UNHASHED_NAME.into();
        }
    };
    match serde_json::from_str::<Manifest>(&text) {
        Ok(m) if is_plain_name(&m.output_name) => m.output_name,
        Ok(m) => {
            tracing::warn!(manifest = %path.display(), name = %m.output_name, "bundle manifest names an unusable file; ignored");
            UNHASHED_NAME.into()
        }
        Err(e) => {
            tracing::warn!(manifest = %path.display(), error = %e, "bundle manifest unreadable; ignored");
            UNHASHED_NAME.into()
        }
    }
}

/// The name goes into the page (attributes and the hydration script) and into paths under
/// `pkg`: letters, digits, `.`, `_` and `-` only, and never `..`.
fn is_plain_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 100
        && !name.contains("..")
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// The `/pkg` service over `pkg_dir`.
pub fn router(pkg_dir: &Path) -> Router {
    Router::new().fallback_service(ServeDir::new(pkg_dir).precompressed_br().precompressed_gzip()).layer(from_fn(cache))
}

/// A year for content-hashed names (RFC 8246 `immutable`: not even a reload revalidates);
/// revalidation for any other file; nothing for failures, so a file missing during a
/// deploy is asked for again. The body depends on `Accept-Encoding`, so caches must key
/// on it.
async fn cache(req: Request, next: Next) -> Response {
    let hashed = req.uri().path().rsplit('/').next().is_some_and(is_content_hashed);
    let mut response = next.run(req).await;
    let status = response.status();
    let policy = if !(status.is_success() || status == StatusCode::NOT_MODIFIED) {
        "no-store"
    } else if hashed {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static(policy));
    headers.append(header::VARY, HeaderValue::from_static("Accept-Encoding"));
    response
}

/// `NAME.<8 hex digits>[_bg].EXT[.br|.gz]`: the names `cargo xtask build` gives.
fn is_content_hashed(file: &str) -> bool {
    let mut parts = file.split('.');
    let (Some(_name), Some(hash), Some(_ext)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    let hash = hash.strip_suffix("_bg").unwrap_or(hash);
    hash.len() == 8 && hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashed_names_are_told_from_the_rest() {
        for name in [
            "flightdeck.78e1286a.js",
            "flightdeck.78e1286a_bg.wasm",
            "flightdeck.78e1286a_bg.wasm.br",
            "flightdeck.78e1286a.css.gz",
        ] {
            assert!(is_content_hashed(name), "{name}");
        }
        for name in [
            "flightdeck.js",
            "flightdeck_bg.wasm",
            "manifest.json",
            "flightdeck.78e1286.js",
            "flightdeck.78E1286A.js",
            "flightdeck.zzzzzzzz.js",
            "flightdeck.78e1286a",
        ] {
            assert!(!is_content_hashed(name), "{name}");
        }
    }

    #[test]
    fn the_manifest_names_the_bundle_or_the_unhashed_name_stands() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(output_name(dir.path()), UNHASHED_NAME, "no manifest");
        for (text, expected) in [
            (r#"{"output_name":"flightdeck.78e1286a"}"#, "flightdeck.78e1286a"),
            (r#"{"output_name":"../../etc/passwd"}"#, UNHASHED_NAME),
            (r#"{"output_name":"x\"><script>"}"#, UNHASHED_NAME),
            (r#"{"output_name":""}"#, UNHASHED_NAME),
            ("not json", UNHASHED_NAME),
        ] {
            std::fs::write(dir.path().join(MANIFEST), text).unwrap();
            assert_eq!(output_name(dir.path()), expected, "{text}");
        }
    }
}
