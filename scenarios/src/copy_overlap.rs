//! Seed 004 ("Swimming in Streams"): a loop of matrix products on stream 1, device-to-host
//! copies on stream 2 and host-to-device copies on stream 3, queued loop after loop as the
//! seed does, once with page-locked host memory (`non_blocking=True` into pinned tensors) and
//! once with pageable memory (`non_blocking=False`).
//!
//! Which overlaps, and why: a copy from or to page-locked memory is queued and the host
//! returns at once, so all three loops are in flight together and the copy engines (one per
//! direction) run beside the kernels. A copy from or to pageable memory goes through a staging
//! buffer the driver fills or drains on the host, and the call returns only once the copy is
//! done: the host issues the device-to-host loop copy by copy, then the host-to-device loop,
//! so the two directions never run at the same time, and each copy is slower. The products,
//! queued before the copies, still run beside whichever copy is in flight.

use super::{median_ms, sample_indices, Check, Common, Report, Row};
use std::time::Instant;
use streamline::engine::memory::{d2h, h2d};
use streamline::engine::pool::StreamSpec;
use streamline::engine::timeline::{intersection, length, union, Interval};
use streamline::engine::{DeviceBuffer, OpKind, PinnedBuffer, Recorder, StreamPool, Timeline};
use streamline::error::{Error, Result};
use streamline::ops::matmul::{sgemm, Gemm, Kernel};
use streamline::Gpu;
use streamline_testing::data::{randn_f32, POISON_F32};
use streamline_testing::reference::matmul as refmm;

/// Options of `copy-overlap`.
#[derive(Clone, Debug, clap::Args)]
pub struct Options {
    /// Side of the square matrices (multiplied by themselves, and copied).
    #[arg(long, default_value_t = Options::default().size)]
    pub size: usize,
    /// Products queued on the compute stream per run.
    #[arg(long, default_value_t = Options::default().matmuls)]
    pub matmuls: usize,
    /// Matrices copied in each direction per run.
    #[arg(long, default_value_t = Options::default().copies)]
    pub copies: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            size: 1024,
            matmuls: 50,
            copies: 50,
        }
    }
}

/// Where the host side of the copies lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostMemory {
    /// Page-locked: asynchronous copies (`non_blocking=True`).
    Pinned,
    /// Pageable: the call returns once the copy is done (`non_blocking=False`).
    Pageable,
}

impl HostMemory {
    fn name(self) -> &'static str {
        match self {
            HostMemory::Pinned => "pinned",
            HostMemory::Pageable => "pageable",
        }
    }
}

/// Checks the options.
pub fn validate(o: &Options) -> Result<()> {
    crate::within("size", o.size, 1..=8192)?;
    crate::within("matmuls", o.matmuls, 1..=10_000)?;
    crate::within("copies", o.copies, 1..=4096)?;
    if (o.size * o.size) as u128 * o.copies as u128 > 1 << 28 {
        return Err(Error::arg(
            "copies",
            "size^2 * copies must be at most 2^28 elements (1 GiB per buffer; four such buffers are allocated)",
        ));
    }
    Ok(())
}

struct Buffers {
    a: DeviceBuffer<f32>,
    c: DeviceBuffer<f32>,
    /// Device matrices copied to the host.
    src: DeviceBuffer<f32>,
    /// Device matrices the host copies into.
    dst: DeviceBuffer<f32>,
    pin_in: PinnedBuffer<f32>,
    pin_out: PinnedBuffer<f32>,
    page_in: Vec<f32>,
    page_out: Vec<f32>,
}

/// Stream indices of the three loops.
#[derive(Clone, Copy)]
struct Lanes {
    compute: usize,
    d2h: usize,
    h2d: usize,
}

const SERIAL: Lanes = Lanes {
    compute: 0,
    d2h: 0,
    h2d: 0,
};
const OVERLAPPED: Lanes = Lanes {
    compute: 0,
    d2h: 1,
    h2d: 2,
};

