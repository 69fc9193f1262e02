//! The browser bundle as served: wasm-bindgen's output (optimized by `wasm-opt` when it
//! is installed) and the stylesheet, written to `target/site/pkg` under content-hashed
//! names with precompressed siblings, and the manifest that tells the server the names.
//!
//! All three files share one stem, `flightdeck.<hash>`: Leptos' `HydrationScripts` derives
//! both the script and the wasm name from `LeptosOptions::output_name`, and the shell takes
//! the stylesheet's from it too. The hash covers all three, so a change to any of them
//! renames the set; a stylesheet-only change thus costs returning visitors the wasm again,
//! which one name for everything (and no name plumbing through the shell) is worth.

use crate::compress;
use crate::wasm_opt;
use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};

/// The file the server reads at start (`server::web::assets`): `{"output_name": STEM}`.
pub const MANIFEST: &str = "manifest.json";
/// The unhashed name every file starts with, so stale bundles can be recognized.
const NAME: &str = "flightdeck";

/// Binds `wasm` (the cargo output) into `pkg` together with `css`, replacing any earlier
/// bundle there. Returns the stem of the new names.
pub fn write(wasm: &Path, css: &Path, pkg: &Path, staging: &Path) -> Result<String> {
    let started = std::time::Instant::now();
    // wasm-bindgen writes fixed names; they are renamed once their content is known.
    let _ = fs::remove_dir_all(staging);
    fs::create_dir_all(staging).with_context(|| format!("cannot create {}", staging.display()))?;
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(wasm)
        .out_name(NAME)
        .web(true)?
        .typescript(false)
        // Function names in the wasm are for debuggers; they were most of its size.
        .remove_name_section(true)
        .remove_producers_section(true)
        // The glue's fallback URL would name the unhashed file; Leptos always passes the
        // hashed one to the glue's `init`.
        .omit_default_module_path(true)
        .generate(staging)
        .with_context(|| format!("wasm-bindgen failed on {}", wasm.display()))?;
    let bound_wasm = staging.join(format!("{NAME}_bg.wasm"));
    wasm_opt::optimize(&bound_wasm)?;

    let js = read(&staging.join(format!("{NAME}.js")))?;
    let wasm = read(&bound_wasm)?;
    let css = read(css)?;
    let stem = format!("{NAME}.{}", content_hash(&[&js, &wasm, &css]));

    fs::create_dir_all(pkg).with_context(|| format!("cannot create {}", pkg.display()))?;
    let files = [(format!("{stem}.js"), js), (format!("{stem}_bg.wasm"), wasm), (format!("{stem}.css"), css)];
    let mut current = Vec::new();
    for (name, bytes) in &files {
        let (br, gz) = (format!("{name}.br"), format!("{name}.gz"));
        write_atomically(&pkg.join(name), bytes)?;
        write_atomically(&pkg.join(&br), &compress::brotli(bytes)?)?;
        write_atomically(&pkg.join(&gz), &compress::gzip(bytes)?)?;
        current.extend([name.clone(), br, gz]);
    }
    // wasm-bindgen puts JavaScript snippets that crates ship (`inline_js`, `module = ...`)
    // beside the glue, which imports them by relative path; none are used today.
    let snippets = staging.join("snippets");
    if snippets.exists() {
        copy_dir(&snippets, &pkg.join("snippets"))?;
        current.push("snippets".into());
    }
    // The manifest last: a server starting meanwhile sees the old bundle or the new, whole.
    write_atomically(&pkg.join(MANIFEST), format!("{{\"output_name\":\"{stem}\"}}\n").as_bytes())?;
    current.push(MANIFEST.into());
    remove_stale(pkg, &current)?;
    report(pkg, &stem)?;
    eprintln!("  (bound, optimized, hashed and compressed in {:.1?})", started.elapsed());
    Ok(stem)
}

/// The first 8 hex digits of SHA-256 over the parts, each length-prefixed so moving bytes
/// from one file to the next changes the hash.
fn content_hash(parts: &[&[u8]]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update((part.len() as u64).to_le_bytes());
        hasher.update(part);
    }
    hex::encode(&hasher.finalize()[..4])
}

fn read(path: &Path) -> Result<Vec<u8>> {
    fs::read(path).with_context(|| format!("cannot read {}", path.display()))
}

/// Writes beside the target, then renames: a server never serves half a file.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".partial");
    let tmp = PathBuf::from(tmp);
    fs::write(&tmp, bytes).with_context(|| format!("cannot write {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("cannot rename {} to {}", tmp.display(), path.display()))
}

fn copy_dir(from: &Path, to: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(to);
    fs::create_dir_all(to)?;
    for entry in fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            fs::copy(entry.path(), &target).with_context(|| format!("cannot copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

/// Removes earlier bundles (hashed or from before hashing) so `pkg` does not grow with
/// every build. A server still running with the old manifest loses its bundle: restart
/// it after building, as `cargo xtask run` does.
fn remove_stale(pkg: &Path, current: &[String]) -> Result<()> {
    for entry in fs::read_dir(pkg).with_context(|| format!("cannot list {}", pkg.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with(NAME) || name == "snippets";
        if ours && !current.contains(&name) {
            let path = entry.path();
            let removed = if path.is_dir() { fs::remove_dir_all(&path) } else { fs::remove_file(&path) };
            removed.with_context(|| format!("cannot remove {}", path.display()))?;
        }
    }
    Ok(())
}

/// Prints what a browser downloads: each file raw and as each encoding.
fn report(pkg: &Path, stem: &str) -> Result<()> {
    let size = |name: &str| -> Result<u64> {
        let path: PathBuf = pkg.join(name);
        Ok(fs::metadata(&path).with_context(|| format!("cannot stat {}", path.display()))?.len())
    };
    eprintln!("bundle {}/{stem}.*", pkg.display());
    eprintln!("  {:<32} {:>12} {:>12} {:>12}", "file", "raw", "gzip", "brotli");
    for name in [format!("{stem}_bg.wasm"), format!("{stem}.js"), format!("{stem}.css")] {
        eprintln!(
            "  {:<32} {:>12} {:>12} {:>12}",
            name,
            size(&name)?,
            size(&format!("{name}.gz"))?,
            size(&format!("{name}.br"))?
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hash_depends_on_every_byte_and_where_files_end() {
        let a = content_hash(&[b"ab", b"c"]);
        assert_eq!(a.len(), 8);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_eq!(a, content_hash(&[b"ab", b"c"]));
        assert_ne!(a, content_hash(&[b"a", b"bc"]));
        assert_ne!(a, content_hash(&[b"ab", b"d"]));
    }
}
