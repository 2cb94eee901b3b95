//! What ran when, on which stream: event timestamps per operation, exported as a
//! Chrome/Perfetto trace (JSON) and an SVG Gantt chart, and the overlap metrics that say how
//! much of the work ran side by side.

use super::pool::timing_event;
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use serde_json::{json, Value};
use std::fmt::Write as _;
use std::sync::Arc;

/// What an operation does, for colouring and for the overlap metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Host to device copy.
    H2D,
    /// Device to host copy.
    D2H,
    /// Device to device copy.
    D2D,
    /// A kernel.
    Compute,
    /// A whole CUDA graph launch.
    Graph,
    /// Anything else (e.g. filler work).
    Other,
}

impl OpKind {
    /// All kinds, in legend order.
    pub const ALL: [OpKind; 6] = [
        OpKind::H2D,
        OpKind::D2H,
        OpKind::D2D,
        OpKind::Compute,
        OpKind::Graph,
        OpKind::Other,
    ];

    /// Short name (trace category).
    pub fn name(self) -> &'static str {
        match self {
            OpKind::H2D => "h2d",
            OpKind::D2H => "d2h",
            OpKind::D2D => "d2d",
            OpKind::Compute => "compute",
            OpKind::Graph => "graph",
            OpKind::Other => "other",
        }
    }

    /// Whether this is a memory copy.
    pub fn is_copy(self) -> bool {
        matches!(self, OpKind::H2D | OpKind::D2H | OpKind::D2D)
    }

    /// Fill colour in the SVG chart.
    pub fn color(self) -> &'static str {
        match self {
            OpKind::H2D => "#4e79a7",
            OpKind::D2H => "#59a14f",
            OpKind::D2D => "#76b7b2",
            OpKind::Compute => "#e15759",
            OpKind::Graph => "#b07aa1",
            OpKind::Other => "#bab0ac",
        }
    }
}

/// One operation on one stream, in microseconds from the start of the recording.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// Track (stream) index into [`Timeline::tracks`].
    pub track: usize,
    /// Operation name.
    pub name: String,
    /// Kind of operation.
    pub kind: OpKind,
    /// Start, µs.
    pub start_us: f64,
    /// End, µs (not before the start).
    pub end_us: f64,
    /// Pipeline iteration, where there is one.
    pub iteration: Option<usize>,
}

impl Interval {
    /// Duration in µs.
    pub fn duration_us(&self) -> f64 {
        self.end_us - self.start_us
    }
}

