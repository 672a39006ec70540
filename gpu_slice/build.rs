//! Builds the slice library (`native/slice_shim.c`) into a shared object that the crate carries
//! as bytes, so the one labpool binary can put it beside each sliced job. It needs a C compiler
//! for the machine the jobs run on: `$LABPOOL_SLICE_CC`, else `cc`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    let src = "native/slice_shim.c";
    println!("cargo:rerun-if-changed={src}");
    println!("cargo:rerun-if-env-changed=LABPOOL_SLICE_CC");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"))
        .join("liblabpool_slice.so");
    let cc = std::env::var("LABPOOL_SLICE_CC").unwrap_or_else(|_| "cc".to_string());
    let status = Command::new(&cc)
        .args(["-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o"])
        .arg(&out)
        .arg(src)
        .args(["-ldl", "-lpthread"])
        .status()
        .unwrap_or_else(|e| {
            panic!("the GPU slice library needs a C compiler ({cc}: {e}); install gcc, or name one in LABPOOL_SLICE_CC")
        });
    assert!(status.success(), "{cc} could not build {src}");
}
