//! What ran when, on which stream: event timestamps per operation ([`Recorder`]), the overlap
//! metrics that say how much of the work ran side by side ([`metrics`]), and exports as a
//! Chrome/Perfetto trace (JSON) and an SVG Gantt chart ([`export`]).

pub mod export;
pub mod metrics;
mod recorder;

pub use metrics::{intersection, length, union, OverlapMetrics, TrackMetrics};
pub use recorder::Recorder;

use crate::error::{Error, Result};

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
}

impl Timeline {
    /// The timelines of several devices as one: each device's tracks that hold operations,
    /// named after it (`"GPU 1: decoder"`), each device's times shifted by its offset in µs.
    /// Two devices' events cannot be timed against each other, so each device's timeline counts
    /// from its own origin ([`Recorder::begin`], recorded on every device while idle, at
    /// moments of the host given by the offsets): the devices line up to within the driver's
    /// start-up latency.
    pub fn of_devices(parts: Vec<(String, Timeline, f64)>) -> Timeline {
        let mut all = Timeline::default();
        for (device, t, offset_us) in parts {
            let t = t.without_empty_tracks();
            let first = all.tracks.len();
            all.tracks
                .extend(t.tracks.iter().map(|k| format!("{device}: {k}")));
            all.intervals
                .extend(t.intervals.into_iter().map(|iv| Interval {
                    track: first + iv.track,
                    start_us: iv.start_us + offset_us,
                    end_us: iv.end_us + offset_us,
                    ..iv
                }));
        }
        all
    }

    /// The timeline without the tracks nothing ran on (e.g. the unused streams of a serial
    /// run).
    pub fn without_empty_tracks(mut self) -> Timeline {
        let used: Vec<usize> = (0..self.tracks.len())
            .filter(|&k| self.intervals.iter().any(|i| i.track == k))
            .collect();
        let tracks = used.iter().map(|&k| self.tracks[k].clone()).collect();
        for iv in &mut self.intervals {
            iv.track = used.iter().position(|&k| k == iv.track).unwrap_or(0);
        }
        self.tracks = tracks;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::export::{fmt_ms, nice_step};
    use super::*;
    use serde_json::Value;

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

    /// Each device's used tracks keep their own names after the device's (its empty ones are
    /// left out), its intervals move to them and by its offset.
    #[test]
    fn devices_become_one_timeline() {
        let a = timeline(
            vec![
                iv(2, OpKind::Compute, 0.0, 10.0),
                iv(0, OpKind::H2D, 1.0, 2.0),
            ],
            3,
        );
        let b = timeline(vec![iv(0, OpKind::D2D, 5.0, 6.0)], 1);
        let t = Timeline::of_devices(vec![("GPU 0".into(), a, 0.0), ("GPU 1".into(), b, 2.5)]);
        assert_eq!(
            t.tracks,
            ["GPU 0: stream 0", "GPU 0: stream 2", "GPU 1: stream 0"]
        );
        assert_eq!((t.intervals[0].track, t.intervals[0].end_us), (1, 10.0));
        assert_eq!(t.intervals[1].track, 0);
        let last = &t.intervals[2];
        assert_eq!((last.track, last.start_us, last.end_us), (2, 7.5, 8.5));
        assert_eq!(t.metrics().span_us, 10.0);
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
