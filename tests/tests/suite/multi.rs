//! Several GPUs through NCCL: every collective against the CPU over awkward counts, random
//! device subsets and stream assignments; ranks in their own threads meeting through a
//! rendezvous; copies between devices and reads in place ordered with the buffers' accesses; and the faults: a rank that never joins or never takes part ends in a clear
//! error within the deadline, never a hang. Skipped, with one line, without two GPUs or NCCL.

use cudarc::driver::CudaSlice;
use proptest::prelude::*;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::multi::{Batch, Comm, ReduceOp, Rendezvous};
use streamline::Gpu;
use streamline_scenarios::augment_train::{self, Exchange, GradDtype};
use streamline_scenarios::{encoder_decoder, Common, Training};
use streamline_tests::gpu_config;

/// Held by each test: they share the devices' pools, and collectives of two groups queued in
/// opposite orders on the same streams would wait on each other.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Every device of the machine with a pool of three streams each, when there are two or more
/// and NCCL loads; else `None` after one line saying why.
fn devices() -> Option<&'static [(Gpu, StreamPool)]> {
    static ALL: OnceLock<Result<Vec<(Gpu, StreamPool)>, String>> = OnceLock::new();
    let all = ALL.get_or_init(|| {
        let n = streamline::runtime::device_count().map_err(|e| e.to_string())?;
        if n < 2 {
            return Err(format!(
                "{n} CUDA device(s) here, the multi-GPU tests need 2"
            ));
        }
        streamline::multi::version().map_err(|e| e.to_string())?;
        (0..n)
            .map(|d| {
                let g = Gpu::new(d, None).map_err(|e| e.to_string())?;
                let p = StreamPool::named(&g, &["a", "b", "c"]).map_err(|e| e.to_string())?;
                Ok((g, p))
            })
            .collect()
    });
    match all {
        Ok(v) => Some(v),
        Err(e) => {
            eprintln!("skipping multi-GPU test: {e}");
            None
        }
    }
}

/// Rank `r`'s element `i`: a small whole number, so that sums over the ranks are exact in f32
/// in any order (and the mean rounds once per rank: see `close`).
fn input(r: usize, i: usize) -> f32 {
    ((i * 7 + r * 13) % 61) as f32 - 30.0
}

/// The mean of `world` inputs of magnitude at most 30: NCCL either divides the exact sum once
/// or multiplies each input by a rounded `1 / world` and sums, at most `world + 2` roundings,
/// each within half an ulp of a value below 32 (2^-20), plus `1 / world`'s own relative
/// rounding (2^-24) on at most 30: `(world + 2) * 2^-19` bounds the difference.
fn close(got: f32, want: f64, world: usize) -> bool {
    (got as f64 - want).abs() <= (world as f64 + 2.0) * 2f64.powi(-19)
}

#[derive(Clone, Copy, Debug)]
enum Case {
    AllReduce(ReduceOp),
    Broadcast(usize),
    AllGather,
    ReduceScatter,
}

fn case() -> impl Strategy<Value = Case> {
    prop_oneof![
        prop::sample::select(vec![
            ReduceOp::Sum,
            ReduceOp::Max,
            ReduceOp::Min,
            ReduceOp::Avg
        ])
        .prop_map(Case::AllReduce),
        (0usize..4).prop_map(Case::Broadcast),
        Just(Case::AllGather),
        Just(Case::ReduceScatter),
    ]
}

