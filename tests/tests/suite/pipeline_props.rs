//! Shuffled schedules never change a pipeline's output: random stream assignment of the
//! lanes, random host-side delays between stage calls, and random extra work (device waits)
//! queued on the stages' own streams and on other streams. A missing wait anywhere shows up as
//! a wrong or unwritten output element, since the delays make a racing stage run early or late.
//!
//! Outputs are compared with the CPU reference of the heavy kernel (error analysis in
//! `streamline_testing::reference::heavy`), element by element, and must all be written.

use proptest::prelude::*;
use std::time::Duration;
use streamline::engine::memory::{d2h, h2d};
use streamline::engine::pipeline::StageCall;
use streamline::engine::{DeviceBuffer, PinnedBuffer, Plan, StreamPool};
use streamline::ops::heavy::heavy;
use streamline::ops::spin::spin_copy;
use streamline::Gpu;
use streamline_scenarios::{branches, prefetch};
use streamline_testing::data::{randn_f32, POISON_F32};
use streamline_testing::reference::heavy::compare_f32;
use streamline_tests::{gpu, gpu_property};

const POOL: usize = 4;

/// What to do around one stage call, drawn per call.
#[derive(Clone, Debug)]
struct Jitter {
    /// Host sleep before queuing the stage, µs.
    host_us: u16,
    /// Device wait queued on the stage's own stream before its work, µs.
    own_us: u16,
    /// Device wait queued on another stream after the stage, and which stream.
    other_us: u16,
    other: usize,
}

fn jitter() -> impl Strategy<Value = Jitter> {
    (
        prop_oneof![3 => Just(0u16), 1 => 0u16..1500],
        prop_oneof![2 => Just(0u16), 1 => 0u16..3000],
        prop_oneof![2 => Just(0u16), 1 => 0u16..3000],
        0..POOL,
    )
        .prop_map(|(host_us, own_us, other_us, other)| Jitter {
            host_us,
            own_us,
            other_us,
            other,
        })
}

/// Scratch buffers the extra work runs over, one pair per pool stream.
struct Extra(Vec<(DeviceBuffer<f32>, DeviceBuffer<f32>)>);

impl Extra {
    fn new(pool: &StreamPool) -> Extra {
        Extra(
            (0..POOL)
                .map(|s| {
                    (
                        DeviceBuffer::zeros(pool, s, 256).unwrap(),
                        DeviceBuffer::zeros(pool, s, 256).unwrap(),
                    )
                })
                .collect(),
        )
    }

    /// Host delay and a device wait on the stage's own stream, before the stage.
    fn before(&mut self, gpu: &Gpu, c: &StageCall, j: &Jitter) -> streamline::Result<()> {
        if j.host_us > 0 {
            std::thread::sleep(Duration::from_micros(j.host_us as u64));
        }
        if j.own_us > 0 {
            let (x, y) = &mut self.0[c.stream_index];
            spin_copy(gpu, c.stream, x, y, j.own_us as u64 * 1000)?;
        }
        Ok(())
    }

    /// A device wait on another stream, after the stage.
    fn after(&mut self, gpu: &Gpu, pool: &StreamPool, j: &Jitter) -> streamline::Result<()> {
        if j.other_us > 0 {
            let s = pool.stream(j.other)?.clone();
            let (x, y) = &mut self.0[j.other];
            spin_copy(gpu, &s, x, y, j.other_us as u64 * 1000)?;
        }
        Ok(())
    }
}

/// `stage` with the next jitter of `jit` around each call (drawn in turn): the host delay and
/// own-stream wait before it, the wait on another stream after it.
fn jittered<'a>(
    gpu: &'a Gpu,
    pool: &'a StreamPool,
    jit: &'a [Jitter],
    mut stage: impl FnMut(&StageCall, &Jitter) -> streamline::Result<()> + 'a,
) -> impl FnMut(&StageCall) -> streamline::Result<()> + 'a {
    let mut extra = Extra::new(pool);
    let mut k = 0;
    move |c| {
        let j = &jit[k % jit.len()];
        k += 1;
        extra.before(gpu, c, j)?;
        stage(c, j)?;
        extra.after(gpu, pool, j)
    }
}

