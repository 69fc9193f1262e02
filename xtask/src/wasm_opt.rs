//! Binaryen's `wasm-opt` over the bound wasm, when it is installed (`WASM_OPT` names it,
//! else `wasm-opt` on PATH). It is optional: without it the bundle is correct, only larger
//! (2.0 MB instead of 1.8 MB raw; compressed they differ by under 1 %), and the build says
//! so. Its output is checked before use: Debian 12's binaryen 108 numbers the export of
//! wasm-bindgen's second table (the `externref` one) as the first, which breaks the page
//! at start ("Table.set(): ... function-typed"); binaryen 132 does not.

use anyhow::{bail, Context, Result};
use std::io::ErrorKind;
use std::path::Path;
use std::process::Command;

/// Size over speed, like the `wasm-release` profile: the page waits on the download, and
/// the app's work per event is small. (`-Os` came out 3 % larger raw, the same compressed.)
const LEVEL: &str = "-Oz";

/// The features rustc's wasm32 target emits by default; wasm-opt must accept them in the
/// input and may keep them in the output.
const FEATURES: &[&str] = &[
    "--enable-bulk-memory",
    "--enable-mutable-globals",
    "--enable-nontrapping-float-to-int",
    "--enable-reference-types",
    "--enable-sign-ext",
    "--enable-multivalue",
];

/// Optimizes `wasm` in place, or says why it did not.
pub fn optimize(wasm: &Path) -> Result<()> {
    let tool = std::env::var_os("WASM_OPT").unwrap_or_else(|| "wasm-opt".into());
    let name = tool.to_string_lossy().into_owned();
    let version = match Command::new(&tool).arg("--version").output() {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => bail!("{name} --version failed: {}", String::from_utf8_lossy(&out.stderr)),
        Err(e) if e.kind() == ErrorKind::NotFound => {
            eprintln!(
                "xtask: wasm-opt not found: skipped optimizing the wasm (binaryen 132 or later, e.g. \
                 from npm's `binaryen` package, makes it about 12 % smaller raw)"
            );
            return Ok(());
        }
        Err(e) => return Err(e).with_context(|| format!("cannot run {name}")),
    };
    let out = wasm.with_extension("opt.wasm");
    let status = Command::new(&tool)
        .arg(LEVEL)
        .args(FEATURES)
        .arg(wasm)
        .arg("-o")
        .arg(&out)
        .status()
        .with_context(|| format!("cannot run {name}"))?;
    if !status.success() {
        bail!("{name} {LEVEL} failed with {status} on {}", wasm.display());
    }
    let (input, output) = (std::fs::read(wasm)?, std::fs::read(&out)?);
    if exported_tables(&input) != exported_tables(&output) {
        eprintln!(
            "xtask: {version} changed which table an export names (binaryen 108 does so \
             with wasm-bindgen's externref table; 132 does not): kept the unoptimized wasm"
        );
        std::fs::remove_file(&out)?;
        return Ok(());
    }
    std::fs::rename(&out, wasm)?;
    eprintln!("xtask: {version} {LEVEL}: {} -> {} bytes", input.len(), output.len());
    Ok(())
}

/// Each exported table's name and element type (0x70 funcref, 0x6f externref), read from
/// the import, table and export sections; `None` if the module cannot be read.
fn exported_tables(module: &[u8]) -> Option<Vec<(String, u8)>> {
    let mut r = Reader { bytes: module, at: 8 };
    let (mut tables, mut exports) = (Vec::new(), Vec::new());
    while r.at < module.len() {
        let id = r.byte()?;
        let size = r.leb()? as usize;
        let end = r.at.checked_add(size)?;
        match id {
            2 => {
                for _ in 0..r.leb()? {
                    r.name()?;
                    r.name()?;
                    match r.byte()? {
                        0 => {
                            r.leb()?; // function: type index
                        }
                        1 => {
                            tables.push(r.byte()?);
                            r.limits()?;
                        }
                        2 => r.limits()?, // memory
                        3 => {
                            r.byte()?; // global: value type, mutability
                            r.byte()?;
                        }
                        _ => return None, // a kind this reader does not know (tags)
                    }
                }
            }
            4 => {
                for _ in 0..r.leb()? {
                    tables.push(r.byte()?);
                    r.limits()?;
                }
            }
            7 => {
                for _ in 0..r.leb()? {
                    let name = r.name()?;
                    let kind = r.byte()?;
                    let index = r.leb()? as usize;
                    if kind == 1 {
                        exports.push((name, *tables.get(index)?));
                    }
                }
            }
            _ => {}
        }
        r.at = end;
    }
    Some(exports)
}

struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Reader<'_> {
    fn byte(&mut self) -> Option<u8> {
        let b = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(b)
    }

    fn leb(&mut self) -> Option<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            value |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Some(value);
            }
        }
        None
    }

    fn name(&mut self) -> Option<String> {
        let len = self.leb()? as usize;
        let bytes = self.bytes.get(self.at..self.at.checked_add(len)?)?;
        self.at += len;
        Some(String::from_utf8_lossy(bytes).into_owned())
    }

    fn limits(&mut self) -> Option<()> {
        let flags = self.byte()?;
        self.leb()?;
        if flags & 1 == 1 {
            self.leb()?;
        }
        Some(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A module with a funcref and an externref table, exporting the second as `refs`.
    fn module(export_index: u8) -> Vec<u8> {
        let mut m = b"\0asm\x01\0\0\0".to_vec();
        m.extend([4, 7, 2, 0x70, 0, 1, 0x6f, 0, 4]); // tables: funcref min 1, externref min 4
        m.extend([7, 8, 1, 4, b'r', b'e', b'f', b's', 1, export_index]);
        m
    }

    #[test]
    fn a_renumbered_table_export_is_noticed() {
        assert_eq!(exported_tables(&module(1)), Some(vec![("refs".to_string(), 0x6f)]));
        assert_ne!(exported_tables(&module(1)), exported_tables(&module(0)));
        assert_eq!(exported_tables(b"\0asm\x01\0\0\0\x07\x05"), None, "a cut section");
    }
}