#[test]
fn collectives_agree_with_the_cpu_over_devices_counts_and_streams() {
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    let strategy = (
        2..=all.len(),
        1usize..=70_001,
        case(),
        prop::collection::vec((0usize..3, 0usize..3), all.len()),
    );
    let mut runner = proptest::test_runner::TestRunner::new(gpu_config(12));
    runner
        .run(&strategy, |(world, count, case, lanes)| {
            let members = &all[..world];
            let comms = Comm::local(&members.iter().map(|(g, _)| g).collect::<Vec<_>>(), Duration::from_secs(60)).unwrap();
            // Per rank: the input written on one stream, the collective queued on another.
            let (send_n, recv_n) = match case {
                Case::AllReduce(_) | Case::Broadcast(_) => (count, count),
                Case::AllGather => (count, count * world),
                Case::ReduceScatter => (count * world, count),
            };
            let mut bufs = Vec::new();
            for (r, (_, pool)) in members.iter().enumerate() {
                let (w, _) = lanes[r];
                let inp: Vec<f32> = (0..send_n).map(|i| input(r, i)).collect();
                let send = DeviceBuffer::from_slice(pool, w, &inp).unwrap();
                let recv = match case {
                    Case::AllReduce(_) | Case::Broadcast(_) => DeviceBuffer::from_slice(pool, w, &inp).unwrap(),
                    _ => DeviceBuffer::from_slice(pool, w, &vec![f32::NAN; recv_n]).unwrap(),
                };
                bufs.push((send, recv));
            }
            let mut batch = Batch::new();
            for (r, ((_, pool), (send, recv))) in members.iter().zip(bufs.iter_mut()).enumerate() {
                let s = pool.stream(lanes[r].1).unwrap();
                let c = &comms[r];
                match case {
                    Case::AllReduce(op) => batch.all_reduce_in_place(c, s, recv, op).unwrap(),
                    Case::Broadcast(root) => batch.broadcast(c, s, recv, root % world).unwrap(),
                    Case::AllGather => batch.all_gather(c, s, &*send, recv).unwrap(),
                    Case::ReduceScatter => batch.reduce_scatter(c, s, &*send, recv, ReduceOp::Sum).unwrap(),
                }
            }
            batch.run().unwrap();
            for (r, ((_, pool), c)) in members.iter().zip(&comms).enumerate() {
                c.synchronize(pool.stream(lanes[r].1).unwrap()).unwrap();
            }
            for (r, ((_, pool), (_, recv))) in members.iter().zip(&bufs).enumerate() {
                // Read back on a third stream: ordered after the collective by the tracking.
                let got = recv.to_vec(pool.stream((lanes[r].1 + 1) % 3).unwrap()).unwrap();
                for (i, g) in got.iter().enumerate() {
                    let col = |k: usize, j: usize| input(k, j) as f64;
                    let want = match case {
                        Case::AllReduce(ReduceOp::Sum) => (0..world).map(|k| col(k, i)).sum(),
                        Case::AllReduce(ReduceOp::Max) => (0..world).map(|k| col(k, i)).fold(f64::MIN, f64::max),
                        Case::AllReduce(ReduceOp::Min) => (0..world).map(|k| col(k, i)).fold(f64::MAX, f64::min),
                        Case::AllReduce(_) => (0..world).map(|k| col(k, i)).sum::<f64>() / world as f64,
                        Case::Broadcast(root) => col(root % world, i),
                        Case::AllGather => col(i / count, i % count),
                        Case::ReduceScatter => (0..world).map(|k| col(k, r * count + i)).sum(),
                    };
                    let ok = match case {
                        Case::AllReduce(ReduceOp::Avg) => close(*g, want, world),
                        _ => *g as f64 == want,
                    };
                    prop_assert!(ok, "{case:?} world {world} count {count}: rank {r} element {i} is {g}, want {want}");
                }
            }
            Ok(())
        })
        .unwrap();
}

