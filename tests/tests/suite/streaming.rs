//! Pipelines that stream from a producer: memory stays flat over thousands of batches, and
//! seed 003's augment-train runs from generated batches and from images decoded off disk, any
//! number of steps, eagerly and from replayed graph windows, checked against the references.

use std::path::PathBuf;
use streamline::engine::StreamPool;
use streamline_scenarios::{augment_train, prefetch, Common, Footprint, Training};
use streamline_testing::data::randn_f32;
use streamline_tests::gpu;

fn sanitized() -> bool {
    std::env::var_os("SANITIZER").is_some_and(|v| !v.is_empty())
}

/// A bounded soak: thousands of batches through `prefetch`, eagerly and from the graph
/// windows, after a warm-up; host RSS and device memory in use may not grow by 1%, and every
/// batch's stamp and samples are checked.
#[test]
fn streaming_thousands_of_batches_keeps_memory_flat() {
    let Some(gpu) = gpu() else { return };
    let o = prefetch::Options {
        batch: 4099,
        batches: if sanitized() { 40 } else { 4000 },
        depth: 2,
        compute_reps: 1,
    };
    let warm = prefetch::Options {
        batches: 100,
        ..o.clone()
    };
    let plan = prefetch::spec(o.depth).plan().unwrap();
    let pool = StreamPool::named(gpu, &plan.spec().lanes).unwrap();
    let base = randn_f32(o.batch, 3);
    let sample: Vec<usize> = (0..o.batch).step_by(211).collect();
    let mut bufs = prefetch::Buffers::new(&pool, &base, &o, &sample, true).unwrap();
    let graphs = prefetch::capture_periods(gpu, &pool, &plan, &mut bufs, &o).unwrap();
    let lanes = [0, 1, 2];
    prefetch::stream_eager(gpu, &pool, &plan, &lanes, &mut bufs, &warm, None).unwrap();
    prefetch::stream_graph(gpu, &pool, &plan, &graphs, &mut bufs, &warm).unwrap();
    pool.synchronize().unwrap();
    let before = Footprint::now(gpu).unwrap();
    prefetch::stream_eager(gpu, &pool, &plan, &lanes, &mut bufs, &o, None).unwrap();
    prefetch::stream_graph(gpu, &pool, &plan, &graphs, &mut bufs, &o).unwrap();
    pool.synchronize().unwrap();
    let after = Footprint::now(gpu).unwrap();
    assert_eq!(bufs.consumed(), 2 * (warm.batches + o.batches));
    assert!(bufs.check().passed(), "{:?}", bufs.check());
    assert!(
        after.host_rss <= before.host_rss + before.host_rss / 100,
        "host RSS grew from {} to {} bytes",
        before.host_rss,
        after.host_rss
    );
    assert!(
        after.device_used <= before.device_used + before.device_used / 100,
        "device memory grew from {} to {} bytes",
        before.device_used,
        after.device_used
    );
}

fn small() -> augment_train::Options {
    augment_train::Options {
        train: Training {
            batches: vec![2, 5],
            hidden: 32,
            classes: 3,
            steps: 11,
            ..Default::default()
        },
        size: 16,
        workers: 3,
        ..Default::default()
    }
}

fn common() -> Common {
    Common {
        reps: 1,
        graph: true,
        ..Default::default()
    }
}

/// A folder of class subfolders holding PNGs of assorted sizes (square, wide, tall).
fn image_folder(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("streamline-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    for (c, class) in ["cats", "dogs"].iter().enumerate() {
        std::fs::create_dir_all(d.join(class)).unwrap();
        for (k, (w, h)) in [(16, 16), (23, 16), (16, 31), (40, 40)].iter().enumerate() {
            let img = image::RgbImage::from_fn(*w, *h, |x, y| {
                image::Rgb([
                    (x * 11 + y * 3 + c as u32 * 40) as u8,
                    (y * 7 + k as u32 * 50) as u8,
                    ((x ^ y) * 13) as u8,
                ])
            });
            img.save(d.join(class).join(format!("{k}.png"))).unwrap();
        }
    }
    d
}

/// Generated batches, an odd number of steps (the graph windows and the eager steps around
/// them): the last step's augmented batch against the CPU transform and the weights against
/// the f64 step.
#[test]
fn augment_train_streams_generated_batches() {
    let Some(gpu) = gpu() else { return };
    let r = augment_train::run(gpu, &common(), &small()).unwrap();
    assert!(r.check.passed(), "{:?}", r.check);
    assert!(r.check.compared > 0);
    assert_eq!(r.table.len(), 3);
    assert!(
        r.notes.iter().any(|n| n.starts_with("bottleneck: ")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes.iter().any(|n| n.contains("host RSS")),
        "{:?}",
        r.notes
    );
}

/// Images decoded from disk by the loader's threads (labels from the class folders, each
/// image scaled and cropped to the square) train as generated ones do; an undecodable file
/// stops the run with an error naming it, and a folder with more classes than the model has
/// outputs is refused.
#[test]
fn augment_train_streams_images_from_disk() {
    let Some(gpu) = gpu() else { return };
    let dir = image_folder("augment-train");
    let mut o = augment_train::Options {
        input: Some(dir.clone()),
        ..small()
    };
    o.train.batches = vec![3];
    let r = augment_train::run(gpu, &common(), &o).unwrap();
    assert!(r.check.passed(), "{:?}", r.check);
    assert!(
        r.workload.contains("decoded from the images"),
        "{}",
        r.workload
    );

    let mut two = o.clone();
    two.train.classes = 1;
    let e = augment_train::run(gpu, &common(), &two)
        .unwrap_err()
        .to_string();
    assert!(e.contains("input") && e.contains("class folders"), "{e}");

    std::fs::write(dir.join("dogs").join("9-broken.png"), b"not a png").unwrap();
    let e = augment_train::run(gpu, &common(), &o)
        .unwrap_err()
        .to_string();
    assert!(e.contains("input") && e.contains("9-broken.png"), "{e}");
    // The pool and the device are fine afterwards: the next run passes.
    std::fs::remove_file(dir.join("dogs").join("9-broken.png")).unwrap();
    let r = augment_train::run(gpu, &common(), &o).unwrap();
    assert!(r.check.passed(), "{:?}", r.check);
    // With a JPEG among the PNGs, where nvJPEG loads, the GPU decodes it and the loader's
    // threads the PNGs, into the same ragged batches.
    image::open(dir.join("cats").join("1.png"))
        .unwrap()
        .to_rgb8()
        .save(dir.join("cats").join("1.jpg"))
        .unwrap();
    let r = augment_train::run(gpu, &common(), &o).unwrap();
    assert!(r.check.passed(), "{:?}", r.check);
    let nvjpeg = streamline::jpeg::JpegDecoder::new(gpu, streamline::jpeg::Backend::Hardware);
    let want = if nvjpeg.is_ok() {
        "decoded on the GPU (files that are not JPEGs on those threads)"
    } else {
        "decoded from the images"
    };
    assert!(r.workload.contains(want), "{}", r.workload);
    std::fs::remove_dir_all(&dir).unwrap();
}
