//! Seed 003's scenarios over two GPUs against their references.

use streamline_scenarios::augment_train::{self, Exchange, GradDtype, Updates};
use streamline_scenarios::{encoder_decoder, Common, Training};

use super::{devices, one_at_a_time};

/// Seed 003's scenarios over two GPUs at small sizes: data-parallel augment-train (f32 and
/// bf16 gradients, in buckets that do not divide the rows, exchanged by NCCL's all-reduce, its
/// kernels also on SMs of their own, or by peer copies, the updates beside the model stream or
/// in its order) and the encoder-decoder split over two
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
    let (beside, in_order, in_forward) = (Updates::Beside, Updates::InOrder, Updates::InForward);
    for (grad_dtype, buckets, comm_sms, exchange, updates) in [
        (GradDtype::F32, 3, 0, Exchange::AllReduce, beside),
        (GradDtype::Bf16, 5, 0, Exchange::AllReduce, in_order),
        (GradDtype::Bf16, 4, 16, Exchange::Auto, beside),
        (GradDtype::F32, 3, 0, Exchange::PeerCopies, in_order),
        (GradDtype::Bf16, 5, 0, Exchange::PeerCopies, beside),
        (GradDtype::Bf16, 2, 0, Exchange::PeerCopies, in_order),
        (GradDtype::F32, 3, 0, Exchange::AllReduce, in_forward),
        (GradDtype::Bf16, 2, 0, Exchange::PeerCopies, in_forward),
    ] {
        let o = augment_train::Options {
            train: train.clone(),
            size: 16,
            gpus: 2,
            buckets: Some(buckets),
            grad_dtype,
            comm_sms,
            exchange,
            updates,
            ..Default::default()
        };
        let r = augment_train::run(gpu, &common, &o).unwrap();
        let case = format!("{grad_dtype:?} {buckets} {comm_sms} {exchange:?} {updates:?}");
        assert!(r.check.passed(), "{case}: {:?}", r.check);
        assert!(r.check.compared > 0);
        let by_copies = exchange == Exchange::PeerCopies;
        assert_eq!(r.workload.contains("by peer copies"), by_copies, "{case}");
        assert_eq!(
            r.workload.contains("by NCCL's all-reduce"),
            !by_copies,
            "{case}"
        );
        assert_eq!(
            r.workload
                .contains("each just before the next step's product"),
            updates == in_order,
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
