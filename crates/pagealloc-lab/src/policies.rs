//! PCP policies registered by a program ([`pagealloc::policy`]), so that config strings on
//! the command line can name them: `linux-6.12,policy=NAME`.
//!
//! A policy is code, so the `pagealloc` binary knows none; a program that has one
//! registers it and runs the lab's command line, which then accepts `policy=NAME` in every
//! `--config`/`--configs` (`run`, `compare`, `sim`, `compare --sim`, `twin`). See
//! `crates/pagealloc-lab/examples/pool_balance.rs`.
//!
//! ```
//! use std::sync::Arc;
//! use pagealloc::policy::{Kernel, Policy};
//!
//! pagealloc_lab::policies::register(Policy::new(Arc::new(Kernel)));
//! let c = pagealloc_lab::policies::config("linux-6.18,policy=kernel")?;
//! assert_eq!(c.policy.as_ref().map(|p| p.name()), Some("kernel"));
//! assert_eq!(c.to_string(), "linux-6.18,policy=kernel");
//! assert!(pagealloc_lab::policies::config("linux-6.18,policy=nobody").is_err());
//! # Ok::<(), String>(())
//! ```

use std::sync::RwLock;

use pagealloc::policy::Policy;
use pagealloc::Config;

static REGISTRY: RwLock<Vec<Policy>> = RwLock::new(Vec::new());

/// Register `p` under its name (replacing a policy of the same name).
pub fn register(p: Policy) {
    let mut r = REGISTRY
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    r.retain(|q| q.name() != p.name());
    r.push(p);
}

/// The registered policy named `name`.
pub fn lookup(name: &str) -> Option<Policy> {
    let r = REGISTRY
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    r.iter().find(|p| p.name() == name).cloned()
}

/// The names registered, in order.
pub fn names() -> Vec<String> {
    let r = REGISTRY
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    r.iter().map(|p| p.name().to_owned()).collect()
}

/// Parse a config string whose overrides may include `policy=NAME` (a registered
/// policy); every other part as [`Config`]'s `FromStr`.
///
/// # Errors
/// One line: the config's parse error, or an unknown policy with the registered names.
pub fn config(s: &str) -> Result<Config, String> {
    let mut policy = None;
    let mut rest = Vec::new();
    for part in s.split(',') {
        match part.trim().strip_prefix("policy=") {
            Some(name) => {
                let p = lookup(name.trim()).ok_or_else(|| {
                    let known = names();
                    if known.is_empty() {
                        format!("no policy `{}`: this program registers none (a program registers them with pagealloc_lab::policies::register)", name.trim())
                    } else {
                        format!("no policy `{}`: registered: {}", name.trim(), known.join(", "))
                    }
                })?;
                policy = Some(p);
            }
            None => rest.push(part),
        }
    }
    let c: Config = rest.join(",").parse().map_err(|e| format!("{e}"))?;
    Ok(match policy {
        Some(p) => c.with_policy(p),
        None => c,
    })
}