/// Runs `iterations` of `plan` eagerly, or captured into a CUDA graph and launched once.
fn run_or_replay(
    plan: &Plan,
    pool: &StreamPool,
    lanes: &[usize],
    iterations: std::ops::Range<usize>,
    graph: bool,
    stage: impl FnMut(&StageCall) -> streamline::Result<()>,
) -> streamline::Result<()> {
    if graph {
        plan.capture(pool, lanes, lanes[0], iterations, stage)?
            .launch()
    } else {
        plan.run(pool, lanes, iterations, None, stage)
    }
}

fn fail(e: impl std::fmt::Display) -> TestCaseError {
    TestCaseError::fail(e.to_string())
}

fn check_all(host: &[f32], got: &[f32]) -> Result<(), TestCaseError> {
    let unwritten = got.iter().filter(|v| v.to_bits() == POISON_F32).count();
    prop_assert_eq!(unwritten, 0, "unwritten outputs");
    let c = compare_f32(host, got);
    prop_assert_eq!(c.failures, 0, "first failure {:?}", c.first_failure);
    Ok(())
}

/// Prefetch (a producer's batches through page-locked slots, H2D / compute / D2H over rings)
/// with shuffled schedules, eager, and from two replayed windows of its steady state.
#[test]
fn prefetch_output_is_schedule_independent() {
    let strategy = (
        1usize..=3,
        1usize..=3,
        prop::sample::select(vec![1usize, 7, 1000, 65_537]),
        prop::collection::vec(0..POOL, 3),
        prop::collection::vec(jitter(), 48),
        any::<bool>(),
    );
    gpu_property(
        24,
        strategy,
        |(depth, periods, batch, lanes, jit, graph)| {
            let Some(gpu) = gpu() else { return Ok(()) };
            let o = prefetch::Options {
                batch,
                batches: if graph {
                    prefetch::graph_batches(depth) * periods + depth - 1
                } else {
                    depth * periods.max(if depth == 1 { 2 } else { 1 })
                },
                depth,
                compute_reps: 1,
            };
            let pool = StreamPool::with_streams(gpu, POOL).map_err(fail)?;
            let plan = prefetch::spec(depth).plan().map_err(fail)?;
            let base = randn_f32(o.batch, batch as u64 + depth as u64);
            let sample: Vec<usize> = (0..o.batch).step_by(13).collect();
            let mut bufs =
                prefetch::Buffers::new(&pool, &base, &o, &sample, graph).map_err(fail)?;
            if graph {
                // Two windows captured, replayed in turn while the host refills the other's
                // slots, the steps around them eager.
                let graphs =
                    prefetch::capture_periods(gpu, &pool, &plan, &mut bufs, &o).map_err(fail)?;
                prefetch::stream_graph(gpu, &pool, &plan, &graphs, &mut bufs, &o).map_err(fail)?;
            } else {
                let stage = jittered(gpu, &pool, &jit, |c, _| bufs.stage(gpu, &o, c));
                plan.run(&pool, &lanes, 0..o.batches, None, stage)
                    .map_err(fail)?;
                bufs.drain(o.batches).map_err(fail)?;
            }
            // Every batch's own stamp and samples came back, each batch exactly once.
            prop_assert_eq!(bufs.consumed(), o.batches);
            prop_assert!(bufs.check().passed(), "{:?}", bufs.check());
            Ok(())
        },
    );
}

