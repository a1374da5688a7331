//! [`Row::extra`](super::Row::extra)'s keys, declared once.
//!
//! # Design
//! [`EXTRA`] is the one table of every key a [`Row`](super::Row) may carry beyond its
//! typed fields: the key (or a family of keys), its unit and what it means. [`Extra`]
//! is the map itself; in debug builds (every test) it refuses a key the table does not
//! declare, on writing and on reading alike, so a misspelled key fails the first test
//! that reaches it. The JSON is the map's, unchanged: `{"key": value, …}`.
//!
//! A key pattern is literal text with `{a|b|c}` (one of the words), `{N}` (a decimal
//! number) and `{*}` (a word of lower-case letters, digits and `_`).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::ops::{Deref, Index};

use serde::{Deserialize, Serialize};

/// One declared key (or family) of [`Extra`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ExtraKey {
    /// The key, or a pattern (see the module docs).
    pub key: &'static str,
    /// Its unit (`""`: a count or a plain number).
    pub unit: &'static str,
    /// What it means and who writes it.
    pub about: &'static str,
}

const fn k(key: &'static str, unit: &'static str, about: &'static str) -> ExtraKey {
    ExtraKey { key, unit, about }
}

/// Every key of [`Extra`], once.
pub const EXTRA: &[ExtraKey] = &[
    // Every executor's row (`Row::from_measurement`).
    k("elapsed_s", "s", "the measured window"),
    k("alloc_failures", "", "failed allocations in the measured window"),
    k("lock_wait_s", "s", "time spent waiting for the zone lock"),
    k("cpu_time_s", "s", "CPU time of the workload's CPUs"),
    k("idle_pct", "%", "share of the CPUs' windows spent off the CPU"),
    k("score_{*}", "score unit", "the score of one CPU group (thp_mix: thp, base)"),
    k(
        "{pcp_refill|pcp_drain|zone_lock|zone_lock_contended|pgalloc|pgfree|alloc_fail|decay_drain}",
        "",
        "the allocator's counter of that name",
    ),
    // Latency summaries (`LatencyStats::insert`): zone-lock trips and allocator calls.
    k("{alloc|free}_{lat|call}_count", "", "samples of the histogram"),
    k(
        "{alloc|free}_{lat|call}_{avg|p50|p99|p999|max}_{us|ns}",
        "µs or ns",
        "a statistic of the histogram",
    ),
    k(
        "{alloc|free}_{lat|call}_tail_pct",
        "%",
        "share of the summed time that values above the p99 carry",
    ),
    // The thread executor.
    k("alloc_free_s", "s", "time in allocator calls"),
    k("touch_s", "s", "time writing blocks"),
    k("alloc_avg_us_order{N}", "µs", "mean allocation call of that order"),
    // The simulator (`sim::run`).
    k("run_cpu_s", "s", "host CPU time the simulation took"),
    k("free_o9_{avg|end}", "pageblocks", "free blocks of order ≥ 9 in pageblocks: mean over the samples, at the end"),
    k("sleeps_cpu{N}", "", "times CPU N slept in a send or receive and was woken (simulator)"),
    k("busy_s_cpu{N}", "s", "CPU N's CPU time in its measured window: everything charged to it (simulator)"),
    k("compute_s_cpu{N}", "s", "`Compute` CPU N's workload asked for in its measured window (simulator)"),
    k("{alloc|free}_blocks_o{N}", "", "blocks of order N allocated or freed (`predict`'s events)"),
    k("{pcp_refill|pcp_drain}_pages", "pages", "pages the pagesets' refills took or drains freed"),
    k("pcp_start_pages", "pages", "pages on the pagesets after a start state, or when the measured window opened (`predict`)"),
    k("page_ops_per_cpu_s", "1/s", "pages allocated or freed per host CPU second"),
    k("makespan_s", "s", "simulated time until the last CPU finished"),
    k("alloc_time_s", "s", "simulated time in the allocator"),
    k("ops", "", "workload ops executed"),
    k("page_ops", "", "pages allocated or freed"),
    k("page_ops_per_wall_s", "1/s", "pages allocated or freed per host wall second"),
    k("mem_scale", "", "memory divided by this"),
    k("page_cache", "", "the page-cache model on (1) or off (0)"),
    k("page_cache_reclaims", "", "page-cache reclaims"),
    k("page_cache_final_pages", "pages", "page cache at the end"),
    k("headroom_mib", "MiB", "free memory above the high watermark at the start (-1: all free)"),
    k("held_pages", "pages", "pages the workload held at the end"),
    k("ticks", "", "decay ticks"),
    k("tick_pcps", "", "pagesets a tick visited, per tick"),
    k("tick_high_before", "pages", "a visited pageset's high before the tick, mean"),
    k("tick_high_after", "pages", "a visited pageset's high after the tick, mean"),
    k("tick_burst_s", "s", "time the ticks' drains held the zone lock, total"),
    k("tick_burst_max_s", "s", "the longest tick's zone-lock time"),
    k("alloc_lines", "lines", "allocator metadata lines accessed"),
    k("alloc_lines_dram", "lines", "of them, served by DRAM (local or remote)"),
    k("alloc_lines_prefetched", "lines", "of them, prefetched"),
    k(
        "{zone_lock_meta|zone_lock_lines|zone_lock_pages|merge_skipped|merge_deferred|merge_ondemand|highorder_rescued|alloc_slowpath|cluster_cut|zonelist_scanned|zonelist_skipped}",
        "",
        "the allocator's counter of that name",
    ),
    k("lines_per_page_moved", "lines", "zone_lock_meta / zone_lock_pages"),
    k("tick{N}_wait_s", "s", "zone-lock wait during tick N"),
    k("tick{N}_trips", "", "zone-lock trips during tick N"),
    k(
        "{refill|drain|bg}_{trips|contended|wait_s|hold_s|wait_behind_s|lines|lines_missed}",
        "s or count",
        "zone-lock trips of one kind (refill, drain, background): count, contended, wait, hold, wait behind a holder, lines, lines missed",
    ),
    k("cost.{*}", "the parameter's", "an overridden cost-model parameter (`--cost`)"),
    // Several runs in one row (`stats::merge`) and the report's normalisation.
    k("{runs|seeds}", "", "runs merged into the row"),
    k("{*}_stddev", "the metric's", "sample standard deviation of a metric over the runs"),
    k("score_stddev_pct", "%", "the score's standard deviation as % of its mean"),
    k("{*}_raw", "the metric's", "a normalised column's value before normalisation"),
    // The batch sweep, the report and the LLFree benchmarks.
    k("batch", "pages", "the sweep's fixed pageset batch"),
    k("pages_per_s_per_cpu", "1/s", "the score per CPU"),
    k("{cpu0_high|cpu0_count|all_cpus_count}_last", "pages", "the PCP timeline's last sample"),
    k("vs_buddy_pct", "%", "the score as % of the buddy allocator's"),
    k("{blocks_per_thread|pairs_per_thread|iterations|rounds}", "", "a benchmark's size"),
    k(
        "{zone_lock_per_kop|contended_pct|lock_wait_ns_op|meta_per_page|drained_pct}",
        "",
        "a benchmark's counter column (`bench::COUNTER_COLUMNS`)",
    ),
];

