//! Finds libkvc for the linker. KVC_LIB_DIR (a directory holding libkvc.so) wins; otherwise
//! `pkg-config --libs kvc` is run as a program (no build-dependency crates: crates.io is not
//! reachable where libkvc is built). The library is linked dynamically: the loader finds it at
//! run time through LD_LIBRARY_PATH, the ldconfig cache or an rpath set by the final program.
use std::env;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=KVC_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");

    if let Some(dir) = env::var_os("KVC_LIB_DIR") {
        let dir = dir.to_string_lossy().into_owned();
        println!("cargo:rustc-link-search=native={}", dir);
        println!("cargo:rustc-link-lib=dylib=kvc");
        // Exposed to dependents' build scripts as DEP_KVC_LIB_DIR (links = "kvc").
        println!("cargo:lib_dir={}", dir);
        return;
    }

    let output = Command::new("pkg-config").args(["--libs", "kvc"]).output();
    let output = match output {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            fail(&format!("`pkg-config --libs kvc` failed: {}", String::from_utf8_lossy(&o.stderr).trim()))
        }
        Err(e) => fail(&format!("could not run pkg-config: {}", e)),
    };
    let flags = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut linked = false;
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            println!("cargo:rustc-link-search=native={}", dir);
            println!("cargo:lib_dir={}", dir);
        } else if let Some(lib) = flag.strip_prefix("-l") {
            println!("cargo:rustc-link-lib=dylib={}", lib);
            linked |= lib == "kvc";
        }
    }
    if !linked {
        println!("cargo:rustc-link-lib=dylib=kvc");
    }
}

fn fail(why: &str) -> ! {
    panic!(
        "kvc-sys: cannot find libkvc ({}). Set KVC_LIB_DIR to the directory holding libkvc.so, \
         or PKG_CONFIG_PATH to the directory holding kvc.pc.",
        why
    )
}
