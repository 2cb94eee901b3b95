//! The check: the last step of a pipelined run against the CPU references.

use crate::{check_mlp_weights, sample_indices, Check, Common};
use streamline::engine::{Plan, StreamPool};
use streamline::error::Result;
use streamline::ops::image::Layout;
use streamline::Gpu;
use streamline_testing::reference::image as refimg;
use streamline_testing::reference::train::mlp_step;

use super::feed::Setup;
use super::*;

/// Checks the last step of a pipelined run of `steps` steps: the augmented batch against the
/// CPU reference of the transform, and the updated weights (all of `W2`, sampled rows of `W1`)
/// against the f64 reference of one step from the weights before it, on the batch the GPU
/// augmented.
#[allow(clippy::too_many_arguments)]
pub(super) fn verify(
    gpu: &Gpu,
    pool: &StreamPool,
    plan: &Plan,
    su: &mut Setup,
    extra: &mut Option<&mut (dyn Transform + '_)>,
    common: &Common,
    steps: usize,
) -> Result<Check> {
    let lanes = lane_streams(su.decode.is_some(), true);
    su.reset(pool)?;
    let last = steps - 1;
    su.hosted = true;
    su.loader().start(steps)?;
    su.with_ahead(pool, &lanes, 0..last, |su| {
        plan.run(pool, &lanes, 0..last, None, |c| su.stage(gpu, extra, c))
    })?;
    let model_s = pool.stream(1)?;
    let w1 = su.model.w1_to_vec(model_s)?;
    let w2 = su.model.w2.to_vec(model_s)?;
    su.with_ahead(pool, &lanes, last..steps, |su| {
        plan.run(pool, &lanes, last..steps, None, |c| su.stage(gpu, extra, c))
    })?;
    su.loader().finish()?;
    let w1n = su.model.w1_to_vec(model_s)?;
    let w2n = su.model.w2.to_vec(model_s)?;
    let x = su.ring_x[last % DEPTH].to_vec(model_s)?;
    // What the model trained on: the extra transform's output where there is one.
    let x2 = match su.ring_x2.get(last % DEPTH) {
        Some(b) => Some(b.to_vec(model_s)?),
        None => None,
    };
    let x_train = x2.as_deref().unwrap_or(&x);
    let m = su.model.m;
    let mut check = Check::default();

    // The transform, within the bound of its error analysis (`reference::image::
    // augment_bound`), outputs near a nearest-neighbour tie accepted within the data range:
    // on the batch the loader gave, rebuilt (NHWC), or the ragged batch the GPU decoded, as
    // it decoded it, image by image.
    let (want, amb, t, tol) = match &su.decode {
        None => {
            let aug = &su.augments[last % DATA];
            let shape = aug.input_shape();
            let mut nhwc = vec![0u8; shape.len()];
            let mut t = vec![0f32; m.batch * m.outputs];
            su.source.fill(last, su.batch, &mut nhwc, &mut t)?;
            let images = refimg::relayout(&nhwc, shape, Layout::Nhwc, Layout::Nchw);
            let cfg = aug.config();
            let (delta, tol) = refimg::augment_bound(cfg);
            let draw = aug.last_draw(model_s)?;
            let (want, amb) = refimg::augment(&images, shape, cfg, &draw, delta);
            (want, amb, t, tol)
        }
        Some(d) => {
            let s = last % DEPTH;
            let bytes = su.ring_u8[s].to_vec(model_s)?;
            let t = su.ring_t[s].to_vec(model_s)?;
            let ext: Vec<refimg::Extent> = d.slots[s]
                .host
                .iter()
                .map(|e| refimg::Extent {
                    offset: e.offset as usize,
                    height: e.height as usize,
                    width: e.width as usize,
                })
                .collect();
            let cfg = d.augment.config();
            let sizes: Vec<(usize, usize)> = ext.iter().map(|e| (e.height, e.width)).collect();
            let samples = refimg::ragged_most_samples(&sizes, cfg.size);
            let (delta, tol) = refimg::augment_bound_ragged(cfg, samples);
            let draw = d.augment.last_draw(model_s)?;
            let (want, amb) =
                refimg::augment_ragged(&bytes, &ext, CHANNELS, Layout::Nhwc, cfg, &draw, delta);
            (want, amb, t, tol)
        }
    };
    let vmax = 1.0; // scaled to [0, 1]
    let mut bad = 0;
    let mut worst = (0, 0);
    for i in 0..want.len() {
        let ok = if amb[i] {
            x[i].is_finite() && (x[i] as f64).abs() <= vmax / 0.5 + 1.0
        } else {
            ((x[i] as f64) - want[i]).abs() <= tol
        };
        if !ok {
            if bad == 0 {
                worst = (i, 0);
            }
            bad += 1;
        }
    }
    check.add_counts("augmented batch", want.len(), bad, worst);

    // The step.
    let rows = sample_indices(m.inputs, (common.sample / m.hidden).max(2), common.seed);
    let want = mlp_step(&m, x_train, &t, &w1, &w2, &rows);
    check_mlp_weights(&mut check, "", (&w1n, &w2n), m.hidden, &want);
    Ok(check)
}
