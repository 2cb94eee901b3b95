//! The engine's cross-stream safety on the device: every reader is waited for, frees wait for
//! readers, the host waits only where it must, graphs order their launches.
//!
//! The first test shows the gap in cudarc's own tracking that `DeviceBuffer` closes; the same
//! schedule then runs on `DeviceBuffer` and must come out right.

use cudarc::driver::{CudaSlice, DeviceSlice};
use std::time::{Duration, Instant};
use streamline::engine::memory::{d2h, h2d};
use streamline::engine::pool::StreamSpec;
use streamline::engine::{DeviceBuffer, PinnedBuffer, StreamPool};
use streamline::ops::spin::spin_copy;
use streamline_scenarios::{encoder_decoder, prefetch, Common, Training};
use streamline_testing::data::randn_f32;
use streamline_tests::gpu;

/// How long the slow reader waits before it reads: long against any launch latency.
const SLOW_NS: u64 = 50_000_000;
/// One wave of blocks on any current GPU, so the slow reader waits once.
const N: usize = 1 << 15;

/// Whether the test runs under compute-sanitizer (gpu-check.sh sets SANITIZER), which may make
/// launches wait for earlier kernels: host-side timing claims are not checked there.
fn sanitized() -> bool {
    std::env::var_os("SANITIZER").is_some_and(|v| !v.is_empty())
}

fn data() -> Vec<f32> {
    (0..N).map(|i| 1.0 + i as f32).collect()
}

/// cudarc's `CudaSlice` keeps one read event: a slow read on stream A, then a fast read on B
/// re-records it on B, so a writer on C waits for B only and overwrites the input while A still
/// waits to read it. A reads zeros. (This documents why `DeviceBuffer` exists; it fails if
/// cudarc starts tracking every reader, and cannot show anything under tools that serialize
/// kernels, such as compute-sanitizer.)
#[test]
fn cudarc_slice_misses_the_first_reader() {
    let Some(gpu) = gpu() else { return };
    let (a, b, c) = (
        gpu.new_stream().unwrap(),
        gpu.new_stream().unwrap(),
        gpu.new_stream().unwrap(),
    );
    let x: CudaSlice<f32> = a.clone_htod(&data()).unwrap();
    let mut ya: CudaSlice<f32> = a.alloc_zeros(N).unwrap();
    let mut yb: CudaSlice<f32> = b.alloc_zeros(N).unwrap();
    a.synchronize().unwrap();
    b.synchronize().unwrap();
    let mut x = x;
    spin_copy(gpu, &a, &x, &mut ya, SLOW_NS).unwrap();
    spin_copy(gpu, &b, &x, &mut yb, 0).unwrap();
    c.memset_zeros(&mut x).unwrap();
    let got = a.clone_dtoh(&ya).unwrap();
    let corrupted = got.iter().zip(data()).filter(|(g, w)| **g != *w).count();
    assert!(
        corrupted > 0,
        "the writer waited for the slow reader: cudarc now tracks every reader"
    );
}

/// The same schedule on `DeviceBuffer`: the writer waits for both readers, and queuing it does
/// not make the host wait.
#[test]
fn buffer_write_waits_for_every_reader() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::with_streams(gpu, 3).unwrap();
    let (a, b, c) = (
        pool.stream(0).unwrap(),
        pool.stream(1).unwrap(),
        pool.stream(2).unwrap(),
    );
    let mut x = DeviceBuffer::from_slice(&pool, 0, &data()).unwrap();
    let mut ya = DeviceBuffer::<f32>::zeros(&pool, 0, N).unwrap();
    let mut yb = DeviceBuffer::<f32>::zeros(&pool, 1, N).unwrap();
    pool.synchronize().unwrap();
    let t = Instant::now();
    spin_copy(gpu, a, &x, &mut ya, SLOW_NS).unwrap();
    spin_copy(gpu, b, &x, &mut yb, 0).unwrap();
    x.fill_zeros(c).unwrap();
    let queued = t.elapsed();
    assert_eq!(
        ya.to_vec(a).unwrap(),
        data(),
        "the slow reader saw the overwrite"
    );
    assert_eq!(yb.to_vec(b).unwrap(), data());
    assert_eq!(x.to_vec(c).unwrap(), vec![0.0; N]);
    assert!(
        sanitized() || queued < Duration::from_nanos(SLOW_NS / 2),
        "queuing took {queued:?}: the host waited"
    );
}

