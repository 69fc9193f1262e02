//! The browser bundle through the real router: the page names the content-hashed files
//! from the manifest, `/pkg` serves each precompressed by `Accept-Encoding` and lets
//! browsers keep hashed names for a year. The bundle here is a stand-in written by the
//! test, so the test does not depend on a wasm build.

use app::state::AppState;
use axum::body::Body;
use axum::http::{header, HeaderMap, Request, StatusCode};
use axum::Router;
use flightdeck::config::{Config, Overrides};
use std::path::Path;
use store::testing::TestDb;
use tower::ServiceExt;

const NAME: &str = "flightdeck.0123abcd";

/// A site root laid out as `cargo xtask build` leaves it; each encoding's body is
/// distinct so the test can tell which file was sent.
fn fake_bundle(site: &Path) {
    let pkg = site.join("pkg");
    std::fs::create_dir_all(&pkg).unwrap();
    std::fs::write(pkg.join("manifest.json"), format!("{{\"output_name\":\"{NAME}\"}}\n")).unwrap();
    for file in [format!("{NAME}.js"), format!("{NAME}_bg.wasm"), format!("{NAME}.css")] {
        std::fs::write(pkg.join(&file), format!("identity {file}")).unwrap();
        std::fs::write(pkg.join(format!("{file}.br")), format!("brotli {file}")).unwrap();
        std::fs::write(pkg.join(format!("{file}.gz")), format!("gzip {file}")).unwrap();
    }
}

async fn setup(t: &TestDb, site: &Path) -> Router {
    let overrides = Overrides { site_root: Some(site.to_path_buf()), ..Default::default() };
    let config = Config::resolve(overrides, None).unwrap();
    let state = AppState::unconfigured(t.db.clone(), flightdeck::commands::serve::leptos_options(&config));
    flightdeck::web::router(state, &config)
}

async fn get(app: &Router, path: &str, accept_encoding: Option<&str>) -> (StatusCode, HeaderMap, String) {
    let mut req = Request::get(path).header(header::ACCEPT, "*/*");
    if let Some(value) = accept_encoding {
        req = req.header(header::ACCEPT_ENCODING, value);
    }
    let res = app.clone().oneshot(req.body(Body::empty()).unwrap()).await.unwrap();
    let (status, headers) = (res.status(), res.headers().clone());
    let body = axum::body::to_bytes(res.into_body(), 1 << 20).await.unwrap();
    (status, headers, String::from_utf8_lossy(&body).into_owned())
}

#[tokio::test]
async fn hashed_files_are_served_precompressed_and_cached_for_a_year() {
    let t = TestDb::sqlite().await;
    let site = tempfile::tempdir().unwrap();
    fake_bundle(site.path());
    let app = setup(&t, site.path()).await;
    let wasm = format!("/pkg/{NAME}_bg.wasm");

    for (accept, encoding, body) in [
        (Some("gzip, deflate, br, zstd"), Some("br"), "brotli"),
        (Some("gzip"), Some("gzip"), "gzip"),
        (Some("br;q=0, gzip"), Some("gzip"), "gzip"),
        (Some("identity"), None, "identity"),
        (None, None, "identity"),
    ] {
        let (status, headers, text) = get(&app, &wasm, accept).await;
        assert_eq!(status, StatusCode::OK, "{accept:?}");
        assert_eq!(headers.get(header::CONTENT_ENCODING).map(|v| v.to_str().unwrap()), encoding, "{accept:?}");
        assert_eq!(text, format!("{body} {NAME}_bg.wasm"), "{accept:?}");
        assert_eq!(headers[header::CONTENT_TYPE], "application/wasm", "{accept:?}: streaming compilation needs it");
        assert_eq!(headers[header::CACHE_CONTROL], "public, max-age=31536000, immutable", "{accept:?}");
        let vary =
            headers.get_all(header::VARY).iter().map(|v| v.to_str().unwrap().to_ascii_lowercase()).collect::<Vec<_>>();
        assert!(vary.iter().any(|v| v.contains("accept-encoding")), "{accept:?}: {vary:?}");
        assert_eq!(headers["x-content-type-options"], "nosniff", "the security headers still apply");
    }
    for (file, content_type) in [(format!("{NAME}.js"), "text/javascript"), (format!("{NAME}.css"), "text/css")] {
        let (status, headers, text) = get(&app, &format!("/pkg/{file}"), Some("br")).await;
        assert_eq!(status, StatusCode::OK, "{file}");
        assert_eq!(text, format!("brotli {file}"));
        assert!(headers[header::CONTENT_TYPE].to_str().unwrap().starts_with(content_type), "{file}: {headers:?}");
        assert_eq!(headers[header::CACHE_CONTROL], "public, max-age=31536000, immutable", "{file}");
    }

    // A name that is not (or no longer) there must not be remembered as missing.
    let (status, headers, _) = get(&app, "/pkg/flightdeck.ffffffff_bg.wasm", Some("br")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(headers[header::CACHE_CONTROL], "no-store");
    // An unhashed name may change under the same URL: browsers revalidate it.
    let (status, headers, _) = get(&app, "/pkg/manifest.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers[header::CACHE_CONTROL], "no-cache");
    t.cleanup().await;
}

#[tokio::test]
async fn pages_name_the_hashed_files_and_keep_the_nonce_policy() {
    let t = TestDb::sqlite().await;
    let site = tempfile::tempdir().unwrap();
    fake_bundle(site.path());
    let app = setup(&t, site.path()).await;

    let (status, headers, html) = get(&app, "/login", None).await;
    assert_eq!(status, StatusCode::OK);
    assert!(html.contains(&format!("href=\"/pkg/{NAME}.css\"")), "{html}");
    assert!(html.contains(&format!("href=\"/pkg/{NAME}.js\"")), "the module preload: {html}");
    assert!(html.contains(&format!("href=\"/pkg/{NAME}_bg.wasm\"")), "the wasm preload: {html}");
    // The hydration script imports `/pkg/NAME.js` and loads `/pkg/NAME_bg.wasm`.
    assert!(html.contains(&format!("\"{NAME}\", \"{NAME}_bg\"")), "{html}");
    assert!(!html.contains("/pkg/flightdeck.css") && !html.contains("/pkg/flightdeck.js"), "no unhashed name: {html}");
    assert_eq!(headers[header::CACHE_CONTROL], "no-store", "pages are never cached");

    let csp = headers[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
    let nonce = csp.split("'nonce-").nth(1).and_then(|rest| rest.split('\'').next()).expect("a nonce");
    let hydration = html.split("<script type=\"module\"").nth(1).expect("the hydration script");
    assert!(hydration.starts_with(&format!(" nonce=\"{nonce}\"")), "{hydration}");
    t.cleanup().await;
}

#[tokio::test]
async fn without_a_manifest_the_unhashed_names_stand() {
    let t = TestDb::sqlite().await;
    let site = tempfile::tempdir().unwrap();
    let app = setup(&t, site.path()).await;
    let (status, _, html) = get(&app, "/login", None).await;
    assert_eq!(status, StatusCode::OK, "pages work without a bundle");
    assert!(html.contains("href=\"/pkg/flightdeck.css\""), "{html}");
    t.cleanup().await;
}
