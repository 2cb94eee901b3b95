//! `streamline bench`: median CUDA-event times after warm-up, fresh random inputs rotated so
//! they exceed L2, and the device-to-device copy ceiling measured in the same run. Each case is
//! timed as a caller sees it (host submission included) and on the device alone, so the share
//! of a small launch that is submission shows.

use anyhow::{Context, Result};
use cudarc::driver::{CudaSlice, CudaStream};
use half::f16;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use streamline::error::DriverContext;
use streamline::ops::heavy::heavy;
use streamline::ops::matmul::{plan, sgemm, Cublas, Gemm, Kernel, SWEEP};
use streamline::ops::spin::spin_copy;
use streamline::timing::{median, time_on};
use streamline::Gpu;
use streamline_abi::matmul::SGEMM_ALL;
use streamline_abi::spin::SPIN_MAX_NS;
use streamline_testing::data::{randn_f32, HeavyHost};

mod engine_cases;
mod image_cases;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    /// Fewer repetitions (for a quick look; the reported numbers use the full run).
    #[arg(long)]
    quick: bool,
    /// Also write the results as JSON lines to this file.
    #[arg(long)]
    json: Option<PathBuf>,
    /// Only run cases whose name contains this text (the copy ceiling always runs).
    #[arg(long)]
    filter: Option<String>,
}

pub(super) struct Bench<'a> {
    pub(super) gpu: &'a Gpu,
    pub(super) stream: Arc<CudaStream>,
    warmup: usize,
    pub(super) reps: usize,
    pub(super) bar: ProgressBar,
    pub(super) rows: Vec<Row>,
    ceiling_gbps: Option<f64>,
    /// [`Bench::copy_same_bytes`] times by f32 count per side.
    copies: HashMap<usize, Timing>,
}

/// One case's times, in milliseconds.
#[derive(Clone, Copy, Debug)]
pub(super) struct Timing {
    /// Median time from an event recorded before a call to one recorded after it: what a caller
    /// waits, the host's submission of the work included. The anchors time their peers so.
    pub(super) ms: f64,
    /// Minimum of the same samples.
    pub(super) min_ms: f64,
    /// Median time of the same call with its submission hidden: the device's time alone, which
    /// is what a stream full of queued work costs per call. `None` when the host's submission
    /// outlasted the longest wait tried.
    pub(super) device_ms: Option<f64>,
}

/// One result, one JSON line of `--json` (the anchors' scripts write the same keys). Columns
/// that do not apply to a case are left out.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub(super) struct Row {
    pub(super) case: String,
    #[serde(rename = "impl")]
    pub(super) imp: String,
    pub(super) ms: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) min_ms: Option<f64>,
    pub(super) device_ms: Option<f64>,
    pub(super) reps: usize,
    /// Rate of the bytes the case must move.
    #[serde(rename = "GBps", skip_serializing_if = "Option::is_none")]
    pub(super) gbps: Option<f64>,
    /// The link that rate is measured on, where it is not device memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) link: Option<&'static str>,
    /// The bytes at the copy ceiling of the run, and that time over the case's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) floor_ms: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) frac_of_memory_floor: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) device_frac_of_memory_floor: Option<Option<f64>>,
    /// Compute-bound cases: the kernel that ran, its rate, cuBLAS's time over ours.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) kernel: Option<String>,
    #[serde(rename = "TFLOPs", skip_serializing_if = "Option::is_none")]
    pub(super) tflops: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) frac_of_cublas: Option<f64>,
    /// What else describes the case (batch, buffer sets, layouts, a scenario's figures).
    #[serde(flatten)]
    pub(super) extra: serde_json::Map<String, Value>,
}