/// Readers wait for the last write, on whichever stream it ran, and for nothing else.
#[test]
fn buffer_read_waits_for_the_last_write() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::with_streams(gpu, 2).unwrap();
    let (a, b) = (pool.stream(0).unwrap(), pool.stream(1).unwrap());
    let src = DeviceBuffer::from_slice(&pool, 0, &data()).unwrap();
    let mut x = DeviceBuffer::<f32>::zeros(&pool, 0, N).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&pool, 1, N).unwrap();
    pool.synchronize().unwrap();
    spin_copy(gpu, a, &src, &mut x, SLOW_NS).unwrap();
    spin_copy(gpu, b, &x, &mut y, 0).unwrap();
    assert_eq!(y.to_vec(b).unwrap(), data());
}

/// Dropping a buffer while another stream still reads it: the free waits for the reader, so
/// memory the pool hands out again is not overwritten under it.
#[test]
fn free_waits_for_readers() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::with_streams(gpu, 2).unwrap();
    let (owner, reader) = (pool.stream(0).unwrap(), pool.stream(1).unwrap());
    let x = DeviceBuffer::from_slice(&pool, 0, &data()).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&pool, 1, N).unwrap();
    pool.synchronize().unwrap();
    let t = Instant::now();
    spin_copy(gpu, reader, &x, &mut y, SLOW_NS).unwrap();
    drop(x);
    // Same size on the same stream: the allocator may return the block just freed.
    let mut again = DeviceBuffer::<f32>::zeros(&pool, 0, N).unwrap();
    again.fill_zeros(owner).unwrap();
    assert!(
        t.elapsed() < Duration::from_nanos(SLOW_NS / 2),
        "the host waited"
    );
    assert_eq!(y.to_vec(reader).unwrap(), data());
}

/// Host access to pinned memory waits for the device writes queued into it.
#[test]
fn pinned_host_read_waits_for_device_write() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::with_streams(gpu, 2).unwrap();
    let a = pool.stream(1).unwrap();
    let src = DeviceBuffer::from_slice(&pool, 0, &data()).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&pool, 1, N).unwrap();
    let mut host = PinnedBuffer::<f32>::zeros(&pool, N).unwrap();
    spin_copy(gpu, a, &src, &mut y, SLOW_NS).unwrap();
    d2h(a, &y, &mut host).unwrap();
    assert_eq!(host.as_slice().unwrap(), &data()[..]);
    // And a host write waits for a device read still in flight.
    let mut dev = DeviceBuffer::<f32>::zeros(&pool, 0, N).unwrap();
    let b = pool.stream(0).unwrap();
    spin_copy(gpu, b, &src, &mut y, SLOW_NS).unwrap();
    h2d(b, &host, &mut dev).unwrap();
    host.as_mut_slice().unwrap().fill(-1.0);
    assert_eq!(dev.to_vec(b).unwrap(), data());
}

/// An access on a stream outside the pool is finished before the call returns.
#[test]
fn foreign_stream_access_is_waited_for() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::with_streams(gpu, 1).unwrap();
    let foreign = gpu.new_stream().unwrap();
    let src = DeviceBuffer::from_slice(&pool, 0, &data()).unwrap();
    let mut y = DeviceBuffer::<f32>::zeros(&pool, 0, N).unwrap();
    pool.synchronize().unwrap();
    let t = Instant::now();
    spin_copy(gpu, &foreign, &src, &mut y, 20_000_000).unwrap();
    assert!(t.elapsed() >= Duration::from_millis(20));
    assert_eq!(y.to_vec(pool.stream(0).unwrap()).unwrap(), data());
}