/// The entry of [`EXTRA`] that declares `key`, if any.
pub fn declared(key: &str) -> Option<&'static ExtraKey> {
    EXTRA
        .iter()
        .find(|e| matches(e.key.as_bytes(), key.as_bytes()))
}

fn is_word(c: u8) -> bool {
    c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'
}

/// Whether `key` is one of the keys `pat` stands for.
fn matches(pat: &[u8], key: &[u8]) -> bool {
    let Some(open) = pat.iter().position(|&c| c == b'{') else {
        return pat == key;
    };
    if key.len() < open || pat[..open] != key[..open] {
        return false;
    }
    let close = open
        + pat[open..]
            .iter()
            .position(|&c| c == b'}')
            .expect("closed {");
    let (inner, rest, key) = (&pat[open + 1..close], &pat[close + 1..], &key[open..]);
    let class = |c: u8| match inner {
        b"N" => c.is_ascii_digit(),
        b"*" => is_word(c),
        _ => false,
    };
    if inner == b"N" || inner == b"*" {
        (1..=key.len())
            .take_while(|&n| class(key[n - 1]))
            .any(|n| matches(rest, &key[n..]))
    } else {
        inner
            .split(|&c| c == b'|')
            .any(|w| key.starts_with(w) && matches(rest, &key[w.len()..]))
    }
}

