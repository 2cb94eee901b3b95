//! The MLP the model stream trains: its weights and the intermediates of one SGD step.

use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::error::Result;
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
    pub(super) dw1: DeviceBuffer<f32>,
}

impl Model {
    pub(crate) fn new(
        pool: &StreamPool,
        lane: usize,
        m: Mlp,
        w1: &[f32],
        w2: &[f32],
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
            dw1: z(d * h)?,
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
        let Mlp {
            batch: b,
            inputs: d,
            hidden: h,
            outputs: o,
            lr,
        } = self.m;
        let k = Kernel::Auto;
        // Forward: a = relu(x W1), y = a W2.
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(b, h, d),
            x,
            &self.w1,
            &mut self.hpre,
        )?;
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
        relu_backward(gpu, s, &self.da, &self.hpre, &mut self.dh)?;
        transpose(gpu, s, b, d, x, &mut self.xt)?;
        sgemm(
            gpu,
            s,
            k,
            &Gemm::dense(d, h, b),
            &self.xt,
            &self.dh,
            &mut self.dw1,
        )?;
        sgd(gpu, s, &mut self.w1, &self.dw1, lr)?;
        sgd(gpu, s, &mut self.w2, &self.dw2, lr)
    }
}
