//! The MLP the model stream trains: its weights and the intermediates of one SGD step, and,
//! when the step is one GPU's part of a data-parallel step, the all-reduce of its gradients.

use cudarc::driver::CudaStream;
use std::sync::Arc;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::error::Result;
use streamline::multi::{Comm, ReduceOp};
use streamline::ops::matmul::{sgemm, Gemm, Kernel};
use streamline::ops::train::{mse_grad, relu, relu_backward, sgd, transpose};
use streamline::Gpu;
use streamline_testing::reference::train::Mlp;

/// The MLP's weights and the intermediates of a step (also the trainable decoder of
/// `encoder-decoder`).
pub(crate) struct Model {
    pub(crate) m: Mlp,
    pub(crate) w1: DeviceBuffer<f32>,
    pub(crate) w2: DeviceBuffer<f32>,
    pub(super) xt: DeviceBuffer<f32>,
    pub(super) hpre: DeviceBuffer<f32>,
    pub(super) a: DeviceBuffer<f32>,
    pub(super) at: DeviceBuffer<f32>,
    pub(super) y: DeviceBuffer<f32>,
    pub(super) dy: DeviceBuffer<f32>,
    pub(super) dw2: DeviceBuffer<f32>,
    pub(super) w2t: DeviceBuffer<f32>,
    pub(super) da: DeviceBuffer<f32>,
    pub(super) dh: DeviceBuffer<f32>,
    /// `dL/dW1` in buckets of whole rows (one bucket on one GPU): each bucket is a buffer of
    /// its own, so that its all-reduce overlaps the product that fills the next one.
    pub(super) dw1: Vec<DeviceBuffer<f32>>,
    /// In a data-parallel step: the last step's averaged `dL/dW1` is not yet applied. The next
    /// step applies it bucket by bucket just before that bucket's part of its first product,
    /// so that the forward starts while later buckets are still being averaged.
    pending: bool,
}

/// Where a data-parallel step all-reduces its gradients: the GPU's communicator and the
/// stream the all-reduces run on (ordered with the model stream by the buffers' tracking).
pub(crate) struct Reduce<'a> {
    pub(crate) comm: &'a Comm,
    pub(crate) stream: &'a Arc<CudaStream>,
}

/// The first row of `W1` and the rows of each of (at most) `buckets` gradient buckets over
/// `inputs` rows, all of equal size but the last.
pub(crate) fn bucket_spans(inputs: usize, buckets: usize) -> impl Iterator<Item = (usize, usize)> {
    let rows = inputs.div_ceil(buckets.clamp(1, inputs.max(1))).max(1);
    (0..inputs)
        .step_by(rows)
        .map(move |r0| (r0, rows.min(inputs - r0)))
}

impl Model {
    pub(crate) fn new(
        pool: &StreamPool,
        lane: usize,
        m: Mlp,
        w1: &[f32],
        w2: &[f32],
    ) -> Result<Model> {
        Model::with_buckets(pool, lane, m, w1, w2, 1)
    }

    /// The model with `dL/dW1` in `buckets` buckets of whole rows.
    pub(crate) fn with_buckets(
        pool: &StreamPool,
        lane: usize,
        m: Mlp,
        w1: &[f32],
        w2: &[f32],
        buckets: usize,
    ) -> Result<Model> {
        let (b, d, h, o) = (m.batch, m.inputs, m.hidden, m.outputs);
        let z = |n| DeviceBuffer::zeros(pool, lane, n);
        Ok(Model {
            m,
            w1: DeviceBuffer::from_slice(pool, lane, w1)?,
            w2: DeviceBuffer::from_slice(pool, lane, w2)?,
            xt: z(d * b)?,
            hpre: z(b * h)?,
            a: z(b * h)?,
            at: z(h * b)?,
            y: z(b * o)?,
            dy: z(b * o)?,
            dw2: z(h * o)?,
            w2t: z(o * h)?,
            da: z(b * h)?,
            dh: z(b * h)?,
            dw1: bucket_spans(d, buckets)
                .map(|(_, n)| z(n * h))
                .collect::<Result<_>>()?,
            pending: false,
        })
    }

    /// One SGD step on batch `x` (`batch x inputs`) with targets `t` (`batch x outputs`).
    pub(crate) fn step(
        &mut self,
        gpu: &Gpu,
        s: &cudarc::driver::CudaStream,
        x: &DeviceBuffer<f32>,
        t: &DeviceBuffer<f32>,
    ) -> Result<()> {
        self.step_with(gpu, s, x, t, None)
    }