/// Seed 001's branches: each iteration loads a new input that two branches read; the next
/// load overwrites it, so it must wait for both readers. Every iteration's outputs are kept.
#[test]
fn branches_output_is_schedule_independent() {
    let strategy = (
        prop::sample::select(vec![1usize, 33, 4099]),
        2usize..6,
        prop::collection::vec(0..POOL, 3),
        prop::collection::vec(jitter(), 40),
        any::<bool>(),
    );
    gpu_property(24, strategy, |(n, iters, lanes, jit, graph)| {
        let Some(gpu) = gpu() else { return Ok(()) };
        // Seed 001's description: load, two branches, join.
        let plan = branches::spec().plan().map_err(fail)?;
        let pool = StreamPool::with_streams(gpu, POOL).map_err(fail)?;
        let host = randn_f32(n * iters, n as u64 * 31 + iters as u64);
        let inputs = PinnedBuffer::from_slice(&pool, &host).map_err(fail)?;
        let mut out =
            PinnedBuffer::from_slice(&pool, &vec![f32::from_bits(POISON_F32); 2 * n * iters])
                .map_err(fail)?;
        let z = |s| DeviceBuffer::<f32>::zeros(&pool, s, n).map_err(fail);
        let (mut x, mut a, mut t, mut b) = (z(0)?, z(1)?, z(2)?, z(2)?);
        let stage = jittered(gpu, &pool, &jit, |c, j| {
            let i = c.iteration;
            match c.stage {
                0 => h2d(c.stream, &inputs.view(i * n..(i + 1) * n)?, &mut x)?,
                1 => heavy(gpu, c.stream, &x, &mut a)?,
                2 => {
                    spin_copy(gpu, c.stream, &x, &mut t, j.own_us as u64 * 100)?;
                    heavy(gpu, c.stream, &t, &mut b)?
                }
                _ => {
                    d2h(c.stream, &a, &mut out.view_mut(2 * i * n..(2 * i + 1) * n)?)?;
                    d2h(
                        c.stream,
                        &b,
                        &mut out.view_mut((2 * i + 1) * n..(2 * i + 2) * n)?,
                    )?
                }
            }
            Ok(())
        });
        run_or_replay(&plan, &pool, &lanes, 0..iters, graph, stage).map_err(fail)?;
        let got = out.as_slice().map_err(fail)?;
        for i in 0..iters {
            let x = &host[i * n..(i + 1) * n];
            check_all(x, &got[2 * i * n..(2 * i + 1) * n])?;
            check_all(x, &got[(2 * i + 1) * n..(2 * i + 2) * n])?;
        }
        Ok(())
    });
}