#[test]
fn ranks_in_their_own_threads_meet_through_a_rendezvous() {
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    let dir = std::env::temp_dir().join(format!("sl-multi-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for rdv in [
        format!("tcp://127.0.0.1:{port}"),
        format!("file://{}/id", dir.display()),
    ] {
        let rdv: Rendezvous = rdv.parse().unwrap();
        let world = all.len();
        let sums: Vec<Vec<f32>> = std::thread::scope(|s| {
            let hs: Vec<_> = all
                .iter()
                .enumerate()
                .map(|(r, (g, pool))| {
                    let rdv = rdv.clone();
                    s.spawn(move || {
                        let c = Comm::join(g, r, world, &rdv, Duration::from_secs(60)).unwrap();
                        assert_eq!((c.rank(), c.world_size(), c.ordinal()), (r, world, r));
                        let mut b =
                            DeviceBuffer::from_slice(pool, 0, &[r as f32 + 1.0; 1001]).unwrap();
                        c.all_reduce_in_place(pool.stream(1).unwrap(), &mut b, ReduceOp::Sum)
                            .unwrap();
                        c.broadcast(pool.stream(1).unwrap(), &mut b, world - 1)
                            .unwrap();
                        c.synchronize(pool.stream(1).unwrap()).unwrap();
                        b.to_vec(pool.stream(2).unwrap()).unwrap()
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let want = (world * (world + 1) / 2) as f32;
        for v in sums {
            assert!(v.iter().all(|x| *x == want), "{rdv}: {:?}", &v[..4]);
        }
    }
    assert!(
        !dir.join("id").exists(),
        "rank 0 removes the rendezvous file"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_rank_that_never_joins_or_never_takes_part_ends_in_an_error_not_a_hang() {
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    // Rank 1 never starts: rank 0 gives up at the rendezvous.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let rdv: Rendezvous = format!("tcp://127.0.0.1:{port}").parse().unwrap();
    let t = Instant::now();
    let e = Comm::join(&all[0].0, 0, 2, &rdv, Duration::from_secs(2))
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("ranks [1] did not join"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(10));
    // Both join and all-reduce once; then rank 1 stops taking part (as a hung or dead peer
    // would): rank 0's second all-reduce never completes, and its wait ends at the deadline.
    let comms = Comm::local(&[&all[0].0, &all[1].0], Duration::from_secs(60)).unwrap();
    let mut bufs = Vec::new();
    for (_, pool) in &all[..2] {
        bufs.push(DeviceBuffer::from_slice(pool, 0, &[1.0f32; 4096]).unwrap());
    }
    let mut batch = Batch::new();
    for ((c, (_, pool)), b) in comms.iter().zip(&all[..2]).zip(bufs.iter_mut()) {
        batch
            .all_reduce_in_place(c, pool.stream(0).unwrap(), b, ReduceOp::Sum)
            .unwrap();
    }
    batch.run().unwrap();
    let mut comms = comms.into_iter();
    let c0 = comms.next().unwrap().with_timeout(Duration::from_secs(3));
    let pool = &all[0].1;
    c0.synchronize(pool.stream(0).unwrap()).unwrap();
    let b = &mut bufs[0];
    c0.all_reduce_in_place(pool.stream(0).unwrap(), b, ReduceOp::Sum)
        .unwrap();
    let t = Instant::now();
    let e = c0
        .synchronize(pool.stream(0).unwrap())
        .unwrap_err()
        .to_string();
    assert!(e.contains("timed out after 3 s"), "{e}");
    assert!(t.elapsed() < Duration::from_secs(20));
    let e = c0
        .all_reduce_in_place(pool.stream(0).unwrap(), b, ReduceOp::Sum)
        .unwrap_err()
        .to_string();
    assert!(e.contains("aborted"), "{e}");
    drop(c0);
    drop(comms);
    // The aborted collective left the stream usable.
    pool.synchronize().unwrap();
}

#[test]
fn buffers_and_streams_of_another_device_or_a_capture_are_refused() {
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    let comms = Comm::local(&[&all[0].0, &all[1].0], Duration::from_secs(60)).unwrap();
    let (p0, p1) = (&all[0].1, &all[1].1);
    let mut on1 = DeviceBuffer::<f32>::zeros(p1, 0, 16).unwrap();
    let mut on0 = DeviceBuffer::<f32>::zeros(p0, 0, 16).unwrap();
    let e = Batch::new()
        .all_reduce_in_place(&comms[0], p0.stream(0).unwrap(), &mut on1, ReduceOp::Sum)
        .unwrap_err();
    assert!(e.to_string().contains("`buf`: lives on device 1"), "{e}");
    let e = Batch::new()
        .all_reduce_in_place(&comms[0], p1.stream(0).unwrap(), &mut on0, ReduceOp::Sum)
        .unwrap_err();
    assert!(
        e.to_string().contains("`stream`: is a stream of device 1"),
        "{e}"
    );
    // A batch with a refused collective holds nothing: it runs as a no-op.
    let mut b = Batch::new();
    let e = b
        .broadcast(&comms[0], p0.stream(0).unwrap(), &mut on0, 2)
        .unwrap_err();
    assert!(e.to_string().contains("`root`"), "{e}");
    assert!(b.is_empty());
    b.run().unwrap();
    let cap = p0.begin_capture(0).unwrap();
    let e = comms[0]
        .all_reduce_in_place(p0.stream(0).unwrap(), &mut on0, ReduceOp::Sum)
        .unwrap_err();
    assert!(
        e.to_string().contains("not captured into CUDA graphs"),
        "{e}"
    );
    drop(cap);
}

/// A communicator whose kernels go on a stream of their own, in the device's primary context,
/// while the buffers belong to a device opened with SMs kept aside (a green context), is
/// ordered with the buffers like any collective: each round's input is written on one stream
/// by a kernel that first waits 2 ms, all-reduced from a second stream (the host waits for it
/// there) behind a 4 ms wait on the kernels' stream, and read on a third.
/// A stream of another device is refused.
#[test]
fn a_kernel_stream_of_its_own_keeps_the_buffers_order() {
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    let plain = [&all[0].0, &all[1].0];
    let e = Comm::local(&plain, Duration::from_secs(60))
        .unwrap()
        .remove(0)
        .with_kernel_stream(plain[1].new_stream().unwrap())
        .err()
        .expect("a stream of device 1 for rank 0");
    assert!(
        e.to_string().contains("`stream`: is a stream of device 1"),
        "{e}"
    );
    let split: Vec<Gpu> = plain
        .iter()
        .map(|g| {
            let d = g.info().ordinal;
            Gpu::with_side_sms(d, None, 16).unwrap_or_else(|e| {
                eprintln!("device {d} without a split of its SMs ({e}): every SM shared");
                Gpu::new(d, None).unwrap()
            })
        })
        .collect();
    let pools: Vec<StreamPool> = split
        .iter()
        .map(|g| StreamPool::named(g, &["write", "reduce", "read"]).unwrap())
        .collect();
    let comms: Vec<Comm> = Comm::local(&plain, Duration::from_secs(60))
        .unwrap()
        .into_iter()
        .zip(plain)
        .map(|(c, g)| c.with_kernel_stream(g.new_stream().unwrap()).unwrap())
        .collect();
    let n = 1 << 20;
    // Each round's inputs, rank by rank.
    let rounds: Vec<Vec<DeviceBuffer<f32>>> = (0..3)
        .map(|round| {
            pools
                .iter()
                .enumerate()
                .map(|(r, p)| {
                    let x: Vec<f32> = (0..n).map(|i| input(r, i + round)).collect();
                    DeviceBuffer::from_slice(p, 0, &x).unwrap()
                })
                .collect()
        })
        .collect();
    let mut hold: Vec<(CudaSlice<f32>, CudaSlice<f32>)> = comms
        .iter()
        .map(|c| {
            let k = c.kernel_stream().unwrap();
            (k.alloc_zeros(1).unwrap(), k.alloc_zeros(1).unwrap())
        })
        .collect();
    let mut bufs: Vec<DeviceBuffer<f32>> = pools
        .iter()
        .map(|p| DeviceBuffer::zeros(p, 0, n).unwrap())
        .collect();
    for (round, ins) in rounds.iter().enumerate() {
        for (((g, p), x), b) in split.iter().zip(&pools).zip(ins).zip(bufs.iter_mut()) {
            streamline::ops::spin::spin_copy(g, p.stream(0).unwrap(), x, b, 2_000_000).unwrap();
        }
        // The kernels' streams held back 4 ms, past the inputs' writes, so that a call's stream
        // that did not wait for its collective would let the read below in first.
        for (g, (c, (x, y))) in plain.iter().zip(comms.iter().zip(&mut hold)) {
            let k = c.kernel_stream().unwrap();
            streamline::ops::spin::spin_copy(g, k, &*x, y, 4_000_000).unwrap();
        }
        let mut batch = Batch::new();
        for ((c, p), b) in comms.iter().zip(&pools).zip(bufs.iter_mut()) {
            batch
                .all_reduce_in_place(c, p.stream(1).unwrap(), b, ReduceOp::Sum)
                .unwrap();
        }
        batch.run().unwrap();
        // A wait on the host for a stream of the split's context, as a step ends.
        for (c, p) in comms.iter().zip(&pools) {
            c.synchronize(p.stream(1).unwrap()).unwrap();
        }
        for (r, (p, b)) in pools.iter().zip(&bufs).enumerate() {
            let got = b.to_vec(p.stream(2).unwrap()).unwrap();
            let bad = (0..n)
                .filter(|&i| got[i] != input(0, i + round) + input(1, i + round))
                .count();
            assert_eq!(
                bad, 0,
                "round {round}: rank {r} has {bad} of {n} elements wrong"
            );
        }
    }
}

/// Copies between two devices, either way, of awkward lengths, from and into views at awkward
/// offsets: each lands intact, after the source's write (a kernel that first waits 2 ms on
/// another stream of the source's device) and after the destination's earlier read (a kernel
/// that waits 2 ms before it reads, on another stream of the destination's device), which
/// still sees the old values; neither host waits. Streams of the wrong device and unequal
/// lengths are refused.
#[test]
fn copies_between_devices_keep_the_buffers_order() {
    use streamline::engine::memory::peer;
    use streamline::ops::spin::spin_copy;
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    let direct = all[0].0.enable_peer_access(&all[1].0).unwrap();
    eprintln!(
        "devices 0 and 1: {}",
        if direct {
            "peer to peer"
        } else {
            "staged through host memory"
        }
    );
    let strategy = (1usize..=300_001, 0usize..=17, 0usize..=17, any::<bool>());
    let mut runner = proptest::test_runner::TestRunner::new(gpu_config(12));
    runner
        .run(&strategy, |(n, at_src, at_dst, back)| {
            let ((gs, ps), (gd, pd)) = if back {
                (&all[1], &all[0])
            } else {
                (&all[0], &all[1])
            };
            let x: Vec<f32> = (0..at_src + n).map(|i| input(1, i)).collect();
            let old: Vec<f32> = (0..at_dst + n + 5).map(|i| input(2, i)).collect();
            let written = DeviceBuffer::from_slice(ps, 0, &x).unwrap();
            let mut src = DeviceBuffer::<f32>::zeros(ps, 0, x.len()).unwrap();
            let mut dst = DeviceBuffer::from_slice(pd, 0, &old).unwrap();
            let mut seen = DeviceBuffer::<f32>::zeros(pd, 0, old.len()).unwrap();
            ps.synchronize().unwrap();
            pd.synchronize().unwrap();
            spin_copy(gs, ps.stream(0).unwrap(), &written, &mut src, 2_000_000).unwrap();
            spin_copy(gd, pd.stream(1).unwrap(), &dst, &mut seen, 2_000_000).unwrap();
            let from = src.view(at_src..at_src + n).unwrap();
            let mut into = dst.view_mut(at_dst..at_dst + n).unwrap();
            peer(
                ps.stream(1).unwrap(),
                &from,
                pd.stream(2).unwrap(),
                &mut into,
            )
            .unwrap();
            // Read back on a third stream of each side: ordered after the copy by the tracking.
            let got = dst.to_vec(pd.stream(0).unwrap()).unwrap();
            let before = seen.to_vec(pd.stream(0).unwrap()).unwrap();
            prop_assert_eq!(&before, &old, "the earlier read saw the copy's values");
            for (i, g) in got.iter().enumerate() {
                let want = if (at_dst..at_dst + n).contains(&i) {
                    x[i - at_dst + at_src]
                } else {
                    old[i]
                };
                prop_assert!(
                    *g == want,
                    "n {} back {}: element {} is {}, want {}",
                    n,
                    back,
                    i,
                    g,
                    want
                );
            }
            Ok(())
        })
        .unwrap();
    let (p0, p1) = (&all[0].1, &all[1].1);
    let src = DeviceBuffer::<f32>::zeros(p0, 0, 16).unwrap();
    let mut dst = DeviceBuffer::<f32>::zeros(p1, 0, 16).unwrap();
    let e = peer(p1.stream(0).unwrap(), &src, p1.stream(1).unwrap(), &mut dst).unwrap_err();
    assert!(
        e.to_string()
            .contains("`src_stream`: is a stream of device 1, `src` lives on device 0"),
        "{e}"
    );
    let e = peer(p0.stream(0).unwrap(), &src, p0.stream(1).unwrap(), &mut dst).unwrap_err();
    assert!(
        e.to_string()
            .contains("`dst_stream`: is a stream of device 0, `dst` lives on device 1"),
        "{e}"
    );
    let mut short = DeviceBuffer::<f32>::zeros(p1, 0, 15).unwrap();
    let e = peer(
        p0.stream(0).unwrap(),
        &src,
        p1.stream(1).unwrap(),
        &mut short,
    )
    .unwrap_err();
    assert!(e.to_string().contains("`dst`"), "{e}");
}

/// A kernel on one device reading another's buffer in place, over random lengths, offsets and
/// directions: it sees the source's slow write, a later write of the source waits for it, and
/// a reading GPU that does not reach the source, or streams of the wrong devices, are refused
/// by name.
#[test]
fn reads_in_place_across_devices_keep_the_buffers_order() {
    use streamline::engine::memory::read_remote;
    use streamline::ops::spin::spin_copy;
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    if !all[0].0.enable_peer_access(&all[1].0).unwrap() {
        eprintln!("skipping reads in place: devices 0 and 1 do not reach each other directly");
        return;
    }
    let strategy = (1usize..=300_001, 0usize..=17, any::<bool>());
    let mut runner = proptest::test_runner::TestRunner::new(gpu_config(12));
    runner
        .run(&strategy, |(n, at, back)| {
            let ((gs, ps), (gr, pr)) = if back {
                (&all[1], &all[0])
            } else {
                (&all[0], &all[1])
            };
            let x: Vec<f32> = (0..at + n).map(|i| input(1, i)).collect();
            let written = DeviceBuffer::from_slice(ps, 0, &x).unwrap();
            let mut src = DeviceBuffer::<f32>::zeros(ps, 0, x.len()).unwrap();
            let mut seen = DeviceBuffer::from_slice(pr, 0, &vec![f32::NAN; n]).unwrap();
            ps.synchronize().unwrap();
            pr.synchronize().unwrap();
            spin_copy(gs, ps.stream(0).unwrap(), &written, &mut src, 2_000_000).unwrap();
            let reader = pr.stream(1).unwrap();
            let from = src.view(at..at + n).unwrap();
            read_remote(gr, reader, &from, ps.stream(2).unwrap(), |r| {
                spin_copy(gr, reader, r, &mut seen, 1_000_000)
            })
            .unwrap();
            // Overwritten after the read, on another stream of the source's pool.
            src.fill_zeros(ps.stream(0).unwrap()).unwrap();
            let got = seen.to_vec(pr.stream(0).unwrap()).unwrap();
            for (i, g) in got.iter().enumerate() {
                prop_assert!(
                    *g == x[at + i],
                    "n {} back {}: element {} is {}, want {}",
                    n,
                    back,
                    i,
                    g,
                    x[at + i]
                );
            }
            Ok(())
        })
        .unwrap();
    let (g0, p0) = &all[0];
    let p1 = &all[1].1;
    let src = DeviceBuffer::<f32>::zeros(p1, 0, 16).unwrap();
    let nothing = |_: &streamline::engine::memory::Remote<'_, f32>| Ok(());
    let e = read_remote(
        g0,
        p1.stream(0).unwrap(),
        &src,
        p1.stream(1).unwrap(),
        nothing,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("`stream`: is a stream of device 1, the reading GPU is device 0"),
        "{e}"
    );
    let e = read_remote(
        g0,
        p0.stream(0).unwrap(),
        &src,
        p0.stream(1).unwrap(),
        nothing,
    )
    .unwrap_err();
    assert!(
        e.to_string()
            .contains("`home`: is a stream of device 0, `src` lives on device 1"),
        "{e}"
    );
    // A device opened afresh has not reached device 1 yet.
    let fresh = Gpu::new(0, None).unwrap();
    let e = read_remote(
        &fresh,
        p0.stream(0).unwrap(),
        &src,
        p1.stream(1).unwrap(),
        nothing,
    )
    .unwrap_err();
    assert!(
        e.to_string().contains("`src`") && e.to_string().contains("does not reach directly"),
        "{e}"
    );
}

/// Seed 003's scenarios over two GPUs at small sizes: data-parallel augment-train (f32 and
/// bf16 gradients, in buckets that do not divide the rows, exchanged by NCCL's all-reduce, its
/// kernels also on SMs of their own, or by peer copies) and the encoder-decoder split over two
/// GPUs, each checked against its f64 reference (and, data-parallel, the weights bit for bit
/// across the GPUs; both, their recorded runs on both GPUs).
#[test]
fn scenarios_over_two_gpus_match_their_references() {
    let _one = one_at_a_time();
    let Some(all) = devices() else { return };
    let gpu = &all[0].0;
    let common = Common {
        reps: 1,
        ..Default::default()
    };
    let train = Training {
        batches: vec![4],
        hidden: 64,
        classes: 10,
        steps: 4,
        ..Default::default()
    };
    for (grad_dtype, buckets, comm_sms, exchange) in [
        (GradDtype::F32, 3, 0, Exchange::AllReduce),
        (GradDtype::Bf16, 5, 0, Exchange::AllReduce),
        (GradDtype::Bf16, 4, 16, Exchange::Auto),
        (GradDtype::F32, 3, 0, Exchange::PeerCopies),
        (GradDtype::Bf16, 5, 0, Exchange::PeerCopies),
    ] {
        let o = augment_train::Options {
            train: train.clone(),
            size: 16,
            gpus: 2,
            buckets: Some(buckets),
            grad_dtype,
            comm_sms,
            exchange,
            ..Default::default()
        };
        let r = augment_train::run(gpu, &common, &o).unwrap();
        let case = format!("{grad_dtype:?} {comm_sms} {exchange:?}");
        assert!(r.check.passed(), "{case}: {:?}", r.check);
        assert!(r.check.compared > 0);
        let by_copies = exchange == Exchange::PeerCopies;
        assert_eq!(r.workload.contains("by peer copies"), by_copies, "{case}");
        assert_eq!(
            r.workload.contains("by NCCL's all-reduce"),
            !by_copies,
            "{case}"
        );
    }
    let o = encoder_decoder::Options {
        train: Training {
            batches: vec![4, 8],
            ..train
        },
        inputs: 256,
        features: 128,
        gpus: 2,
    };
    let r = encoder_decoder::run(gpu, &common, &o).unwrap();
    assert!(r.check.passed(), "{:?}", r.check);
    assert_eq!(r.table.len(), 1 + o.train.batches.len());
    assert!(r.check.compared >= 4 * 128);
    // The recorded run shows both GPUs: every step's encoding and copy on GPU 0, its decoder
    // step on GPU 1.
    let t = &r.timeline;
    for (track, name) in [
        ("GPU 0: encoder", "encode"),
        ("GPU 0: send", "copy"),
        ("GPU 1: decoder", "train step"),
    ] {
        let k = t.tracks.iter().position(|n| n == track);
        let k = k.unwrap_or_else(|| panic!("no track {track} in {:?}", t.tracks));
        let ops = t
            .intervals
            .iter()
            .filter(|iv| iv.track == k && iv.name == name);
        assert_eq!(ops.count(), o.train.steps, "{track}: {name}");
    }
}