/// A recorded timeline: one track per stream, the operations on them.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Timeline {
    /// Track names, one per stream.
    pub tracks: Vec<String>,
    /// Operations, in any order.
    pub intervals: Vec<Interval>,
}

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
    /// A timeline with these track names and no operations.
    pub fn new(tracks: Vec<String>) -> Timeline {
        Timeline {
            tracks,
            intervals: Vec::new(),
        }
    }

    /// Adds an operation; rejects unknown tracks and reversed or non-finite times.
    pub fn push(&mut self, iv: Interval) -> Result<()> {
        if iv.track >= self.tracks.len() {
            return Err(Error::arg(
                "track",
                format!(
                    "{} is not below the track count {}",
                    iv.track,
                    self.tracks.len()
                ),
            ));
        }
        if !(iv.start_us.is_finite() && iv.end_us.is_finite() && iv.end_us >= iv.start_us) {
            return Err(Error::arg(
                "interval",
                format!(
                    "[{}, {}] is not a finite forward interval",
                    iv.start_us, iv.end_us
                ),
            ));
        }
        self.intervals.push(iv);
        Ok(())
    }

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

    /// The Chrome trace event format (opens in Perfetto and chrome://tracing): one thread per
    /// track (named by `thread_name` metadata), one complete event (`"ph": "X"`) per operation
    /// with `ts`/`dur` in µs, sorted by track then start.
    pub fn to_chrome_trace(&self) -> Value {
        let mut events = Vec::new();
        events.push(json!({
            "name": "process_name", "ph": "M", "pid": 1, "tid": 0,
            "args": {"name": "streamline"}
        }));
        for (k, name) in self.tracks.iter().enumerate() {
            events.push(json!({
                "name": "thread_name", "ph": "M", "pid": 1, "tid": k + 1,
                "args": {"name": name}
            }));
            events.push(json!({
                "name": "thread_sort_index", "ph": "M", "pid": 1, "tid": k + 1,
                "args": {"sort_index": k}
            }));
        }
        let mut ivs: Vec<&Interval> = self.intervals.iter().collect();
        ivs.sort_by(|a, b| {
            (a.track, a.start_us)
                .partial_cmp(&(b.track, b.start_us))
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        for iv in ivs {
            let mut args = json!({"kind": iv.kind.name()});
            if let Some(it) = iv.iteration {
                args["iteration"] = json!(it);
            }
            events.push(json!({
                "name": iv.name, "cat": iv.kind.name(), "ph": "X", "pid": 1, "tid": iv.track + 1,
                "ts": round3(iv.start_us), "dur": round3(iv.duration_us()), "args": args
            }));
        }
        json!({"traceEvents": events, "displayTimeUnit": "ms"})
    }

    /// An SVG Gantt chart: one row per track, one bar per operation coloured by kind, a time
    /// axis in ms and a legend of the kinds present.
    pub fn to_svg(&self, title: &str) -> String {
        const LEFT: f64 = 150.0;
        const RIGHT: f64 = 30.0;
        const WIDTH: f64 = 1200.0;
        const ROW: f64 = 28.0;
        const TOP: f64 = 40.0;
        let plot_w = WIDTH - LEFT - RIGHT;
        let t0 = self
            .intervals
            .iter()
            .map(|i| i.start_us)
            .fold(f64::INFINITY, f64::min);
        let t1 = self
            .intervals
            .iter()
            .map(|i| i.end_us)
            .fold(f64::NEG_INFINITY, f64::max);
        let (t0, span) = if t0.is_finite() && t1 > t0 {
            (t0, t1 - t0)
        } else {
            (0.0, 1.0)
        };
        let x = |t: f64| LEFT + (t - t0) / span * plot_w;
        let rows = self.tracks.len() as f64;
        let axis_y = TOP + rows * ROW + 8.0;
        let height = axis_y + 70.0;
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
        let _ = writeln!(
            s,
            r#"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"#,
            esc(title)
        );
        for (k, name) in self.tracks.iter().enumerate() {
            let y = TOP + k as f64 * ROW;
            let fill = if k % 2 == 0 { "#f4f4f4" } else { "#ffffff" };
            let _ = writeln!(
                s,
                r#"<rect x="{LEFT}" y="{y}" width="{plot_w}" height="{ROW}" fill="{fill}"/>"#
            );
            let _ = writeln!(
                s,
                r#"<text x="{}" y="{}" text-anchor="end">{}</text>"#,
                LEFT - 8.0,
                y + ROW * 0.65,
                esc(name)
            );
        }
        for iv in &self.intervals {
            let y = TOP + iv.track as f64 * ROW + 4.0;
            let (a, b) = (x(iv.start_us), x(iv.end_us));
            let _ = writeln!(
                s,
                r#"<rect x="{a:.2}" y="{y}" width="{:.2}" height="{}" fill="{}" stroke="black" stroke-width="0.3"><title>{} ({}) {:.1} µs</title></rect>"#,
                (b - a).max(0.5),
                ROW - 8.0,
                iv.kind.color(),
                esc(&iv.name),
                iv.kind.name(),
                iv.duration_us()
            );
        }
        let _ = writeln!(
            s,
            r#"<line x1="{LEFT}" y1="{axis_y}" x2="{}" y2="{axis_y}" stroke="black"/>"#,
            LEFT + plot_w
        );
        let step = nice_step(span / 1000.0 / 8.0);
        let mut t = 0.0;
        while t <= span / 1000.0 + 1e-12 {
            let px = x(t0 + t * 1000.0);
            let _ = writeln!(
                s,
                r#"<line x1="{px:.2}" y1="{axis_y}" x2="{px:.2}" y2="{}" stroke="black"/>"#,
                axis_y + 5.0
            );
            let _ = writeln!(
                s,
                r#"<text x="{px:.2}" y="{}" text-anchor="middle">{}</text>"#,
                axis_y + 18.0,
                fmt_ms(t)
            );
            t += step;
        }
        let _ = writeln!(
            s,
            r#"<text x="{}" y="{}" text-anchor="middle">time (ms)</text>"#,
            LEFT + plot_w / 2.0,
            axis_y + 34.0
        );
        let mut lx = LEFT;
        let ly = axis_y + 50.0;
        for kind in OpKind::ALL {
            if self.intervals.iter().any(|i| i.kind == kind) {
                let _ = writeln!(
                    s,
                    r#"<rect x="{lx}" y="{}" width="14" height="12" fill="{}" stroke="black" stroke-width="0.3"/>"#,
                    ly - 10.0,
                    kind.color()
                );
                let _ = writeln!(
                    s,
                    r#"<text x="{}" y="{ly}">{}</text>"#,
                    lx + 18.0,
                    kind.name()
                );
                lx += 90.0;
            }
        }
        s.push_str("</svg>\n");
        s
    }
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}

fn fmt_ms(t: f64) -> String {
    let s = format!("{t:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    if raw.is_nan() || raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= raw {
            return m * p;
        }
    }
    10.0 * p
}

