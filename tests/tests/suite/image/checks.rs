//! Identities on the GPU, and bad input: refused before any device work, naming the argument, writing nothing.

use super::*;

/// Rotation by 0 (nearest) copies the input, blur of a constant is that constant.
#[test]
fn gpu_identities() {
    gpu_property(16, (shape(), any::<u64>()), |(s, seed)| {
        let g = gpu().unwrap();
        let x = values(s.len(), seed);
        let xd = upload(&x);
        let a = PerImage::upload(g.stream(), "angles", &vec![0.0; s.n]).unwrap();
        let mut y = poisoned(s.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + s.len());
            rotate(g, g.stream(), s, &xd, &a, Interp::Nearest, None, &mut yv).unwrap();
        }
        prop_assert_eq!(fetch(&y, s.len())?, x);
        let cst = upload(&vec![3.25f32; s.len()]);
        let k = (2 * s.h.min(s.w) - 1).min(7);
        let mut y = poisoned(s.len());
        {
            let mut yv = y.slice_mut(GUARD..GUARD + s.len());
            gaussian_blur(
                g,
                g.stream(),
                s,
                &cst,
                (k, k),
                Sigma::Global(1.5, 1.5),
                &mut yv,
            )
            .unwrap();
        }
        // Weights normalised in f32 sum to 1 within (k + 4)u per axis.
        let tol = 2.0 * (k as f64 + 4.0) * U * 3.25;
        close(
            &fetch(&y, s.len())?,
            &vec![3.25; s.len()],
            tol,
            "blur of a constant",
        )
    });
}

// ---------------------------------------------------------------- bad input (GPU)

/// `roi_align` remembers the last call's box checks; a call with another batch or other options
/// checks the boxes again.
#[test]
fn roi_align_checks_boxes_again_for_another_batch_or_options() {
    let Some(g) = gpu() else { return };
    let rb = RoiBoxes::upload(g.stream(), &[[3.0, 0.0, 0.0, 4.0, 4.0]]).unwrap();
    let mut o = RoiAlign {
        out_h: 2,
        out_w: 2,
        spatial_scale: 1.0,
        sampling_ratio: -1,
        aligned: false,
    };
    let mut y = upload(&[0.0; 4]);
    let mut call = |shape: Shape, o: RoiAlign| {
        let x = upload(&vec![1.0; shape.len()]);
        roi_align(g, g.stream(), shape, &x, &rb, o, &mut y).map_err(|e| e.to_string())
    };
    let four = Shape::new(4, 1, 8, 8);
    call(four, o).unwrap();
    let e = call(Shape::new(2, 1, 8, 8), o).unwrap_err();
    assert!(e.contains("batch index 3 is out of range 0..2"), "{e}");
    // A scale that makes the box need more than the allowed samples per bin.
    o.spatial_scale = 1e5;
    let e = call(four, o).unwrap_err();
    assert!(e.contains("samples per bin"), "{e}");
}