/// A copy between two pools (as between two devices, whose buffers live in two pools): it waits
/// for the source's slow write on another stream of its pool and for the destination's slow
/// read on another stream of its own pool, which still sees the old values; later work in
/// either pool waits for it; queuing it does not make the host wait.
#[test]
fn peer_copy_keeps_both_pools_order() {
    use streamline::engine::memory::peer;
    let Some(gpu) = gpu() else { return };
    let (from, to) = (
        StreamPool::with_streams(gpu, 2).unwrap(),
        StreamPool::with_streams(gpu, 3).unwrap(),
    );
    let fresh: Vec<f32> = data().iter().map(|v| -v).collect();
    let written = DeviceBuffer::from_slice(&from, 0, &fresh).unwrap();
    let mut src = DeviceBuffer::<f32>::zeros(&from, 0, N).unwrap();
    let mut dst = DeviceBuffer::from_slice(&to, 0, &data()).unwrap();
    let mut seen = DeviceBuffer::<f32>::zeros(&to, 0, N).unwrap();
    let mut later = DeviceBuffer::<f32>::zeros(&to, 0, N).unwrap();
    from.synchronize().unwrap();
    to.synchronize().unwrap();
    let t = Instant::now();
    spin_copy(gpu, from.stream(0).unwrap(), &written, &mut src, SLOW_NS).unwrap();
    spin_copy(gpu, to.stream(1).unwrap(), &dst, &mut seen, SLOW_NS).unwrap();
    peer(
        from.stream(1).unwrap(),
        &src,
        to.stream(2).unwrap(),
        &mut dst,
    )
    .unwrap();
    // A write to the source after the copy waits for the copy's read.
    src.fill_zeros(from.stream(0).unwrap()).unwrap();
    // A read of the destination on another stream of its pool waits for the copy.
    spin_copy(gpu, to.stream(0).unwrap(), &dst, &mut later, 0).unwrap();
    let queued = t.elapsed();
    assert_eq!(
        seen.to_vec(to.stream(0).unwrap()).unwrap(),
        data(),
        "the earlier read saw the copy"
    );
    assert_eq!(
        later.to_vec(to.stream(0).unwrap()).unwrap(),
        fresh,
        "a later read missed the copy, or the copy the slow write"
    );
    assert_eq!(src.to_vec(from.stream(1).unwrap()).unwrap(), vec![0.0; N]);
    assert!(
        sanitized() || queued < Duration::from_nanos(SLOW_NS / 2),
        "queuing took {queued:?}: the host waited"
    );
}

/// A read in place from another pool (as from another device): the reading kernel waits for the
/// source's slow write on the source's pool, a later write of the source waits for the slow
/// read, and queuing either does not make the host wait; a read on another stream than the one
/// given is ordered too.
#[test]
fn read_remote_keeps_the_sources_order() {
    use streamline::engine::memory::read_remote;
    let Some(gpu) = gpu() else { return };
    let (from, to) = (
        StreamPool::with_streams(gpu, 2).unwrap(),
        StreamPool::with_streams(gpu, 2).unwrap(),
    );
    let fresh: Vec<f32> = data().iter().map(|v| -v).collect();
    let written = DeviceBuffer::from_slice(&from, 0, &fresh).unwrap();
    let mut src = DeviceBuffer::from_slice(&from, 0, &data()).unwrap();
    let mut seen = DeviceBuffer::<f32>::zeros(&to, 0, N).unwrap();
    // The kernels loaded before the timed part, which is to queue work only.
    spin_copy(gpu, to.stream(0).unwrap(), &src, &mut seen, 0).unwrap();
    from.synchronize().unwrap();
    to.synchronize().unwrap();
    let t = Instant::now();
    spin_copy(gpu, from.stream(0).unwrap(), &written, &mut src, SLOW_NS).unwrap();
    let reader = to.stream(1).unwrap();
    read_remote(gpu, reader, &src, from.stream(1).unwrap(), |r| {
        spin_copy(gpu, reader, r, &mut seen, SLOW_NS)
    })
    .unwrap();
    // A write to the source after the read waits for it.
    src.fill_zeros(from.stream(0).unwrap()).unwrap();
    let queued = t.elapsed();
    assert_eq!(
        seen.to_vec(to.stream(0).unwrap()).unwrap(),
        fresh,
        "the read missed the slow write, or saw the later one"
    );
    assert_eq!(src.to_vec(from.stream(1).unwrap()).unwrap(), vec![0.0; N]);
    assert!(
        sanitized() || queued < Duration::from_nanos(SLOW_NS / 2),
        "queuing took {queued:?}: the host waited"
    );
    // Work on another stream than the one given still waits for the source's last write, and
    // the host waits for it, so that the read is over when it is recorded.
    let mut other = DeviceBuffer::<f32>::zeros(&to, 0, N).unwrap();
    spin_copy(gpu, from.stream(0).unwrap(), &written, &mut src, SLOW_NS).unwrap();
    read_remote(gpu, reader, &src, from.stream(1).unwrap(), |r| {
        spin_copy(gpu, to.stream(0).unwrap(), r, &mut other, 0)
    })
    .unwrap();
    src.fill_zeros(from.stream(0).unwrap()).unwrap();
    assert_eq!(other.to_vec(to.stream(1).unwrap()).unwrap(), fresh);
    // The work's own error comes back as it was.
    let e = read_remote(gpu, reader, &src, from.stream(1).unwrap(), |_| {
        Err::<(), _>(streamline::error::Error::arg(
            "work",
            "refused on purpose".to_string(),
        ))
    })
    .unwrap_err();
    assert!(e.to_string().contains("refused on purpose"), "{e}");
}