/// [`Row::extra`](super::Row::extra): key → value, every key declared in [`EXTRA`]
/// (checked in debug builds). Reads as a `BTreeMap`; serialises as one.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Extra(BTreeMap<String, f64>);

impl Extra {
    fn check(key: &str) {
        debug_assert!(
            declared(key).is_some(),
            "Row.extra key `{key}` is not declared in row::extra::EXTRA"
        );
    }

    /// Sets `key` (declared in [`EXTRA`]) to `value`; the old value, if any.
    pub fn insert(&mut self, key: String, value: f64) -> Option<f64> {
        Self::check(&key);
        self.0.insert(key, value)
    }

    /// The value of `key` (declared in [`EXTRA`]).
    pub fn get(&self, key: &str) -> Option<&f64> {
        Self::check(key);
        self.0.get(key)
    }

    /// Whether the row has `key` (declared in [`EXTRA`]).
    pub fn contains_key(&self, key: &str) -> bool {
        Self::check(key);
        self.0.contains_key(key)
    }

    /// Whether no key is set.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Deref for Extra {
    type Target = BTreeMap<String, f64>;

    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl<Q: AsRef<str> + ?Sized> Index<&Q> for Extra
where
    String: Borrow<Q>,
{
    type Output = f64;

    fn index(&self, key: &Q) -> &f64 {
        self.get(key.as_ref())
            .unwrap_or_else(|| panic!("Row.extra has no `{}`", key.as_ref()))
    }
}

impl FromIterator<(String, f64)> for Extra {
    fn from_iter<I: IntoIterator<Item = (String, f64)>>(iter: I) -> Self {
        let mut e = Extra::default();
        for (key, value) in iter {
            e.insert(key, value);
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_match_their_keys_only() {
        for (key, ok) in [
            ("elapsed_s", true),
            ("elapsed", false),
            ("elapsed_ss", false),
            ("tick12_wait_s", true),
            ("tick_wait_s", false),
            ("tickx_trips", false),
            ("alloc_lat_p999_us", true),
            ("free_call_avg_ns", true),
            ("free_call_avg_ms", false),
            ("drain_wait_behind_s", true),
            ("drain_wait_front_s", false),
            ("cost.fault_ns", true),
            ("cost.", false),
            ("score_thp", true),
            ("pgalloc", true),
            ("pgalloc2", false),
            ("alloc_avg_us_order3", true),
            ("cpu0_count_last", true),
            ("cpu1_count_last", false),
            ("zone_lock_pct_raw", true),
            ("score_stddev_pct", true),
        ] {
            assert_eq!(declared(key).is_some(), ok, "{key}");
        }
    }

    #[test]
    fn every_entry_is_distinct_and_described() {
        for (i, e) in EXTRA.iter().enumerate() {
            assert!(!e.about.is_empty(), "{}", e.key);
            assert!(
                EXTRA[..i].iter().all(|f| f.key != e.key),
                "{} declared twice",
                e.key
            );
            // Braces balance, and every pattern stands for at least one key.
            assert_eq!(e.key.matches('{').count(), e.key.matches('}').count());
            let sample = e
                .key
                .split('{')
                .map(|part| match part.split_once('}') {
                    Some(("N", rest)) => format!("7{rest}"),
                    Some(("*", rest)) => format!("x{rest}"),
                    Some((words, rest)) => format!("{}{rest}", words.split('|').next().unwrap()),
                    None => part.to_owned(),
                })
                .collect::<String>();
            assert!(declared(&sample).is_some(), "{}: {sample}", e.key);
        }
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "not declared")]
    fn an_undeclared_key_is_refused() {
        Extra::default().insert("elapsd_s".into(), 1.0);
    }

    #[test]
    fn json_is_the_map() {
        let e: Extra = [("batch".to_owned(), 63.0), ("tick0_trips".to_owned(), 2.0)]
            .into_iter()
            .collect();
        let j = serde_json::to_string(&e).unwrap();
        assert_eq!(j, r#"{"batch":63.0,"tick0_trips":2.0}"#);
        assert_eq!(serde_json::from_str::<Extra>(&j).unwrap(), e);
    }
}