/// Escapes text for SVG/XML.
fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

struct Pending {
    track: usize,
    name: String,
    kind: OpKind,
    iteration: Option<usize>,
    start: CudaEvent,
    end: CudaEvent,
}

/// Records operations with timing events on their streams, without making the host wait;
/// [`Recorder::finish`] reads the timestamps once everything has run.
pub struct Recorder {
    ctx: Arc<CudaContext>,
    tracks: Vec<String>,
    origin: Option<CudaEvent>,
    pending: Vec<Pending>,
    spare: Vec<CudaEvent>,
}

impl Recorder {
    /// A recorder for these tracks, with `capacity` operations' events made ahead so that
    /// recording does not create events inside the measured loop.
    pub fn new(ctx: &Arc<CudaContext>, tracks: Vec<String>, capacity: usize) -> Result<Recorder> {
        let spare = (0..2 * capacity)
            .map(|_| timing_event(ctx))
            .collect::<Result<_>>()?;
        Ok(Recorder {
            ctx: ctx.clone(),
            tracks,
            origin: None,
            pending: Vec::new(),
            spare,
        })
    }

    fn event(&mut self) -> Result<CudaEvent> {
        match self.spare.pop() {
            Some(e) => Ok(e),
            None => timing_event(&self.ctx),
        }
    }

    /// Runs `work` (which queues work on `stream`) between two timing events on `stream`,
    /// shown on track `track`.
    pub fn op<R>(
        &mut self,
        track: usize,
        stream: &CudaStream,
        name: impl Into<String>,
        kind: OpKind,
        iteration: Option<usize>,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        if track >= self.tracks.len() {
            return Err(Error::arg(
                "track",
                format!("{track} is not below {}", self.tracks.len()),
            ));
        }
        let start = self.event()?;
        let end = self.event()?;
        start.record(stream).op("cuEventRecord")?;
        if self.origin.is_none() {
            let o = self.event()?;
            o.record(stream).op("cuEventRecord")?;
            self.origin = Some(o);
        }
        let r = work()?;
        end.record(stream).op("cuEventRecord")?;
        self.pending.push(Pending {
            track,
            name: name.into(),
            kind,
            iteration,
            start,
            end,
        });
        Ok(r)
    }

