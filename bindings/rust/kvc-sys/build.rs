//! Finds libkvc for the linker. KVC_LIB_DIR (a directory holding libkvc.so, or libkvc.a for the
//! `static` feature) wins; otherwise `pkg-config kvc` is run as a program (no build-dependency
//! crates: crates.io is not reachable where libkvc is built).
//!
//! - Dynamic (default): the loader finds libkvc.so.0 at run time through LD_LIBRARY_PATH, the
//!   ldconfig cache or an rpath set by the final program.
//! - `static` feature: libkvc.a is linked into the program, plus what it needs itself (the C++
//!   runtime, liburing, ...), read from kvc.pc's `Libs.private` (`pkg-config --static`).
//! - Docs builds (`DOCS_RS` set, as docs.rs does; or `KVC_SYS_DOCS_ONLY`) link nothing: rustdoc
//!   needs the declarations only, so `cargo doc` works on a machine without libkvc.
//!
//! Emitted for dependents' build scripts (`links = "kvc"`): DEP_KVC_LIB_DIR and DEP_KVC_INCLUDE
//! (the directory holding kvc/kvc.h, for C code built next to the Rust code).
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    for var in ["KVC_LIB_DIR", "KVC_INCLUDE_DIR", "PKG_CONFIG_PATH", "DOCS_RS", "KVC_SYS_DOCS_ONLY"] {
        println!("cargo:rerun-if-env-changed={}", var);
    }
    println!("cargo:rerun-if-changed=build.rs");

    if env::var_os("DOCS_RS").is_some() || env::var_os("KVC_SYS_DOCS_ONLY").is_some() {
        return;
    }
    let link_static = env::var_os("CARGO_FEATURE_STATIC").is_some();

    if let Some(dir) = env::var_os("KVC_LIB_DIR") {
        let dir = absolute_lib_dir(Path::new(&dir), link_static);
        let dir_str = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir_str);
        println!("cargo:lib_dir={}", dir_str);
        if let Some(inc) = include_dir_near(&dir) {
            println!("cargo:include={}", inc.display());
        }
        if link_static {
            println!("cargo:rustc-link-lib=static=kvc");
            // An installed prefix has kvc.pc next to the archive: its Libs.private is exact.
            let pc = dir.join("pkgconfig").join("kvc.pc");
            let private = std::fs::read_to_string(&pc)
                .ok()
                .and_then(|text| text.lines().find_map(|l| l.strip_prefix("Libs.private:").map(str::to_owned)));
            match private {
                Some(flags) => emit_flags(&flags, false),
                // A build tree: the C++ runtime and liburing, what a default Linux build links.
                None => emit_flags("-lstdc++ -lm -lpthread -ldl -luring", false),
            }
        } else {
            println!("cargo:rustc-link-lib=dylib=kvc");
        }
        return;
    }

    let mut args = vec!["--libs"];
    if link_static {
        args.push("--static");
    }
    let flags = pkg_config(&args);
    emit_flags(&flags, link_static);
    if let Some(inc) = env::var_os("KVC_INCLUDE_DIR") {
        println!("cargo:include={}", inc.to_string_lossy());
    } else {
        let inc = PathBuf::from(pkg_config(&["--variable=includedir"]).trim());
        // kvc.pc is relocatable (prefix=${pcfiledir}/../..): hand dependents a clean path.
        println!("cargo:include={}", inc.canonicalize().unwrap_or(inc).display());
    }
}

/// KVC_LIB_DIR as an absolute path. rustc runs the link from another directory than the one the
/// user typed a relative path in (cargo runs this script in the kvc-sys package directory), so a
/// relative path is taken relative to the caller's working directory ($PWD, which cargo passes
/// on) and checked to hold the library; a wrong directory is an error naming what was looked for.
fn absolute_lib_dir(given: &Path, link_static: bool) -> PathBuf {
    let lib = if link_static { "libkvc.a" } else { "libkvc.so" };
    let mut candidates = Vec::new();
    if given.is_absolute() {
        candidates.push(given.to_path_buf());
    } else {
        if let Some(pwd) = env::var_os("PWD") {
            candidates.push(Path::new(&pwd).join(given));
        }
        if let Ok(cwd) = env::current_dir() {
            candidates.push(cwd.join(given));
        }
    }
    for c in &candidates {
        if c.join(lib).exists() {
            return c.canonicalize().unwrap_or_else(|_| c.clone());
        }
    }
    let tried: Vec<String> = candidates.iter().map(|c| c.join(lib).display().to_string()).collect();
    fail(&format!("KVC_LIB_DIR={} holds no {} (looked for {})", given.display(), lib, tried.join(", ")))
}

/// `<prefix>/include` for an installed `<prefix>/lib`, or KVC_INCLUDE_DIR.
fn include_dir_near(lib_dir: &Path) -> Option<PathBuf> {
    if let Some(inc) = env::var_os("KVC_INCLUDE_DIR") {
        return Some(PathBuf::from(inc));
    }
    let inc = lib_dir.parent()?.join("include");
    inc.join("kvc").join("kvc.h").exists().then_some(inc)
}

fn pkg_config(args: &[&str]) -> String {
    let output = Command::new("pkg-config").args(args).arg("kvc").output();
    match output {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).into_owned(),
        Ok(o) => fail(&format!(
            "`pkg-config {} kvc` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&o.stderr).trim()
        )),
        Err(e) => fail(&format!("could not run pkg-config: {}", e)),
    }
}

/// Turns -L/-l flags into cargo directives; with `kvc_static`, -lkvc is linked as the archive.
fn emit_flags(flags: &str, kvc_static: bool) {
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
            println!("cargo:lib_dir={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            if lib == "kvc" && kvc_static {
                println!("cargo:rustc-link-lib=static=kvc");
            } else {
                println!("cargo:rustc-link-lib=dylib={}", lib);
            }
        }
    }
}

fn fail(why: &str) -> ! {
    panic!(
        "kvc-sys: cannot find libkvc ({}). Set KVC_LIB_DIR to the directory holding libkvc.so \
         (libkvc.a with the `static` feature), or PKG_CONFIG_PATH to the directory holding kvc.pc. \
         For a docs build without the library set DOCS_RS=1.",
        why
    )
}
