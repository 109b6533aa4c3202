//! Every function of include/kvc/kvc.h is bound by kvc-sys (checked by the bindgen drift check)
//! *and* wrapped by this safe crate: a function added to the header without a safe wrapper fails
//! here, so the Rust binding cannot silently fall behind the C API.
use std::path::{Path, PathBuf};

fn header_functions(header: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in header.lines().filter(|l| l.starts_with("KVC_API ")) {
        if let Some(paren) = line.find('(') {
            let before = &line[..paren];
            let name = before.rsplit(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("");
            if name.starts_with("kvc_") {
                names.push(name.to_string());
            }
        }
    }
    names
}

fn read_sources(dir: &Path, out: &mut String) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            read_sources(&path, out);
        } else if path.extension().map_or(false, |e| e == "rs") {
            out.push_str(&std::fs::read_to_string(&path).unwrap());
        }
    }
}

#[test]
fn every_c_function_has_a_safe_wrapper() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let header = std::fs::read_to_string(root.join("../../../include/kvc/kvc.h")).unwrap();
    let bindings = std::fs::read_to_string(root.join("../kvc-sys/src/bindings.rs")).unwrap();
    let mut safe = String::new();
    read_sources(&root.join("src"), &mut safe);
    let names = header_functions(&header);
    assert!(names.len() >= 47, "found only {} functions in kvc.h", names.len());
    let mut missing = Vec::new();
    for name in &names {
        if !bindings.contains(&format!("pub fn {}(", name)) {
            missing.push(format!("{} (not in kvc-sys: run bindings/rust/regen.sh)", name));
        } else if !safe.contains(&format!("sys::{}(", name)) && !safe.contains(&format!("sys::{},", name)) {
            // Called directly, or handed to a shared caller (Pool::prompt_count) by name.
            missing.push(format!("{} (no safe wrapper in kvc/src)", name));
        }
    }
    assert!(missing.is_empty(), "unbound functions:\n  {}", missing.join("\n  "));
}