impl Row {
    /// A row of `case` timed as `t`, with `extra` beside it (an `impl` there names the
    /// implementation, `streamline` otherwise).
    pub(super) fn new(case: &str, t: Timing, reps: usize, extra: Value) -> Row {
        let mut extra = match extra {
            Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        let imp = match extra.remove("impl") {
            Some(Value::String(s)) => s,
            _ => "streamline".to_string(),
        };
        Row {
            case: case.to_string(),
            imp,
            ms: round(t.ms),
            min_ms: Some(round(t.min_ms)),
            device_ms: t.device_ms.map(round),
            reps,
            extra,
            ..Row::default()
        }
    }
}

/// The shortest device-side wait queued before a call timed for its device time alone.
const MIN_HOLD_NS: u64 = 50_000;

impl Bench<'_> {
    /// Times `work(i)` for i in 0..reps after warm-up, as a caller sees it and on the device
    /// alone ([`Timing`]).
    pub(super) fn time(
        &self,
        mut work: impl FnMut(usize) -> streamline::Result<()>,
    ) -> Result<Timing> {
        let mut submit = Duration::ZERO;
        for i in 0..self.warmup {
            let t = Instant::now();
            work(i)?;
            submit = submit.max(t.elapsed());
        }
        self.stream.synchronize()?;
        let mut samples = Vec::with_capacity(self.reps);
        for i in 0..self.reps {
            samples.push(time_on(&self.stream, || work(i))?);
            self.bar.inc(1);
        }
        let min_ms = samples.iter().cloned().fold(f64::INFINITY, f64::min);
        Ok(Timing {
            ms: median(&samples),
            min_ms,
            device_ms: self.time_queued(&mut work, submit)?,
        })
    }

    /// Median time of `work(i)` on the device alone. Each call is queued behind a wait on the
    /// device (a [`spin_copy`] of nothing) that lasts at least twice as long as the host takes
    /// to queue the wait, the start event and the call, so the start event is reached only when
    /// the whole call is queued and the events bracket device work only. A sample whose
    /// submission came close to its wait makes the pass start again with a longer one. A call
    /// that blocks the host until its work is done (a copy from pageable memory) outlasts any
    /// wait and gets `None`.
    fn time_queued(
        &self,
        work: &mut impl FnMut(usize) -> streamline::Result<()>,
        submit: Duration,
    ) -> Result<Option<f64>> {
        let (none_in, mut none_out) = (self.stream.null::<f32>()?, self.stream.null::<f32>()?);
        let mut hold_ns = (4 * submit.as_nanos() as u64).clamp(MIN_HOLD_NS, SPIN_MAX_NS);
        for _ in 0..3 {
            let mut samples = Vec::with_capacity(self.reps);
            let mut late = false;
            for i in 0..self.reps {
                // From before the wait is queued to the end of the call's submission: the wait
                // starts after `t`, so it outlasts the submission if `took < hold`.
                let t = Instant::now();
                spin_copy(self.gpu, &self.stream, &none_in, &mut none_out, hold_ns)?;
                let mut took = Duration::ZERO;
                samples.push(time_on(&self.stream, || {
                    let r = work(i);
                    took = t.elapsed();
                    r
                })?);
                if 2 * took.as_nanos() as u64 >= hold_ns {
                    late = true;
                    break;
                }
            }
            if !late {
                return Ok(Some(median(&samples)));
            }
            hold_ns = hold_ns.saturating_mul(4).min(SPIN_MAX_NS);
        }
        Ok(None)
    }

    /// Times a device-to-device copy that moves `bytes` (half read, half written), as a case
    /// that must move them is timed: what a memory-bound operation of that size reaches in the
    /// same run, its launch and ramp-up included, where the copy ceiling's 1 GiB hides both.
    /// Buffers rotate so they exceed 4x L2, like the cases' inputs; sizes are timed once.
    pub(super) fn copy_same_bytes(&mut self, bytes: f64) -> Result<Timing> {
        let n = ((bytes / 8.0).round() as usize).max(1);
        if let Some(t) = self.copies.get(&n) {
            return Ok(*t);
        }
        let sets = (4 * self.gpu.info().l2_bytes as usize)
            .div_ceil(8 * n)
            .max(1);
        let mut bufs = Vec::with_capacity(sets);
        for s in 0..sets {
            let src = self.stream.clone_htod(&randn_f32(n, 900 + s as u64))?;
            let dst: CudaSlice<f32> = self.stream.alloc_zeros(n)?;
            bufs.push((src, dst));
        }
        self.bar.inc_length(self.reps as u64);
        let t = self.time(|i| {
            let (src, dst) = &mut bufs[i % sets];
            dtod(&self.stream, src, dst)
        })?;
        self.copies.insert(n, t);
        Ok(t)
    }