#[test]
fn launchers_refuse_mismatched_lengths_and_write_nothing() {
    let Some(g) = gpu() else { return };
    let st = g.stream();
    let s = Shape::new(2, 3, 5, 7);
    let x = upload(&vec![1.0; s.len()]);
    let mut y = poisoned(s.len() - 1);
    let a = PerImage::upload(st, "angles", &[0.0, 1.0]).unwrap();
    let e = rotate(g, st, s, &x, &a, Interp::Nearest, None, &mut y)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`y`"), "{e}");
    let few = PerImage::upload(st, "angles", &[0.0]).unwrap();
    let mut y2 = poisoned(s.len() - 2 * GUARD);
    let e = resize(g, st, s, &x, (0, 3), ResizeMode::Bilinear, &mut y2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`size`"), "{e}");
    let mut y3 = poisoned(s.len() - 2 * GUARD);
    let e = rotate(g, st, s, &x, &few, Interp::Nearest, None, &mut y3)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`angles`") || e.contains("`y`"), "{e}");
    assert!(st
        .clone_dtoh(&y)
        .unwrap()
        .iter()
        .all(|v| v.to_bits() == POISON_F32));
}

// ---------------------------------------------------------------- bad input (no GPU)

#[test]
fn bad_arguments_are_named_without_a_device() {
    let s = Shape::new(2, 3, 8, 8);
    let o = RoiAlign {
        out_h: 4,
        out_w: 4,
        spatial_scale: 1.0,
        sampling_ratio: -1,
        aligned: false,
    };
    let err = |r: streamline::Result<Shape>| r.unwrap_err().to_string();
    let e = err(check_roi_align(s, &[[2.0, 0.0, 0.0, 4.0, 4.0]], &o));
    assert!(
        e.contains("`boxes`") && e.contains("out of range 0..2"),
        "{e}"
    );
    let e = err(check_roi_align(s, &[[0.0, f32::NAN, 0.0, 4.0, 4.0]], &o));
    assert!(e.contains("`boxes`") && e.contains("finite"), "{e}");
    let e = err(check_roi_align(s, &[[0.0, 5.0, 0.0, 4.0, 4.0]], &o));
    assert!(e.contains("x1 <= x2"), "{e}");
    let e = err(check_roi_align(
        s,
        &[[0.0, 0.0, 0.0, 4.0, 4.0]],
        &RoiAlign { out_h: 0, ..o },
    ));
    assert!(e.contains("`output_size`"), "{e}");
    let e = err(check_roi_align(
        s,
        &[[0.0, 0.0, 0.0, 1e6, 1e6]],
        &RoiAlign {
            out_h: 1,
            out_w: 1,
            ..o
        },
    ));
    assert!(e.contains("samples per bin"), "{e}");
    let e = err(check_roi_align(Shape::new(0, 3, 8, 8), &[[0.0; 5]], &o));
    assert!(e.contains("`x`") && e.contains("zero extent"), "{e}");
    // A pixel's offset inside its image must fit 32 bits: 5 x 2^15 x 2^15 values do not.
    let e = err(check_roi_align(
        Shape::new(1, 5, 1 << 15, 1 << 15),
        &[[0.0; 5]],
        &o,
    ));
    assert!(e.contains("`x`") && e.contains("2^32 - 1"), "{e}");
    let e = err(check_roi_align(
        s,
        &[[0.0; 5]],
        &RoiAlign {
            out_h: 3 << 14,
            out_w: 1 << 15,
            ..o
        },
    ));
    assert!(e.contains("`output_size`") && e.contains("2^32 - 1"), "{e}");

    let e = check_kernel_size("kernel_size", 4, 8, "width")
        .unwrap_err()
        .to_string();
    assert!(e.contains("`kernel_size`") && e.contains("odd"), "{e}");
    let e = check_kernel_size("kernel_size", 0, 8, "width")
        .unwrap_err()
        .to_string();
    assert!(e.contains("odd"), "{e}");
    let e = check_kernel_size("kernel_size", 9, 4, "width")
        .unwrap_err()
        .to_string();
    assert!(e.contains("at least 5"), "{e}");
    for bad in [0.0f32, -1.0, f32::NAN, f32::INFINITY] {
        let e = check_sigma("sigma", bad).unwrap_err().to_string();
        assert!(e.contains("`sigma`") && e.contains("> 0"), "{e}");
    }

    let shape = Shape::new(4, 3, 64, 64);
    let ok = AugmentConfig::seed003(64, 3);
    ok.check(shape).unwrap();
    let bad = |f: &dyn Fn(&mut AugmentConfig), arg: &str| {
        let mut c = ok.clone();
        f(&mut c);
        let e = c.check(shape).unwrap_err().to_string();
        assert!(e.contains(&format!("`{arg}`")), "{arg}: {e}");
    };
    bad(&|c| c.crop = 65, "crop");
    bad(&|c| c.crop = 0, "crop");
    bad(&|c| c.size = 10, "size");
    bad(&|c| c.kernel_size = 8, "kernel_size");
    bad(&|c| c.sigma = (0.0, 2.0), "sigma");
    bad(&|c| c.mean = vec![0.0], "mean");
    bad(&|c| c.std = vec![1.0, 0.0, 1.0], "std");
    bad(&|c| c.degrees = f32::NAN, "degrees");
    let e = ok.check(Shape::new(1, 5, 64, 64)).unwrap_err().to_string();
    assert!(e.contains("channels"), "{e}");
}
