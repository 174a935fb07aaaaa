// A release build takes its layout from pgo/tidecache.profdata (scripts/rustc-pgo adds it to
// rustc's flags, which cargo does not see): a refreshed profile must rebuild the crate.
fn main() {
    println!("cargo:rerun-if-changed=pgo/tidecache.profdata");
}
