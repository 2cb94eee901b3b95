//! Overlap metrics of a [`Timeline`]: each stream's busy time and gaps, the copy time hidden
//! under compute, how many streams ran at once.

use super::{Interval, OpKind, Timeline};

/// Sorted, merged union of intervals `(start, end)`.
pub fn union(mut v: Vec<(f64, f64)>) -> Vec<(f64, f64)> {
    v.retain(|(s, e)| e > s);
    v.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut out: Vec<(f64, f64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Total length of a union produced by [`union`].
pub fn length(u: &[(f64, f64)]) -> f64 {
    u.iter().map(|(s, e)| e - s).sum()
}

/// Length of the intersection of two unions produced by [`union`].
pub fn intersection(a: &[(f64, f64)], b: &[(f64, f64)]) -> f64 {
    let (mut i, mut j, mut total) = (0, 0, 0.0);
    while i < a.len() && j < b.len() {
        let lo = a[i].0.max(b[j].0);
        let hi = a[i].1.min(b[j].1);
        if hi > lo {
            total += hi - lo;
        }
        if a[i].1 < b[j].1 {
            i += 1;
        } else {
            j += 1;
        }
    }
    total
}

/// Busy time and gaps of one stream.
#[derive(Clone, Debug, PartialEq)]
pub struct TrackMetrics {
    /// Track name.
    pub name: String,
    /// Time with at least one operation running, µs (union of its intervals).
    pub busy_us: f64,
    /// Busy time over the whole span.
    pub busy_fraction: f64,
    /// Idle gaps between its first and last operation, µs each.
    pub gaps: usize,
    /// Sum of those gaps, µs.
    pub gap_us: f64,
    /// Longest of those gaps, µs.
    pub longest_gap_us: f64,
}

/// How much ran side by side.
#[derive(Clone, Debug, PartialEq)]
pub struct OverlapMetrics {
    /// From the first start to the last end, µs.
    pub span_us: f64,
    /// Per track.
    pub tracks: Vec<TrackMetrics>,
    /// Time with any copy running, µs.
    pub copy_us: f64,
    /// Time with any kernel running, µs.
    pub compute_us: f64,
    /// Fraction of the copy time during which a kernel also ran (1 when there are no copies).
    pub copy_hidden_fraction: f64,
    /// Time with nothing running inside the span, µs.
    pub device_idle_us: f64,
    /// Sum of the tracks' busy times over the span: 1 means no overlap at all, 2 means two
    /// streams busy all the time.
    pub concurrency: f64,
    /// The busiest track's busy time over the span: 1 means the wall time is exactly the
    /// longest stage's busy time (perfect pipelining).
    pub longest_track_fraction: f64,
}

impl Timeline {
    fn unions_where(&self, f: impl Fn(&Interval) -> bool) -> Vec<(f64, f64)> {
        union(
            self.intervals
                .iter()
                .filter(|i| f(i))
                .map(|i| (i.start_us, i.end_us))
                .collect(),
        )
    }

    /// Overlap metrics (see [`OverlapMetrics`]).
    pub fn metrics(&self) -> OverlapMetrics {
        let all = self.unions_where(|_| true);
        let (t0, t1) = match (all.first(), all.last()) {
            (Some(a), Some(b)) => (a.0, b.1),
            _ => (0.0, 0.0),
        };
        let span = t1 - t0;
        let frac = |v: f64| if span > 0.0 { v / span } else { 0.0 };
        let tracks: Vec<TrackMetrics> = self
            .tracks
            .iter()
            .enumerate()
            .map(|(k, name)| {
                let u = self.unions_where(|i| i.track == k);
                let gaps: Vec<f64> = u.windows(2).map(|w| w[1].0 - w[0].1).collect();
                let busy = length(&u);
                TrackMetrics {
                    name: name.clone(),
                    busy_us: busy,
                    busy_fraction: frac(busy),
                    gaps: gaps.len(),
                    // A fold from +0: `Sum` of no f64 is -0, which prints as "-0.0".
                    gap_us: gaps.iter().fold(0.0, |a, g| a + g),
                    longest_gap_us: gaps.iter().cloned().fold(0.0, f64::max),
                }
            })
            .collect();
        let copy = self.unions_where(|i| i.kind.is_copy());
        let compute = self.unions_where(|i| i.kind == OpKind::Compute);
        let copy_us = length(&copy);
        let busy_sum: f64 = tracks.iter().map(|t| t.busy_us).sum();
        let longest = tracks.iter().map(|t| t.busy_us).fold(0.0, f64::max);
        OverlapMetrics {
            span_us: span,
            copy_us,
            compute_us: length(&compute),
            copy_hidden_fraction: if copy_us > 0.0 {
                intersection(&copy, &compute) / copy_us
            } else {
                1.0
            },
            device_idle_us: span - length(&all),
            concurrency: frac(busy_sum),
            longest_track_fraction: frac(longest),
            tracks,
        }
    }
}
