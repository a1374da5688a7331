//! The values clap cannot check by itself: `key=value` parameters, workload, config
//! and allocator names, comma-separated lists; each refused with one line naming the
//! valid choices ([`CliError::Usage`]).

use pagealloc::Preset;

use super::CliError;
use crate::peers;
use crate::workload::{self, Workload};

/// Parses `KEY=VALUE` items.
///
/// # Errors
/// An item without `=`, or a key given twice.
pub fn parse_params(items: &[String]) -> Result<Vec<(String, String)>, CliError> {
    let mut out: Vec<(String, String)> = Vec::new();
    for kv in items {
        let (k, v) = kv
            .split_once('=')
            .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
            .ok_or_else(|| CliError::usage(format!("parameter `{kv}` is not KEY=VALUE")))?;
        if out.iter().any(|(seen, _)| *seen == k) {
            return Err(CliError::usage(format!(
                "parameter `{k}` given twice (-p {k}=…): give each once"
            )));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// Builds the workload, refusing unknown names and parameters with the valid choices.
///
/// # Errors
/// [`CliError::Usage`].
pub fn workload_of(name: &str, params: &[String]) -> Result<Box<dyn Workload>, CliError> {
    let ov = parse_params(params)?;
    workload::by_name(name, &ov).map_err(|e| CliError::usage(e.to_string()))
}

/// Parses a config string.
///
/// # Errors
/// [`CliError::Usage`] naming the valid presets or keys.
pub fn config_of(s: &str) -> Result<pagealloc::Config, CliError> {
    crate::policies::config(s).map_err(|e| CliError::usage(format!("config `{s}`: {e}")))
}

/// Splits a comma-separated config list; `key=value` items join the config before them.
///
/// # Errors
/// [`CliError::Usage`] for an empty list, an override with no config before it, or a
/// config that does not parse.
pub fn split_configs(s: &str) -> Result<Vec<String>, CliError> {
    let mut out: Vec<String> = Vec::new();
    for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        if item.contains('=') {
            let last = out.last_mut().ok_or_else(|| {
                CliError::usage(format!(
                    "override `{item}` has no config before it: each config starts with a preset ({}), e.g. linux-6.12,{item}",
                    Preset::NAMES
                ))
            })?;
            last.push(',');
            last.push_str(item);
        } else {
            out.push(item.to_owned());
        }
    }
    if out.is_empty() {
        return Err(CliError::usage(format!(
            "no config given; valid: {}",
            Preset::NAMES
        )));
    }
    for c in &out {
        config_of(c)?;
    }
    Ok(out)
}

/// Splits a comma-separated list (`a,b,c`; blanks around items and empty items are
/// ignored) and parses each item with `parse`.
///
/// # Errors
/// [`CliError::Usage`] for an empty list or an item that does not parse, naming `what`
/// and the `valid` choices.
pub fn parse_list_with<T, E>(
    s: &str,
    what: &str,
    valid: &str,
    parse: impl Fn(&str) -> Result<T, E>,
) -> Result<Vec<T>, CliError> {
    let v: Vec<T> = s
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty())
        .map(|i| {
            parse(i).map_err(|_| CliError::usage(format!("invalid {what} `{i}`; valid: {valid}")))
        })
        .collect::<Result<_, _>>()?;
    if v.is_empty() {
        return Err(CliError::usage(format!("no {what} given; valid: {valid}")));
    }
    Ok(v)
}

/// [`parse_list_with`] for any [`FromStr`](std::str::FromStr) type.
///
/// # Errors
/// As [`parse_list_with`].
pub fn parse_list<T: std::str::FromStr>(
    s: &str,
    what: &str,
    valid: &str,
) -> Result<Vec<T>, CliError> {
    parse_list_with(s, what, valid, str::parse::<T>)
}

/// `--configs` of `compare`: the list given, or the kernel series' presets in order
/// ([`Preset::SERIES`]).
///
/// # Errors
/// As [`split_configs`].
pub fn configs_of(s: Option<&str>) -> Result<Vec<String>, CliError> {
    match s {
        Some(s) => split_configs(s),
        None => Ok(Preset::SERIES.iter().map(|p| p.name().to_owned()).collect()),
    }
}

/// Splits and checks a comma-separated allocator list.
///
/// # Errors
/// [`CliError::Usage`] naming the valid allocators.
pub fn split_allocs(s: &str) -> Result<Vec<&'static str>, CliError> {
    parse_list_with(s, "allocator", &peers::Peer::names_help(), peers::canonical)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn config_lists_keep_overrides_with_their_config() {
        let v = split_configs("base,patch7,batch_scale_max=3,fixed_batch=63,linux-6.12").unwrap();
        assert_eq!(
            v,
            [
                "base",
                "patch7,batch_scale_max=3,fixed_batch=63",
                "linux-6.12"
            ]
        );
        let e = split_configs("batch_scale_max=3,base")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("starts with a preset") && e.contains("linux-6.12,batch_scale_max=3"),
            "{e}"
        );
        assert!(split_configs("nope").is_err());
    }

    #[test]
    fn allocator_aliases_resolve() {
        assert_eq!(
            split_allocs("buddy,pagealloc,std").unwrap(),
            ["buddy_system_allocator", "pagealloc", "system"]
        );
        let e = split_allocs("tcmalloc").unwrap_err();
        let CliError::Usage(m) = e else {
            panic!("usage error expected")
        };
        assert!(m.contains("valid:") && m.contains("kernel"), "{m}");
    }
}
