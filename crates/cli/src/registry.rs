//! The detector factories the `rampart` binary knows: `[[layers]] kind = "…"` in a
//! configuration picks one. Crates that add a layer register their factory here.

use rampart_core::Registry;

/// Every factory compiled into the binary.
pub fn registry() -> Registry {
    #[allow(unused_mut)]
    let mut r = Registry::default();
    // One line per layer crate, e.g. `r.register(Box::new(rampart_classify::LinearFactory));`
    r.register(Box::new(rampart_classify::LinearFactory));
    r.register(Box::new(rampart_transformer::TransformerFactory));
    r
}