    /// Records a case; `bytes` is the least traffic the case must move through device memory.
    pub(super) fn record(&mut self, case: &str, t: Timing, bytes: f64, extra: Value) {
        let mut row = Row::new(case, t, self.reps, extra);
        row.gbps = Some(round1(bytes / t.ms / 1e6));
        if let Some(c) = self.ceiling_gbps {
            let floor_ms = bytes / c / 1e6;
            row.floor_ms = Some(round(floor_ms));
            row.frac_of_memory_floor = Some(round(floor_ms / t.ms));
            row.device_frac_of_memory_floor = Some(t.device_ms.map(|d| round(floor_ms / d)));
        }
        self.rows.push(row);
    }
}

impl Bench<'_> {
    /// Records a host-device copy: its rate is the PCIe link's, so no device-memory floor.
    pub(super) fn record_link(&mut self, case: &str, t: Timing, bytes: f64, extra: Value) {
        let mut row = Row::new(case, t, self.reps, extra);
        row.gbps = Some(round1(bytes / t.ms / 1e6));
        row.link = Some("PCIe");
        self.rows.push(row);
    }

    /// Records a compute-bound case with its FLOP rate and its fraction of cuBLAS's time.
    fn record_flops(
        &mut self,
        case: &str,
        imp: &str,
        kernel: &str,
        t: Timing,
        flops: f64,
        cublas_ms: f64,
    ) {
        let mut row = Row::new(case, t, self.reps, json!({ "impl": imp }));
        row.kernel = Some(kernel.to_string());
        row.tflops = Some(round1(flops / t.ms / 1e9 * 10.0) / 10.0);
        row.frac_of_cublas = Some(round(cublas_ms / t.ms));
        self.rows.push(row);
    }
}

/// `dst = src` on `stream`, device to device.
fn dtod(
    stream: &Arc<CudaStream>,
    src: &CudaSlice<f32>,
    dst: &mut CudaSlice<f32>,
) -> streamline::Result<()> {
    stream.memcpy_dtod(src, dst).op("cuMemcpyDtoDAsync")
}

fn round(v: f64) -> f64 {
    (v * 1e5).round() / 1e5
}
fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

