//! A [`Timeline`] as a Chrome/Perfetto trace (one track per stream) and as an SVG Gantt chart.

use super::{Interval, OpKind, Timeline};
use serde_json::{json, Value};
use std::fmt::Write as _;

impl Timeline {
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

pub(super) fn fmt_ms(t: f64) -> String {
    let s = format!("{t:.4}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s.is_empty() || s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
pub(super) fn nice_step(raw: f64) -> f64 {
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