/// Seed 002's multi-stage pipeline (H2D, matmul, matmul over rings of two, three lanes) with
/// shuffled schedules, eager and as a graph: every batch's two products match the f64
/// reference of their own inputs (bound from `streamline_testing::reference::matmul`), all written.
#[test]
fn multistage_output_is_schedule_independent() {
    use streamline::ops::matmul::Gemm;
    use streamline_scenarios::multistage;
    use streamline_testing::reference::matmul as refmm;
    let strategy = (
        prop::sample::select(vec![1usize, 7, 33, 64]),
        prop::sample::select(vec![1usize, 5, 64, 97]),
        1usize..=2,
        prop::collection::vec(0..POOL, 3),
        prop::collection::vec(jitter(), 30),
        any::<bool>(),
    );
    gpu_property(16, strategy, |(rows, size, periods, lanes, jit, graph)| {
        let Some(gpu) = gpu() else { return Ok(()) };
        let batches = 2 * periods;
        let per = rows * size;
        let pool = StreamPool::with_streams(gpu, POOL).map_err(fail)?;
        let plan = multistage::spec().plan().map_err(fail)?;
        let host = randn_f32(per * batches, (rows * 131 + size) as u64);
        let w1h = randn_f32(size * size, 5);
        let w2h = randn_f32(size * size, 6);
        let poison = vec![f32::from_bits(POISON_F32); per * batches];
        let ring = |s: usize| -> Result<Vec<DeviceBuffer<f32>>, TestCaseError> {
            (0..2)
                .map(|_| DeviceBuffer::zeros(&pool, s, per).map_err(fail))
                .collect()
        };
        let mut b = multistage::Buffers {
            dataset: PinnedBuffer::from_slice(&pool, &host).map_err(fail)?,
            w1: DeviceBuffer::from_slice(&pool, 1, &w1h).map_err(fail)?,
            w2: DeviceBuffer::from_slice(&pool, 2, &w2h).map_err(fail)?,
            x: ring(0)?,
            h: ring(1)?,
            y: ring(2)?,
            hidden: PinnedBuffer::from_slice(&pool, &poison).map_err(fail)?,
            results: PinnedBuffer::from_slice(&pool, &poison).map_err(fail)?,
        };
        let o = multistage::Options {
            rows,
            size,
            batches,
        };
        let stage = jittered(gpu, &pool, &jit, |c, _| b.stage(gpu, &o, c));
        run_or_replay(&plan, &pool, &lanes, 0..batches, graph, stage).map_err(fail)?;
        let hidden = b.hidden.as_slice().map_err(fail)?.to_vec();
        let results = b.results.as_slice().map_err(fail)?.to_vec();
        prop_assert!(
            hidden
                .iter()
                .chain(&results)
                .all(|v| v.to_bits() != POISON_F32),
            "unwritten outputs"
        );
        let g = Gemm::dense(rows, size, size);
        let all: Vec<usize> = (0..rows).collect();
        for i in 0..batches {
            let r = i * per..(i + 1) * per;
            for (what, got, input, w) in [
                ("x @ w1", &hidden, &host, &w1h),
                ("h @ w2", &results, &hidden, &w2h),
            ] {
                let c = refmm::compare(
                    &g,
                    &got[r.clone()],
                    &refmm::rows(&g, &input[r.clone()], w, &[], &all),
                );
                prop_assert_eq!(
                    c.outside,
                    0,
                    "batch {} {}, worst at {:?}",
                    i,
                    what,
                    c.worst_at
                );
            }
        }
        Ok(())
    });
}

/// The host side of [`loader_fed_output_is_schedule_independent`]: result slots checked in
/// order, each before it is written again.
struct Results {
    slots: Vec<PinnedBuffer<f32>>,
    n: usize,
    next: usize,
    failures: Vec<(usize, usize, usize)>,
}

fn loader_input(i: usize, j: usize) -> f32 {
    ((i * 31 + j * 7) % 1009) as f32 * 2e-3 - 1.0
}

impl Results {
    /// Checks the batches before `end` not yet checked and poisons their slots again.
    fn until(&mut self, end: usize) -> streamline::Result<()> {
        while self.next < end {
            let i = self.next;
            let k = self.slots.len();
            let out = self.slots[i % k].as_mut_slice()?;
            let want: Vec<f32> = (0..self.n).map(|j| loader_input(i, j)).collect();
            let c = compare_f32(&want, out);
            let unwritten = out.iter().filter(|v| v.to_bits() == POISON_F32).count();
            if c.failures > 0 || unwritten > 0 {
                self.failures.push((i, c.failures, unwritten));
            }
            out.fill(f32::from_bits(POISON_F32));
            self.next += 1;
        }
        Ok(())
    }
}