/// Copies refuse mismatched lengths, naming the argument, and write nothing.
#[test]
fn copies_validate_lengths() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::with_streams(gpu, 1).unwrap();
    let s = pool.stream(0).unwrap();
    let mut d = DeviceBuffer::<f32>::zeros(&pool, 0, 8).unwrap();
    let e = h2d(s, &[1.0f32; 7][..], &mut d).unwrap_err().to_string();
    assert!(e.contains("`dst`") && e.contains("7"), "{e}");
    let mut h = vec![5.0f32; 9];
    assert!(d2h(s, &d, &mut h).is_err());
    assert_eq!(h, vec![5.0; 9]);
    assert_eq!(d.to_vec(s).unwrap(), vec![0.0; 8]);
    let (lo, hi) = (4, 3);
    assert!(d.view(3..9).is_err() && d.view(lo..hi).is_err());
    assert_eq!(d.view(2..8).unwrap().len(), 6);
}

/// Priorities outside the device's range are clamped to it; bad indices are errors.
#[test]
fn pool_priorities_and_indices() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::new(
        gpu,
        &[
            StreamSpec::new("urgent").priority(-1000),
            StreamSpec::new("lazy").priority(1000),
            StreamSpec::new("default"),
        ],
    )
    .unwrap();
    let (least, greatest) = pool.priority_range().unwrap();
    assert!(greatest <= least);
    assert_eq!(pool.priority(0), greatest);
    assert_eq!(pool.priority(1), least);
    assert_eq!(pool.priority(2), 0i32.clamp(greatest, least));
    assert_eq!(pool.name(0), "urgent");
    assert!(pool.stream(3).is_err());
    assert!(pool.wait_stream(0, 3).is_err());
    pool.wait_stream(0, 1).unwrap();
    assert!(StreamPool::new(gpu, &[]).is_err());
}

fn small_prefetch() -> prefetch::Options {
    prefetch::Options {
        batch: 10_007,
        batches: 6,
        depth: 3,
        compute_reps: 2,
    }
}

