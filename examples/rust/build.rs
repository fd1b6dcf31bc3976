// Links the example against libgrove.so: $GROVE_BUILD_DIR (default
// <repo>/build), with an rpath so the binary finds it when run.
use std::env;
use std::path::PathBuf;

fn main() {
    let dir = match env::var("GROVE_BUILD_DIR") {
        Ok(d) => PathBuf::from(d),
        Err(_) => PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap()).join("../../build"),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
    println!("cargo:rerun-if-env-changed=GROVE_BUILD_DIR");
}