    /// One SGD step; with `reduce`, this GPU's part of a data-parallel step: the gradients are
    /// averaged over the GPUs before the update, `dL/dW2` while `dL/dW1` is computed and each
    /// bucket of `dL/dW1` while the next is, and `W1`'s update is left to the next step's
    /// forward (or [`Model::flush`]).
    pub(crate) fn step_with(
        &mut self,
        gpu: &Gpu,
        s: &cudarc::driver::CudaStream,
        x: &DeviceBuffer<f32>,
        t: &DeviceBuffer<f32>,
        reduce: Option<&Reduce>,
    ) -> Result<()> {
        let Mlp {
            batch: b,
            inputs: d,
            hidden: h,
            outputs: o,
            lr,
        } = self.m;
        let k = Kernel::Auto;
        // Forward: a = relu(x W1), y = a W2; in a data-parallel step `x W1` as the sum of the
        // buckets' products, each bucket of W1 updated just before its product.
        if reduce.is_some() {
            for (i, ((r0, n), g)) in bucket_spans(d, self.dw1.len()).zip(&self.dw1).enumerate() {
                if self.pending {
                    sgd(gpu, s, &mut self.w1.view_mut(r0 * h..(r0 + n) * h)?, g, lr)?;
                }
                let part = Gemm {
                    lda: d,
                    beta: if i == 0 { 0.0 } else { 1.0 },
                    ..Gemm::dense(b, h, n)
                };
                sgemm(
                    gpu,
                    s,
                    k,
                    &part,
                    &x.view(r0..r0 + (b - 1) * d + n)?,
                    &self.w1.view(r0 * h..(r0 + n) * h)?,
                    &mut self.hpre,
                )?;
            }
            self.pending = false;
        } else {
            sgemm(
                gpu,
                s,
                k,
                &Gemm::dense(b, h, d),
                x,
                &self.w1,
                &mut self.hpre,
            )?;
        }
        relu(gpu, s, &self.hpre, &mut self.a)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(b, o, h),
            &self.a,
            &self.w2,
            &mut self.y,
        )?;
        // Backward of mean((y - t)^2).
        mse_grad(gpu, s, &self.y, t, 2.0 / (b * o) as f32, &mut self.dy)?;
        transpose(gpu, s, b, h, &self.a, &mut self.at)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(h, o, b),
            &self.at,
            &self.dy,
            &mut self.dw2,
        )?;
        transpose(gpu, s, h, o, &self.w2, &mut self.w2t)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(b, h, o),
            &self.dy,
            &self.w2t,
            &mut self.da,
        )?;
        if let Some(r) = reduce {
            r.comm
                .all_reduce_in_place(r.stream, &mut self.dw2, ReduceOp::Avg)?;
        }
        relu_backward(gpu, s, &self.da, &self.hpre, &mut self.dh)?;
        transpose(gpu, s, b, d, x, &mut self.xt)?;
        for ((r0, n), g) in bucket_spans(d, self.dw1.len()).zip(self.dw1.iter_mut()) {
            sgemm(
                gpu,
                s,
                k,
                &Gemm::dense(n, h, b),
                &self.xt.view(r0 * b..(r0 + n) * b)?,
                &self.dh,
                g,
            )?;
            if let Some(r) = reduce {
                r.comm.all_reduce_in_place(r.stream, g, ReduceOp::Avg)?;
            }
        }
        if reduce.is_some() {
            self.pending = true;
        } else {
            self.update_w1(gpu, s)?;
        }
        sgd(gpu, s, &mut self.w2, &self.dw2, lr)
    }

    /// Applies a data-parallel step's `dL/dW1` still pending (see [`Model::step_with`]), on
    /// stream `s`: after the last step of a run, before its weights are read.
    pub(crate) fn flush(&mut self, gpu: &Gpu, s: &cudarc::driver::CudaStream) -> Result<()> {
        if self.pending {
            self.update_w1(gpu, s)?;
        }
        Ok(())
    }

    /// `W1 -= lr dL/dW1`, bucket by bucket.
    fn update_w1(&mut self, gpu: &Gpu, s: &cudarc::driver::CudaStream) -> Result<()> {
        let h = self.m.hidden;
        for ((r0, n), g) in bucket_spans(self.m.inputs, self.dw1.len()).zip(&self.dw1) {
            sgd(
                gpu,
                s,
                &mut self.w1.view_mut(r0 * h..(r0 + n) * h)?,
                g,
                self.m.lr,
            )?;
        }
        self.pending = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::bucket_spans;

    /// The buckets tile the rows in order, at most as many as asked, and asking again with
    /// their number gives them back (as each step does from the buffers it holds).
    #[test]
    fn buckets_tile_the_rows_and_are_found_again_from_their_number() {
        for inputs in [1, 2, 7, 64, 196_608, 196_609] {
            for buckets in [1, 2, 3, 8, 16, 64] {
                let spans: Vec<_> = bucket_spans(inputs, buckets).collect();
                assert!(!spans.is_empty() && spans.len() <= buckets);
                let mut next = 0;
                for &(r0, n) in &spans {
                    assert_eq!(r0, next);
                    assert!(n > 0);
                    next += n;
                }
                assert_eq!(next, inputs);
                assert!(bucket_spans(inputs, spans.len()).eq(spans.iter().copied()));
            }
        }
    }
}