/// Queues the three loops in the seed's order: every product, then every device-to-host copy,
/// then every host-to-device copy. With a recorder, each operation is timed on track
/// `track_base + stream`.
fn issue(
    gpu: &Gpu,
    pool: &StreamPool,
    b: &mut Buffers,
    o: &Options,
    mem: HostMemory,
    l: Lanes,
    mut rec: Option<(&mut Recorder, usize)>,
) -> Result<()> {
    let per = o.size * o.size;
    let g = Gemm::dense(o.size, o.size, o.size);
    let mut op = |track: usize,
                  name: String,
                  kind: OpKind,
                  i: usize,
                  f: &mut dyn FnMut() -> Result<()>|
     -> Result<()> {
        match rec.as_mut() {
            Some((r, base)) => {
                let s = pool.stream(track)?;
                r.op(*base + track, s, name, kind, Some(i), f)
            }
            None => f(),
        }
    };
    let s = pool.stream(l.compute)?.clone();
    for i in 0..o.matmuls {
        op(l.compute, "matmul".into(), OpKind::Compute, i, &mut || {
            sgemm(gpu, &s, Kernel::Auto, &g, &b.a, &b.a, &mut b.c)
        })?;
    }
    let s = pool.stream(l.d2h)?.clone();
    for i in 0..o.copies {
        let r = i * per..(i + 1) * per;
        op(l.d2h, "d2h".into(), OpKind::D2H, i, &mut || {
            let src = b.src.view(r.clone())?;
            match mem {
                HostMemory::Pinned => d2h(&s, &src, &mut b.pin_out.view_mut(r.clone())?),
                HostMemory::Pageable => d2h(&s, &src, &mut b.page_out[r.clone()]),
            }
        })?;
    }
    let s = pool.stream(l.h2d)?.clone();
    for i in 0..o.copies {
        let r = i * per..(i + 1) * per;
        op(l.h2d, "h2d".into(), OpKind::H2D, i, &mut || {
            let mut dst = b.dst.view_mut(r.clone())?;
            match mem {
                HostMemory::Pinned => h2d(&s, &b.pin_in.view(r.clone())?, &mut dst),
                HostMemory::Pageable => h2d(&s, &b.page_in[r.clone()], &mut dst),
            }
        })?;
    }
    Ok(())
}

/// What one recorded run of a variant showed.
struct Variant {
    mem: HostMemory,
    timeline: Timeline,
    /// Host time spent queuing the three loops, ms.
    host_ms: f64,
}

impl Variant {
    fn unions(&self, kind: OpKind) -> Vec<(f64, f64)> {
        union(
            self.timeline
                .intervals
                .iter()
                .filter(|i| i.kind == kind)
                .map(|i| (i.start_us, i.end_us))
                .collect(),
        )
    }

    fn describe(&self, o: &Options) -> String {
        let m = self.timeline.metrics();
        let (up, down, mm) = (
            self.unions(OpKind::H2D),
            self.unions(OpKind::D2H),
            self.unions(OpKind::Compute),
        );
        let both = intersection(&up, &down);
        let shorter = length(&up).min(length(&down));
        let bytes = (o.copies * o.size * o.size * 4) as f64;
        let gbps = |u: &[(f64, f64)]| bytes / (length(u) * 1e3);
        format!(
            "{}: host returned after {:.2} ms of {:.2} ms on the device; d2h {:.1} GB/s, h2d {:.1} GB/s; the two directions overlap {:.1}% of the shorter one; copies hidden under matmuls {:.1}%; matmul stream busy {:.1}% of the span",
            self.mem.name(),
            self.host_ms,
            m.span_us / 1e3,
            gbps(&down),
            gbps(&up),
            if shorter > 0.0 { 100.0 * both / shorter } else { 0.0 },
            100.0 * m.copy_hidden_fraction,
            if m.span_us > 0.0 { 100.0 * length(&mm) / m.span_us } else { 0.0 },
        )
    }
}

