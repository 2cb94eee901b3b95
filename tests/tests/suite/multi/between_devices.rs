//! Copies between devices and reads in place, ordered with the buffers' accesses on both.

use proptest::prelude::*;
use streamline::engine::DeviceBuffer;
use streamline::Gpu;
use streamline_tests::gpu_config;

use super::{devices, input, one_at_a_time};

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