pub fn run(device: usize, ptx: Option<&Path>, a: BenchArgs) -> Result<()> {
    let gpu = Gpu::new(device, ptx)?;
    let (warmup, reps) = if a.quick { (3, 10) } else { (10, 50) };
    let wanted = |case: &str| a.filter.as_deref().is_none_or(|f| case.contains(f));
    let heavy_cases: Vec<(&str, usize)> = [
        "heavy_f32_1e7",
        "heavy_f32_1e8",
        "heavy_f16_1e7",
        "heavy_f16_1e8",
    ]
    .into_iter()
    .filter(|c| wanted(c))
    .map(|c| {
        (
            c,
            if c.ends_with("1e7") {
                10_000_000
            } else {
                100_000_000
            },
        )
    })
    .collect();
    let sgemm_sizes: Vec<(usize, usize, usize)> = SWEEP
        .into_iter()
        .filter(|&(m, n, k)| wanted(&sgemm_case(m, n, k)))
        .collect();
    let image_batches: Vec<usize> = if a.quick { vec![32] } else { vec![8, 32, 128] };
    let image_count: usize = image_batches
        .iter()
        .map(|&bt| image_cases::names(bt).iter().filter(|c| wanted(c)).count())
        .sum();
    let bar = ProgressBar::new(
        ((1 + heavy_cases.len()
            + 2 * sgemm_sizes.len()
            + SGEMM_ALL.len()
            + image_count
            + image_batches.len())
            * reps) as u64,
    );
    bar.set_style(
        ProgressStyle::with_template("{bar:40} {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let mut b = Bench {
        stream: gpu.stream().clone(),
        gpu: &gpu,
        warmup,
        reps,
        bar,
        rows: Vec::new(),
        ceiling_gbps: None,
        copies: HashMap::new(),
    };
    let info = gpu.info().clone();
    let (dmaj, dmin) = streamline::runtime::driver_version()?;
    let header = json!({
        "gpu": info.name, "compute_capability": format!("{}.{}", info.compute_capability.0, info.compute_capability.1),
        "driver": format!("{dmaj}.{dmin}"), "kernels": gpu.image()?.origin, "streamline": env!("CARGO_PKG_VERSION"),
    });

    // Ceiling: 1 GiB device-to-device copy, bytes read plus bytes written.
    b.bar.set_message("ceiling_d2d_copy_1GiB");
    {
        let n = 1usize << 28;
        let src = b
            .stream
            .clone_htod(&randn_f32(n, 7))
            .context("allocating 1 GiB for the copy ceiling")?;
        let mut dst: CudaSlice<f32> = b.stream.alloc_zeros(n)?;
        let t = b.time(|_| dtod(&b.stream, &src, &mut dst))?;
        let bytes = 2.0 * (n * 4) as f64;
        b.ceiling_gbps = Some(bytes / t.ms / 1e6);
        b.record("ceiling_d2d_copy_1GiB", t, bytes, json!({}));
    }

    let engine_cases = engine_cases::CASES.iter().filter(|c| wanted(c)).count();
    b.bar.inc_length((engine_cases * reps) as u64);
    engine_cases::run(&mut b, &wanted)?;

    for (case, n) in heavy_cases {
        b.bar.set_message(case);
        if case.contains("f16") {
            bench_heavy::<f16>(&mut b, case, n)?;
        } else {
            bench_heavy::<f32>(&mut b, case, n)?;
        }
    }
    if !sgemm_sizes.is_empty() {
        bench_sgemm(&mut b, &sgemm_sizes)?;
    }
    for &batch in &image_batches {
        image_cases::run(&mut b, batch, &wanted)?;
    }
    b.bar.finish_and_clear();

    println!(
        "{} (compute capability {}.{}), driver {dmaj}.{dmin}, {}",
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        gpu.image()?.origin
    );
    // `device ms`: the same call with its host submission hidden (see `Timing`).
    let opt = |v: Option<f64>, digits: usize| v.map_or(String::new(), |m| format!("{m:.digits$}"));
    let pct = |v: Option<f64>| v.map_or(String::new(), |f| format!("{:.0}%", 100.0 * f));
    // The columns both tables share: what ran and its times.
    let lead = |r: &Row| {
        let (min, device) = (opt(r.min_ms, 4), opt(r.device_ms, 4));
        format!(
            "{:<34} {:<10} {:>10.4} {min:>10} {device:>10}",
            r.case, r.imp, r.ms
        )
    };
    let head = |last: [&str; 3]| {
        let [a, b, c] = last;
        let line = format!(
            "{:<34} {:<10} {:>10} {:>10} {:>10} {a:>10} {b:>16} {c:>16}",
            "case", "impl", "median ms", "min ms", "device ms"
        );
        println!("{}", line.trim_end());
    };
    head(["GB/s", "of memory floor", "device of floor"]);
    for r in b.rows.iter().filter(|r| r.tflops.is_none()) {
        // Blank where a column does not apply: host copies run at the PCIe link's rate (no
        // device-memory floor), pipeline scenarios move no single byte count.
        let gbps = r.gbps.map_or(String::new(), |g| {
            let link = r.link.map_or(String::new(), |l| format!(" {l}"));
            format!("{g:.1}{link}")
        });
        println!(
            "{} {gbps:>10} {:>16} {:>16}",
            lead(r),
            pct(r.frac_of_memory_floor),
            pct(r.device_frac_of_memory_floor.flatten()),
        );
    }
    let flops: Vec<&Row> = b.rows.iter().filter(|r| r.tflops.is_some()).collect();
    if !flops.is_empty() {
        head(["TFLOP/s", "of cuBLAS", ""]);
        for r in flops {
            let of = r
                .frac_of_cublas
                .map_or(String::new(), |f| format!("{:.1}%", 100.0 * f));
            println!(
                "{} {:>10.2} {of:>16}",
                lead(r),
                r.tflops.unwrap_or(f64::NAN)
            );
        }
    }
    if let Some(path) = &a.json {
        let mut f =
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?;
        writeln!(f, "{header}")?;
        for r in &b.rows {
            writeln!(f, "{}", serde_json::to_string(r)?)?;
        }
        println!("wrote {}", path.display());
    }
    Ok(())
}

fn bench_heavy<T: HeavyHost>(b: &mut Bench, case: &str, n: usize) -> Result<()> {
    let bytes_in = n * std::mem::size_of::<T>();
    // Rotate over enough input/output pairs that together they exceed 4x L2.
    let l2 = b.gpu.info().l2_bytes as usize;
    let sets = (4 * l2).div_ceil(2 * bytes_in).max(1);
    let mut bufs = Vec::with_capacity(sets);
    for s in 0..sets {
        let x = b.stream.clone_htod(&T::randn(n, 1000 + s as u64))?;
        let y = b.stream.clone_htod(&vec![T::poison(); n])?;
        bufs.push((x, y));
    }
    let t = b.time(|i| {
        let (x, y) = &mut bufs[i % sets];
        heavy(b.gpu, &b.stream, x, y)
    })?;
    b.record(
        case,
        t,
        2.0 * bytes_in as f64,
        json!({"n": n, "buffer_sets": sets}),
    );
    Ok(())
}

/// The case name of an SGEMM shape: `sgemm_f32_{size}` for squares (the anchors' names),
/// `sgemm_f32_{m}x{n}x{k}` otherwise.
fn sgemm_case(m: usize, n: usize, k: usize) -> String {
    if m == n && n == k {
        format!("sgemm_f32_{m}")
    } else {
        format!("sgemm_f32_{m}x{n}x{k}")
    }
}

/// SGEMM over the sweep's shapes, ours (the shape rule) and cuBLAS on the same inputs, plus
/// every step of the progression at 4096 (`sgemm_f32_4096_<kernel>`). cuBLAS rows carry
/// `"impl": "cublas"`; pair only the `streamline` rows with other peers.
fn bench_sgemm(b: &mut Bench, shapes: &[(usize, usize, usize)]) -> Result<()> {
    let blas = Cublas::new(b.stream.clone())?;
    for &(m, n, k) in shapes {
        let case = sgemm_case(m, n, k);
        b.bar.set_message(case.clone());
        let g = Gemm::dense(m, n, k);
        let da = b.stream.clone_htod(&randn_f32(m * k, 11))?;
        let db = b.stream.clone_htod(&randn_f32(k * n, 12))?;
        let mut dc: CudaSlice<f32> = b.stream.alloc_zeros(m * n)?;
        let t_blas = b.time(|_| blas.sgemm(&g, &da, &db, &mut dc))?;
        let auto = plan(m, n, k, b.gpu.info().multiprocessors).name();
        let t_ours = b.time(|_| sgemm(b.gpu, &b.stream, Kernel::Auto, &g, &da, &db, &mut dc))?;
        b.record_flops(&case, "streamline", &auto, t_ours, g.flops(), t_blas.ms);
        b.record_flops(&case, "cublas", "cublasSgemm", t_blas, g.flops(), t_blas.ms);
        if (m, n, k) == (4096, 4096, 4096) {
            for t in &SGEMM_ALL {
                let name = t.spec.name().trim_start_matches("sgemm_");
                b.bar.set_message(format!("{case}_{name}"));
                let tk =
                    b.time(|_| sgemm(b.gpu, &b.stream, Kernel::Fixed(t), &g, &da, &db, &mut dc))?;
                b.record_flops(
                    &format!("{case}_{name}"),
                    "streamline",
                    t.spec.name(),
                    tk,
                    g.flops(),
                    t_blas.ms,
                );
            }
        }
    }
    Ok(())
}