/// The prefetch pipeline streamed from its producer: eagerly (serial and overlapped), from
/// two captured windows of its steady state replayed in turn (with the steps around them
/// eager, for any number of batches), and eagerly again after the graphs. The consumer
/// checks every batch's own stamp and sampled values against the reference (a result from
/// another batch, or a slot refilled before its copy finished, fails), and every batch is
/// consumed exactly once.
#[test]
fn streamed_prefetch_eager_and_graph_check_every_batch() {
    let Some(gpu) = gpu() else { return };
    let o = small_prefetch();
    let plan = prefetch::spec(o.depth).plan().unwrap();
    let pool = StreamPool::named(gpu, &plan.spec().lanes).unwrap();
    assert_eq!(pool.name(0), "h2d");
    let base = randn_f32(o.batch, 5);
    let sample: Vec<usize> = (0..o.batch).step_by(97).collect();
    let mut bufs = prefetch::Buffers::new(&pool, &base, &o, &sample, true).unwrap();
    let long = prefetch::Options {
        batches: 4 * o.depth + 1,
        ..o.clone()
    };
    prefetch::stream_eager(gpu, &pool, &plan, &[0, 0, 0], &mut bufs, &long, None).unwrap();
    prefetch::stream_eager(gpu, &pool, &plan, &[0, 1, 2], &mut bufs, &long, None).unwrap();
    assert_eq!(bufs.consumed(), 2 * long.batches);
    let graphs = prefetch::capture_periods(gpu, &pool, &plan, &mut bufs, &o).unwrap();
    // Any number of batches: three whole windows and the steps around them.
    let periods = prefetch::Options {
        batches: 3 * prefetch::graph_batches(o.depth) + 3,
        ..o.clone()
    };
    let short = prefetch::Options {
        batches: 2,
        ..o.clone()
    };
    prefetch::stream_graph(gpu, &pool, &plan, &graphs, &mut bufs, &periods).unwrap();
    prefetch::stream_eager(gpu, &pool, &plan, &[0, 1, 2], &mut bufs, &long, None).unwrap();
    prefetch::stream_graph(gpu, &pool, &plan, &graphs, &mut bufs, &periods).unwrap();
    prefetch::stream_graph(gpu, &pool, &plan, &graphs, &mut bufs, &short).unwrap();
    assert_eq!(
        bufs.consumed(),
        3 * long.batches + 2 * periods.batches + short.batches
    );
    let c = bufs.check();
    assert!(c.passed(), "{c:?}");
    assert_eq!(c.compared, bufs.consumed() * (8 + sample.len() - 1));
}

/// A stop request (what Ctrl-C sets) ends a pipeline run before its next iteration with
/// `Error::Interrupted`; the streams stay usable and a cleared request lets the next run go.
#[test]
fn a_stop_request_interrupts_the_run() {
    let Some(gpu) = gpu() else { return };
    let o = small_prefetch();
    let plan = prefetch::spec(o.depth).plan().unwrap();
    let pool = StreamPool::named(gpu, &plan.spec().lanes).unwrap();
    let base = randn_f32(o.batch, 7);
    let mut bufs = prefetch::Buffers::new(&pool, &base, &o, &[100], false).unwrap();
    streamline::engine::interrupt::request();
    let e = prefetch::stream_eager(gpu, &pool, &plan, &[0, 1, 2], &mut bufs, &o, None);
    streamline::engine::interrupt::clear();
    match e {
        Err(streamline::Error::Interrupted(why)) => assert!(why.contains("iteration 0"), "{why}"),
        other => panic!("expected an interruption, got {other:?}"),
    }
    prefetch::stream_eager(gpu, &pool, &plan, &[0, 1, 2], &mut bufs, &o, None).unwrap();
    assert!(bufs.check().passed(), "{:?}", bufs.check());
}

/// Seed 003's encoder-decoder pipeline at small sizes, eager and as a graph: the encoder's
/// features and the decoder's step agree with the f64 references, one table row per batch size.
#[test]
fn encoder_decoder_matches_the_reference() {
    let Some(gpu) = gpu() else { return };
    let o = encoder_decoder::Options {
        train: Training {
            batches: vec![4, 8],
            hidden: 64,
            classes: 10,
            steps: 4,
            ..Default::default()
        },
        inputs: 256,
        features: 128,
        gpus: 1,
    };
    let common = Common {
        reps: 1,
        graph: true,
        ..Default::default()
    };
    let r = encoder_decoder::run(gpu, &common, &o).unwrap();
    assert!(r.check.passed(), "{:?}", r.check);
    assert_eq!(r.table.len(), 1 + o.train.batches.len());
    assert!(r.check.compared >= 4 * 128);
}

/// Misuse of captures is refused with an error.
#[test]
fn capture_misuse_is_an_error() {
    let Some(gpu) = gpu() else { return };
    let pool = StreamPool::with_streams(gpu, 2).unwrap();
    let cap = pool.begin_capture(0).unwrap();
    assert!(pool.begin_capture(1).is_err(), "nested capture");
    assert!(pool.begin_capture(5).is_err(), "origin outside the pool");
    // A capture with no work may or may not give an (empty) graph; either way it ends.
    let _ = cap.end();
    // A capture dropped without ending is discarded.
    drop(pool.begin_capture(1).unwrap());
    // The pool works normally afterwards.
    let x = DeviceBuffer::from_slice(&pool, 0, &data()).unwrap();
    assert_eq!(x.to_vec(pool.stream(1).unwrap()).unwrap(), data());
}
