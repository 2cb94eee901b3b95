//! A rank that never joins, or never takes part, ends in a clear error within the deadline,
//! never a hang.

use std::time::{Duration, Instant};
use streamline::engine::DeviceBuffer;
use streamline::multi::{Batch, Comm, ReduceOp, Rendezvous};

use super::{devices, one_at_a_time};

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