fn record(
    gpu: &Gpu,
    pool: &StreamPool,
    b: &mut Buffers,
    o: &Options,
    mem: HostMemory,
) -> Result<Variant> {
    let tracks = ["stream 1: matmul", "stream 2: d2h", "stream 3: h2d"]
        .iter()
        .map(|t| format!("{}: {t}", mem.name()))
        .collect();
    let mut rec = Recorder::new(pool.context(), tracks, o.matmuls + 2 * o.copies)?;
    pool.synchronize()?;
    let t = Instant::now();
    issue(gpu, pool, b, o, mem, OVERLAPPED, Some((&mut rec, 0)))?;
    let host_ms = t.elapsed().as_secs_f64() * 1e3;
    Ok(Variant {
        mem,
        timeline: rec.finish()?,
        host_ms,
    })
}

/// Compares `got` with `want` bit for bit; poison counts as unwritten.
fn exact(check: &mut Check, what: &str, want: &[f32], got: &[f32]) {
    let mut bad = 0;
    let mut first = None;
    for (i, (w, g)) in want.iter().zip(got).enumerate() {
        if g.to_bits() == POISON_F32 {
            check.unwritten += 1;
        } else if g.to_bits() != w.to_bits() {
            bad += 1;
            first.get_or_insert(i);
        }
    }
    check.add_counts(what, want.len(), bad, (first.unwrap_or(0), 0));
}

fn poison(b: &mut Buffers, pool: &StreamPool, per_copy: usize) -> Result<()> {
    let p = f32::from_bits(POISON_F32);
    b.pin_out.as_mut_slice()?.fill(p);
    b.page_out.fill(p);
    let poisoned = PinnedBuffer::from_slice(pool, &vec![p; b.dst.len()])?;
    h2d(pool.stream(0)?, &poisoned, &mut b.dst)?;
    let pc = PinnedBuffer::from_slice(pool, &vec![p; per_copy])?;
    h2d(pool.stream(0)?, &pc, &mut b.c)?;
    pool.synchronize()
}

/// The host copies of what the device holds before a run.
struct Inputs {
    a: Vec<f32>,
    src: Vec<f32>,
    input: Vec<f32>,
}

/// Checks the recorded run: the product against the f64 reference on sampled rows, and both
/// copy directions bit for bit over every element.
fn verify(
    check: &mut Check,
    pool: &StreamPool,
    b: &Buffers,
    o: &Options,
    mem: HostMemory,
    want: &Inputs,
    common: &Common,
) -> Result<()> {
    let Inputs { a, src, input } = want;
    let s = pool.stream(0)?;
    let g = Gemm::dense(o.size, o.size, o.size);
    let c = b.c.to_vec(s)?;
    let rows = sample_indices(o.size, (common.sample / o.size).max(1), common.seed);
    let cmp = refmm::compare(&g, &c, &refmm::rows(&g, a, a, &[], &rows));
    check.add_counts(
        &format!("{}: matmul", mem.name()),
        cmp.checked,
        cmp.outside,
        cmp.worst_at,
    );
    check.unwritten += c.iter().filter(|v| v.to_bits() == POISON_F32).count();
    let out = match mem {
        HostMemory::Pinned => b.pin_out.as_slice()?,
        HostMemory::Pageable => &b.page_out[..],
    };
    exact(check, &format!("{}: d2h", mem.name()), src, out);
    exact(
        check,
        &format!("{}: h2d", mem.name()),
        input,
        &b.dst.to_vec(s)?,
    );
    Ok(())
}

