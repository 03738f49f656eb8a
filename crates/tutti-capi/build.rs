//! Names the shared library: `libtutti.so` gets the SONAME `libtutti.so` on Linux (cargo
//! gives a cdylib none). Programs linked against it then record `libtutti.so` as the library
//! they need, not the path it was linked from, which CMake's imported targets and
//! `dpkg-shlibdeps` rely on. The name carries no version: the test programs link against
//! `target/*/libtutti.so` directly, where no versioned link exists.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo::rustc-link-arg-cdylib=-Wl,-soname,libtutti.so");
    }
}