/// A pipeline fed by the [`streamline::engine::Loader`]: its threads fill the page-locked
/// slots after random delays (a slow decoder here and there), the lanes land on random
/// streams, and the run is eager or the steady state replayed from two graph windows with the
/// steps around them eager. Every batch comes out of the heavy kernel as the reference says,
/// from its own input, every output element written, each batch checked once.
#[test]
fn loader_fed_output_is_schedule_independent() {
    use streamline::engine::{Loader, Streamed};
    let strategy = (
        1usize..=3,
        prop::sample::select(vec![1usize, 7, 4099]),
        1usize..=4,
        prop::collection::vec(prop_oneof![3 => Just(0u64), 1 => 0u64..3000], 16),
        prop::collection::vec(0..POOL, 3),
        any::<bool>(),
        0usize..30,
    );
    gpu_property(
        16,
        strategy,
        |(depth, n, workers, delays, lanes, graph, batches)| {
            let Some(gpu) = gpu() else { return Ok(()) };
            let pool = StreamPool::with_streams(gpu, POOL).map_err(fail)?;
            let plan = prefetch::spec(depth).plan().map_err(fail)?;
            let window = 2 * depth;
            let slots = 2 * window;
            let mut loader = Loader::new(
                (0..slots)
                    .map(|_| PinnedBuffer::<f32>::zeros(&pool, n))
                    .collect::<streamline::Result<Vec<_>>>()
                    .map_err(fail)?,
                workers,
                move |i, slot: &mut PinnedBuffer<f32>| {
                    std::thread::sleep(Duration::from_micros(delays[i % delays.len()]));
                    for (j, v) in slot.as_mut_slice()?.iter_mut().enumerate() {
                        *v = loader_input(i, j);
                    }
                    Ok(())
                },
            )
            .map_err(fail)?;
            let z = |s| DeviceBuffer::<f32>::zeros(&pool, s, n).map_err(fail);
            let mut x = (0..depth).map(|_| z(0)).collect::<Result<Vec<_>, _>>()?;
            let mut y = (0..depth).map(|_| z(1)).collect::<Result<Vec<_>, _>>()?;
            let poison = vec![f32::from_bits(POISON_F32); n];
            let mut res = Results {
                slots: (0..slots)
                    .map(|_| PinnedBuffer::from_slice(&pool, &poison))
                    .collect::<streamline::Result<Vec<_>>>()
                    .map_err(fail)?,
                n,
                next: 0,
                failures: Vec::new(),
            };
            // One stage call; `hosted`: the batch comes from the loader and the result slot's
            // earlier batch is checked first (not while capturing).
            let mut stage = |c: &StageCall,
                             loader: &mut Loader<PinnedBuffer<f32>>,
                             res: &mut Results,
                             hosted: bool|
             -> streamline::Result<()> {
                let i = c.iteration;
                match c.stage {
                    0 => {
                        let slot = if hosted {
                            loader.get(i)?
                        } else {
                            loader.slot(i % slots)?
                        };
                        h2d(c.stream, &slot.view(0..n)?, &mut x[c.slot])?;
                        if hosted {
                            loader.release(i)?;
                        }
                        Ok(())
                    }
                    1 => heavy(gpu, c.stream, &x[c.slot], &mut y[c.slot]),
                    _ => {
                        if hosted {
                            res.until((i + 1).saturating_sub(slots))?;
                        }
                        d2h(
                            c.stream,
                            &y[c.slot],
                            &mut res.slots[i % slots].view_mut(0..n)?,
                        )
                    }
                }
            };
            if graph {
                let g = plan
                    .capture_steady(&pool, &lanes, 0, window, |c| {
                        stage(c, &mut loader, &mut res, false)
                    })
                    .map_err(fail)?;
                loader.start(batches).map_err(fail)?;
                let k = g.skew()[2];
                g.stream(&plan, &pool, batches, |h| match h {
                    Streamed::Call(c) => stage(c, &mut loader, &mut res, true),
                    Streamed::Before(w) => {
                        for i in w {
                            loader.get(i)?;
                        }
                        Ok(())
                    }
                    Streamed::After(w) => {
                        for i in w.clone() {
                            loader.release(i)?;
                        }
                        res.until(w.start - k)
                    }
                })
                .map_err(fail)?;
            } else {
                loader.start(batches).map_err(fail)?;
                plan.run(&pool, &lanes, 0..batches, None, |c| {
                    stage(c, &mut loader, &mut res, true)
                })
                .map_err(fail)?;
            }
            loader.finish().map_err(fail)?;
            res.until(batches).map_err(fail)?;
            prop_assert!(
                res.failures.is_empty(),
                "batches (index, wrong, unwritten): {:?}",
                res.failures
            );
            prop_assert_eq!(res.next, batches);
            Ok(())
        },
    );
}