/// Runs the scenario.
pub fn run(gpu: &Gpu, common: &Common, o: &Options) -> Result<Report> {
    validate(o)?;
    let specs: Vec<StreamSpec> = ["stream 1: matmul", "stream 2: d2h", "stream 3: h2d"]
        .into_iter()
        .map(StreamSpec::new)
        .collect();
    let pool = StreamPool::new(gpu, &specs)?;
    let per = o.size * o.size;
    let n = per * o.copies;
    let a = randn_f32(per, common.seed);
    let src = randn_f32(n, common.seed + 1);
    let input = randn_f32(n, common.seed + 2);
    let mut b = Buffers {
        a: DeviceBuffer::from_slice(&pool, 0, &a)?,
        c: DeviceBuffer::zeros(&pool, 0, per)?,
        src: DeviceBuffer::from_slice(&pool, 1, &src)?,
        dst: DeviceBuffer::zeros(&pool, 2, n)?,
        pin_in: PinnedBuffer::from_slice(&pool, &input)?,
        pin_out: PinnedBuffer::zeros(&pool, n)?,
        page_in: input.clone(),
        page_out: vec![0.0; n],
    };
    let want = Inputs { a, src, input };
    let lanes = [0, 1, 2];
    let mut time = |mem: HostMemory, l: Lanes, used: &[usize]| {
        median_ms(&pool, used, common.reps, || {
            issue(gpu, &pool, &mut b, o, mem, l, None)
        })
    };
    let serial = time(HostMemory::Pinned, SERIAL, &[0])?;
    let overlapped = time(HostMemory::Pinned, OVERLAPPED, &lanes)?;
    let pageable_serial = time(HostMemory::Pageable, SERIAL, &[0])?;
    let pageable = time(HostMemory::Pageable, OVERLAPPED, &lanes)?;
    let graph_ms = if common.graph {
        // Only page-locked copies can be captured: a pageable copy needs the host.
        let cap = pool.begin_capture(0)?;
        issue(gpu, &pool, &mut b, o, HostMemory::Pinned, OVERLAPPED, None)?;
        let g = cap.end()?;
        g.upload()?;
        Some(median_ms(&pool, &lanes, common.reps, || g.launch())?)
    } else {
        None
    };
    let mut check = Check::default();
    poison(&mut b, &pool, per)?;
    let pinned = record(gpu, &pool, &mut b, o, HostMemory::Pinned)?;
    verify(&mut check, &pool, &b, o, HostMemory::Pinned, &want, common)?;
    poison(&mut b, &pool, per)?;
    let paged = record(gpu, &pool, &mut b, o, HostMemory::Pageable)?;
    verify(
        &mut check,
        &pool,
        &b,
        o,
        HostMemory::Pageable,
        &want,
        common,
    )?;
    let metrics = pinned.timeline.metrics();
    let notes = vec![
        pinned.describe(o),
        paged.describe(o),
        format!(
            "pageable copies cost {:.2}x the pinned schedule: the host is blocked in each copy, so the device-to-host loop finishes before the host-to-device loop is queued (no overlap of the two directions), and staging through a driver buffer makes each copy slower",
            pageable / overlapped
        ),
        "the trace and timeline show the pinned run, then the pageable run (its tracks prefixed `pageable`)".into(),
    ];
    // One picture with both runs, the pageable one after the pinned one.
    let mut timeline = Timeline::new(
        pinned
            .timeline
            .tracks
            .iter()
            .chain(&paged.timeline.tracks)
            .cloned()
            .collect(),
    );
    let offset = metrics.span_us * 1.05;
    for iv in &pinned.timeline.intervals {
        timeline.push(iv.clone())?;
    }
    for iv in &paged.timeline.intervals {
        timeline.push(Interval {
            track: iv.track + 3,
            start_us: iv.start_us + offset,
            end_us: iv.end_us + offset,
            ..iv.clone()
        })?;
    }
    Ok(Report {
        name: "copy-overlap".into(),
        workload: format!(
            "seed 004: {} products of {s}x{s} f32 on stream 1, {} d2h and {} h2d copies of {s}x{s} f32 on streams 2 and 3; serial and overlapped use page-locked host memory",
            o.matmuls,
            o.copies,
            o.copies,
            s = o.size
        ),
        serial_ms: serial,
        overlapped_ms: overlapped,
        graph_ms,
        runs: None,
        rows: vec![
            Row {
                label: "pageable, one stream".into(),
                ms: pageable_serial,
            },
            Row {
                label: "pageable, three streams (blocking)".into(),
                ms: pageable,
            },
        ],
        table: Vec::new(),
        metrics,
        timeline,
        check,
        notes,
    })
}
