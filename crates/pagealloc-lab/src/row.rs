//! One result row: the shared output of the thread executor, the simulator, the
//! microbenchmarks and the stress tool. `--json` prints one per line; tables and plots
//! are drawn from them. Keys follow the issue contract; a field that does not apply is
//! `None` and is left out of the JSON.

use serde::{Deserialize, Serialize};

/// A workload result (one config or peer on one machine), with the seeds' columns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// Workload name (registry name).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workload: Option<String>,
    /// Microbenchmark name (`bulk`, `repeat`, `rand`) for bench rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bench: Option<String>,
    /// Allocator: `pagealloc` or a peer's name.
    pub alloc: String,
    /// pagealloc config string (preset[,overrides]); absent for peers.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// CPUs (threads or virtual CPUs) used.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpus: Option<u32>,
    /// Bench threads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// Bench order.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub order: Option<u8>,
    /// `host` for real threads, or the simulated machine's name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Score: raw throughput here; `compare` normalises to the first row = 100.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
    /// Unit of the raw score (pages/s, messages/s, bytes/s, 1/s…).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score_unit: Option<String>,
    /// Time waiting for zone locks ÷ total CPU time, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zone_lock_pct: Option<f64>,
    /// Frees that triggered a free_high drain (raw count; `compare` normalises).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_high: Option<f64>,
    /// Pages taken from buddy lists for allocation (raw; `compare` normalises).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_zone: Option<f64>,
    /// Share of page touches that found the page cold, %.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cache_miss_pct: Option<f64>,
    /// Largest total of pages in per-CPU lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcp_peak_pages: Option<f64>,
    /// Pages in per-CPU lists at the end.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pcp_final_pages: Option<f64>,
    /// Average of one zone-lock trip for a refill, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_lat_avg_us: Option<f64>,
    /// p99 of one zone-lock trip for a refill, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub alloc_lat_p99_us: Option<f64>,
    /// Average of one zone-lock trip for a drain, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_lat_avg_us: Option<f64>,
    /// p99 of one zone-lock trip for a drain, µs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub free_lat_p99_us: Option<f64>,
    /// Bench: ns per get.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub get_ns: Option<f64>,
    /// Bench: ns per put.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub put_ns: Option<f64>,
    /// Bench repeat: ns per get+put pair.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pair_ns: Option<f64>,
    /// Simulator: hash of the trace (same seed, same hash).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace_hash: Option<String>,
    /// Root seed of the run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Wall-clock seconds the run took.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
    /// Anything else worth keeping (per-group scores, counters…), name → value.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub extra: std::collections::BTreeMap<String, f64>,
}

impl Row {
    /// One JSON object on one line.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("rows serialise")
    }
}