    /// Waits for the recorded operations and returns the timeline, times relative to the
    /// earliest start.
    pub fn finish(self) -> Result<Timeline> {
        let mut tl = Timeline::new(self.tracks);
        let Some(origin) = self.origin else {
            return Ok(tl);
        };
        let mut raw = Vec::with_capacity(self.pending.len());
        for p in &self.pending {
            let s = origin.elapsed_ms(&p.start).op("cuEventElapsedTime")? as f64 * 1000.0;
            let e = origin.elapsed_ms(&p.end).op("cuEventElapsedTime")? as f64 * 1000.0;
            raw.push((s, e.max(s)));
        }
        let t0 = raw.iter().map(|r| r.0).fold(f64::INFINITY, f64::min);
        for (p, (s, e)) in self.pending.into_iter().zip(raw) {
            tl.push(Interval {
                track: p.track,
                name: p.name,
                kind: p.kind,
                start_us: s - t0,
                end_us: e - t0,
                iteration: p.iteration,
            })?;
        }
        Ok(tl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(track: usize, kind: OpKind, s: f64, e: f64) -> Interval {
        Interval {
            track,
            name: format!("{}-{s}", kind.name()),
            kind,
            start_us: s,
            end_us: e,
            iteration: None,
        }
    }

    fn timeline(ivs: Vec<Interval>, tracks: usize) -> Timeline {
        let mut t = Timeline::new((0..tracks).map(|k| format!("stream {k}")).collect());
        for i in ivs {
            t.push(i).unwrap();
        }
        t
    }

    #[test]
    fn union_merges_overlapping_and_touching() {
        let u = union(vec![
            (5.0, 7.0),
            (0.0, 2.0),
            (1.0, 3.0),
            (3.0, 4.0),
            (9.0, 9.0),
        ]);
        assert_eq!(u, vec![(0.0, 4.0), (5.0, 7.0)]);
        assert_eq!(length(&u), 6.0);
        assert_eq!(intersection(&u, &union(vec![(1.0, 6.0)])), 4.0);
        assert_eq!(intersection(&u, &[]), 0.0);
    }

    /// Copy 0..10 on stream 0, compute 4..20 on stream 1, copy 20..30 on stream 0, compute
    /// 32..40 on stream 1: copy time 20, hidden 6 (4..10), span 40.
    #[test]
    fn metrics_on_hand_made_intervals() {
        let t = timeline(
            vec![
                iv(0, OpKind::H2D, 0.0, 10.0),
                iv(1, OpKind::Compute, 4.0, 20.0),
                iv(0, OpKind::D2H, 20.0, 30.0),
                iv(1, OpKind::Compute, 32.0, 40.0),
            ],
            3,
        );
        let m = t.metrics();
        assert_eq!(m.span_us, 40.0);
        assert_eq!(m.copy_us, 20.0);
        assert_eq!(m.compute_us, 24.0);
        assert!((m.copy_hidden_fraction - 0.3).abs() < 1e-12);
        assert_eq!(m.device_idle_us, 2.0);
        assert_eq!(m.tracks[0].busy_us, 20.0);
        assert_eq!(m.tracks[0].gaps, 1);
        assert_eq!(m.tracks[0].gap_us, 10.0);
        assert_eq!(m.tracks[1].busy_us, 24.0);
        assert_eq!(m.tracks[1].longest_gap_us, 12.0);
        assert_eq!(m.tracks[2].busy_us, 0.0);
        assert_eq!(m.tracks[2].gaps, 0);
        assert!(m.tracks[2].gap_us.is_sign_positive(), "no gaps: +0, not -0");
        assert!(m.tracks[1].longest_gap_us.is_sign_positive());
        assert!((m.concurrency - 44.0 / 40.0).abs() < 1e-12);
        assert!((m.longest_track_fraction - 24.0 / 40.0).abs() < 1e-12);
    }

    #[test]
    fn fully_hidden_and_no_copies() {
        let t = timeline(
            vec![
                iv(0, OpKind::H2D, 2.0, 5.0),
                iv(1, OpKind::Compute, 0.0, 10.0),
            ],
            2,
        );
        assert_eq!(t.metrics().copy_hidden_fraction, 1.0);
        let t = timeline(vec![iv(0, OpKind::Compute, 0.0, 1.0)], 1);
        assert_eq!(t.metrics().copy_hidden_fraction, 1.0);
        let empty = timeline(vec![], 2).metrics();
        assert_eq!(empty.span_us, 0.0);
        assert_eq!(empty.concurrency, 0.0);
    }

    #[test]
    fn push_rejects_bad_intervals() {
        let mut t = Timeline::new(vec!["a".into()]);
        assert!(t.push(iv(1, OpKind::H2D, 0.0, 1.0)).is_err());
        assert!(t.push(iv(0, OpKind::H2D, 2.0, 1.0)).is_err());
        assert!(t.push(iv(0, OpKind::H2D, f64::NAN, 1.0)).is_err());
        assert!(t.push(iv(0, OpKind::H2D, 0.0, 0.0)).is_ok());
    }

    #[test]
    fn chrome_trace_is_valid_json_one_track_per_stream_in_order() {
        let t = timeline(
            vec![
                iv(1, OpKind::Compute, 30.0, 40.0),
                iv(0, OpKind::H2D, 10.0, 20.0),
                iv(1, OpKind::Compute, 5.0, 8.0),
                iv(0, OpKind::H2D, 0.0, 5.0),
            ],
            3,
        );
        let text = serde_json::to_string(&t.to_chrome_trace()).unwrap();
        let v: Value = serde_json::from_str(&text).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let names: Vec<(u64, &str)> = evs
            .iter()
            .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
            .map(|e| {
                (
                    e["tid"].as_u64().unwrap(),
                    e["args"]["name"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            names,
            vec![(1, "stream 0"), (2, "stream 1"), (3, "stream 2")]
        );
        let xs: Vec<&Value> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(xs.len(), 4);
        for e in &xs {
            assert_eq!(e["pid"], 1);
            assert!(e["dur"].as_f64().unwrap() >= 0.0);
            assert!(names.iter().any(|(tid, _)| e["tid"].as_u64() == Some(*tid)));
        }
        for tid in [1, 2] {
            let ts: Vec<f64> = xs
                .iter()
                .filter(|e| e["tid"] == tid)
                .map(|e| e["ts"].as_f64().unwrap())
                .collect();
            assert_eq!(ts.len(), 2);
            assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{ts:?}");
        }
        let first = xs.iter().find(|e| e["tid"] == 1).unwrap();
        assert_eq!(first["ts"], 0.0);
        assert_eq!(first["dur"], 5.0);
        assert_eq!(first["cat"], "h2d");
    }

    #[test]
    fn svg_has_a_row_per_stream_bars_axis_and_legend() {
        let t = timeline(
            vec![
                iv(0, OpKind::H2D, 0.0, 500.0),
                iv(1, OpKind::Compute, 100.0, 2500.0),
            ],
            2,
        );
        let svg = t.to_svg("test <&>");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert!(svg.contains("test &lt;&amp;&gt;"));
        assert!(svg.contains(">stream 0</text>") && svg.contains(">stream 1</text>"));
        assert_eq!(
            svg.matches(OpKind::H2D.color()).count(),
            2,
            "bar and legend"
        );
        assert_eq!(svg.matches(OpKind::Compute.color()).count(), 2);
        assert!(
            !svg.contains(OpKind::D2H.color()),
            "legend only lists kinds present"
        );
        assert!(svg.contains("time (ms)"));
        assert!(svg.contains(">2.5</text>") || svg.contains(">2</text>"));
        // Every element on its own line is closed on that line.
        for line in svg
            .lines()
            .filter(|l| l.starts_with("<rect") || l.starts_with("<text") || l.starts_with("<line"))
        {
            assert!(
                line.ends_with("/>") || line.ends_with("</rect>") || line.ends_with("</text>"),
                "{line}"
            );
        }
    }

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.3), 0.5);
        assert_eq!(nice_step(1.0), 1.0);
        assert_eq!(nice_step(1.2), 2.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(0.0), 1.0);
        assert_eq!(fmt_ms(0.0), "0");
        assert_eq!(fmt_ms(2.5), "2.5");
    }
}
