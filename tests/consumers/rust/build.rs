// kvc-sys's `cargo:include=` reaches dependents as DEP_KVC_INCLUDE: a crate compiling C next to
// its Rust code needs kvc/kvc.h from the same libkvc it links. Docs builds link nothing and say
// nothing, so the check is skipped there.
fn main() {
    if std::env::var_os("DOCS_RS").is_some() {
        return;
    }
    let inc = std::env::var("DEP_KVC_INCLUDE").expect("kvc-sys emitted no cargo:include=");
    let header = std::path::Path::new(&inc).join("kvc").join("kvc.h");
    let text = std::fs::read_to_string(&header).unwrap_or_else(|e| panic!("{}: {}", header.display(), e));
    assert!(text.contains("kvc_pool_create"), "{} is not libkvc's header", header.display());
    println!("cargo:rustc-env=KVC_CONSUMER_HEADER={}", header.display());
}
