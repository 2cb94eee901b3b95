//! Every collective against the CPU, ranks meeting through a rendezvous, buffers and streams of
//! the wrong device refused, and a communicator queuing its kernels on a stream of its own.

use cudarc::driver::CudaSlice;
use proptest::prelude::*;
use std::time::Duration;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::multi::{Batch, Comm, ReduceOp, Rendezvous};
use streamline::Gpu;
use streamline_tests::gpu_config;

use super::{devices, input, one_at_a_time};

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
