//! The MLP the model stream trains: its weights and the intermediates of one SGD step, and,
//! when the step is one GPU's part of a data-parallel step, the exchange of its gradients (an
//! all-reduce, or peer copies).

use cudarc::driver::{CudaEvent, CudaStream, DevicePtr};
use half::bf16;
use std::sync::Arc;
use streamline::engine::{DeviceBuffer, StreamPool};
use streamline::error::{Error, Result};
use streamline::multi::{Batch, Comm, ReduceOp};
use streamline::ops::matmul::{
    sgemm, sgemm_after_sgd, sgemm_after_sgd_pair, sgemm_to_bf16, Applied, Gemm, Kernel,
};
use streamline::ops::train::{mse_grad, relu, relu_backward, sgd, transpose};
use streamline::Gpu;
use streamline_testing::reference::train::Mlp;

use super::exchange::Peers;

/// The element type a data-parallel step's `dL/dW1` travels between GPUs in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum GradDtype {
    /// As computed: every GPU applies the exact average of the f32 gradients NCCL sums.
    #[default]
    F32,
    /// Rounded to bf16 before it travels (half the bytes), averaged in bf16 and applied to the
    /// f32 weights: within a written bound of the f32 step, and bit-identical on every GPU.
    Bf16,
}

/// Where a data-parallel step applies the first layer's gradient.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Updates {
    /// On an update stream beside the model stream, each bucket's as soon as its gradient has
    /// arrived.
    #[default]
    Beside,
    /// On the model stream, each bucket's just before the next step's forward product that
    /// reads it (the last step's, before the weights are read).
    InOrder,
    /// Inside the next step's forward product that reads the bucket, which updates each weight
    /// as it reads it: the update costs no pass of its own over the weights. Where that product
    /// runs split-K with step 8's 128 x 128 tiles (the automatic plan's for batches of 65 to 128
    /// against a deep first layer) and, by peer copies, the gradients are f32; otherwise as
    /// [`Updates::InOrder`].
    InForward,
}

/// The MLP's weights and the intermediates of a step (also the trainable decoder of
/// `encoder-decoder`).
pub(crate) struct Model {
    pub(crate) m: Mlp,
    /// `W1` in buckets of whole rows, each a buffer of its own (one bucket on one GPU), so that
    /// a bucket's update and its part of the next forward are ordered with that bucket alone.
    pub(crate) w1: Vec<DeviceBuffer<f32>>,
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
    /// `dL/dW1` in the buckets of `w1`, in a model of a data-parallel step: each bucket's
    /// all-reduce overlaps the product that fills the next one (in a world of one, the
    /// gradient the update pass reads, so that the step differs from one with peers only by
    /// the exchange). Empty in a model of one GPU, whose gradient products add the update to
    /// `W1` as they compute it.
    pub(super) dw1: Vec<DeviceBuffer<f32>>,
    /// `dL/dW1`'s buckets in bf16, where the gradient travels in bf16: the gradient products
    /// write them rounded (`dw1` then serves a world of one alone).
    dw1_bf16: Vec<DeviceBuffer<bf16>>,
    /// The kernel of the first layer's forward product.
    pub(crate) forward: Kernel,
    /// Buckets whose update from the last step is still to be queued ([`Updates::InOrder`],
    /// [`Updates::InForward`]).
    owed: Vec<bool>,
    /// Where one step's moments are recorded, when asked for.
    pub(crate) trace: Option<StepTrace>,
}

/// The moments of one step on its streams, as CUDA events: the model stream after each
/// product, the communication stream as it reaches each all-reduce (its earlier work done; the
/// all-reduce itself also waits for its gradient) and after it, each bucket's update when
/// done. Recorded for the step `skip` steps after it is set.
pub(crate) struct StepTrace {
    pub(crate) skip: usize,
    /// Each moment, its event and when the host queued it.
    pub(crate) marks: Vec<(String, CudaEvent, std::time::Instant)>,
    /// The transform stream's moments (each batch copied in, each augmented) around it: the
    /// last [`AROUND`] before it and the first after.
    pub(crate) around: std::collections::VecDeque<(String, CudaEvent)>,
    after: usize,
}

/// The transform stream's moments kept on each side of the traced step.
const AROUND: usize = 16;

impl StepTrace {
    pub(crate) fn after(skip: usize) -> StepTrace {
        StepTrace {
            skip,
            marks: Vec::new(),
            around: Default::default(),
            after: 0,
        }
    }

    /// Records `what` on `stream` now, where the traced step is still to come or was just
    /// recorded.
    pub(crate) fn around(&mut self, stream: &CudaStream, what: String) -> Result<()> {
        use streamline::error::DriverContext;
        if !self.marks.is_empty() {
            if self.after == AROUND {
                return Ok(());
            }
            self.after += 1;
        } else if self.around.len() == AROUND {
            self.around.pop_front();
        }
        let timed = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
        self.around
            .push_back((what, stream.record_event(timed).op("cuEventRecord")?));
        Ok(())
    }

    /// Each moment's ms after the step's first on the GPU and, for the step's own moments, when
    /// the host queued it (ms after it queued the first), in the order recorded (once the step
    /// is done); then the transform stream's within 6 ms of it.
    pub(crate) fn times(&self) -> Result<Vec<(String, f32, Option<f64>)>> {
        use streamline::error::DriverContext;
        let Some((_, first, queued)) = self.marks.first() else {
            return Ok(Vec::new());
        };
        let mut out = self
            .marks
            .iter()
            .map(|(what, e, at)| {
                let host = at.duration_since(*queued).as_secs_f64() * 1e3;
                let ms = first.elapsed_ms(e).op("cuEventElapsedTime")?;
                Ok((what.clone(), ms, Some(host)))
            })
            .collect::<Result<Vec<_>>>()?;
        for (what, e) in &self.around {
            let ms = first.elapsed_ms(e).op("cuEventElapsedTime")?;
            if (-6.0..6.0).contains(&ms) {
                out.push((format!("transform: {what}"), ms, None));
            }
        }
        Ok(out)
    }
}

/// Where a data-parallel step exchanges its gradients and applies them: the GPU's
/// communicator, the stream the all-reduces (or the copies to the other GPU) run on, the
/// stream the first layer's updates run on (ordered with the model stream by the buffers'
/// tracking), and, where the gradients travel by peer copies, this GPU's ends of them.
pub(crate) struct Reduce {
    pub(crate) comm: Arc<Comm>,
    pub(crate) stream: Arc<CudaStream>,
    pub(crate) update: Arc<CudaStream>,
    pub(crate) peers: Option<Peers>,
    /// Where the first layer's updates run.
    pub(crate) updates: Updates,
}

/// `reduce` where its gradients travel to other GPUs (a world of more than one); the gradient
/// products then write `dL/dW1` in the type it travels in ([`Model::step_with`]), which is the
/// one the update reads ([`Model::pay`]).
fn travelling(reduce: Option<&Reduce>) -> Option<&Reduce> {
    reduce.filter(|r| r.comm.world_size() > 1)
}

/// The error of a model of one GPU (no gradient buffers) asked for a data-parallel step's part.
fn one_gpu_model() -> Error {
    Error::Interrupted("a model of one GPU was given a data-parallel step's part".into())
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
        Model::build(pool, lane, m, (w1, w2), 1, None)
    }

    /// The model with `W1` and `dL/dW1` in `buckets` buckets of whole rows, the gradient
    /// travelling as `grad`.
    pub(crate) fn with_buckets(
        pool: &StreamPool,
        lane: usize,
        m: Mlp,
        (w1, w2): (&[f32], &[f32]),
        buckets: usize,
        grad: GradDtype,
    ) -> Result<Model> {
        Model::build(pool, lane, m, (w1, w2), buckets, Some(grad))
    }

    /// The model; `dL/dW1` has buffers of its own only in a data-parallel step's model
    /// (`grad` given): a model of one GPU applies it as the product computes it.
    fn build(
        pool: &StreamPool,
        lane: usize,
        m: Mlp,
        (w1, w2): (&[f32], &[f32]),
        buckets: usize,
        grad: Option<GradDtype>,
    ) -> Result<Model> {
        let (b, d, h, o) = (m.batch, m.inputs, m.hidden, m.outputs);
        let z = |n| DeviceBuffer::zeros(pool, lane, n);
        let spans: Vec<_> = bucket_spans(d, buckets).collect();
        Ok(Model {
            m,
            w1: spans
                .iter()
                .map(|&(r0, n)| DeviceBuffer::from_slice(pool, lane, &w1[r0 * h..(r0 + n) * h]))
                .collect::<Result<_>>()?,
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
            dw1: match grad {
                None => Vec::new(),
                Some(_) => spans
                    .iter()
                    .map(|&(_, n)| z(n * h))
                    .collect::<Result<_>>()?,
            },
            dw1_bf16: match grad {
                None | Some(GradDtype::F32) => Vec::new(),
                Some(GradDtype::Bf16) => spans
                    .iter()
                    .map(|&(_, n)| DeviceBuffer::zeros(pool, lane, n * h))
                    .collect::<Result<_>>()?,
            },
            forward: Kernel::Auto,
            owed: vec![false; spans.len()],
            trace: None,
        })
    }

    /// `W1` on the host, all rows in order (read on `s`).
    pub(crate) fn w1_to_vec(&self, s: &Arc<CudaStream>) -> Result<Vec<f32>> {
        let mut w = Vec::with_capacity(self.m.inputs * self.m.hidden);
        for b in &self.w1 {
            w.extend(b.to_vec(s)?);
        }
        Ok(w)
    }

    /// Sets `W1` from `w` (all rows in order), on `s`. Refused while an update of the last
    /// step is owed ([`Model::pay_owed`] first), as the other GPU's gradient for it waits.
    pub(crate) fn load_w1(&mut self, s: &Arc<CudaStream>, w: &[f32]) -> Result<()> {
        if self.owed.contains(&true) {
            return Err(Error::Interrupted(
                "W1 was set while an update of the last step was still owed".into(),
            ));
        }
        let h = self.m.hidden;
        for ((r0, n), b) in bucket_spans(self.m.inputs, self.w1.len()).zip(self.w1.iter_mut()) {
            streamline::engine::memory::h2d(s, &w[r0 * h..(r0 + n) * h], b)?;
        }
        Ok(())
    }

    /// Adds the all-reduces of a step's gradients (`dL/dW2`, then every bucket of `dL/dW1` in
    /// the type it travels in) to `batch`, on `stream`.
    pub(crate) fn all_reduce_gradients<'a>(
        &'a mut self,
        batch: &mut Batch<'a>,
        comm: &'a Comm,
        stream: &'a CudaStream,
    ) -> Result<()> {
        batch.all_reduce_in_place(comm, stream, &mut self.dw2, ReduceOp::Avg)?;
        if self.dw1_bf16.is_empty() {
            for g in self.dw1.iter_mut() {
                batch.all_reduce_in_place(comm, stream, g, ReduceOp::Avg)?;
            }
        } else {
            for g in self.dw1_bf16.iter_mut() {
                batch.all_reduce_in_place(comm, stream, g, ReduceOp::Avg)?;
            }
        }
        Ok(())
    }

    /// Queues the copies of a step's gradients (`dL/dW2`, then every bucket of `dL/dW1` in the
    /// type it travels in) to the other GPU, on `stream`.
    pub(crate) fn send_gradients(&self, peers: &Peers, stream: &Arc<CudaStream>) -> Result<()> {
        peers.w2.send(stream, 0, &self.dw2)?;
        if let Some(p) = &peers.w1_bf16 {
            for (i, g) in self.dw1_bf16.iter().enumerate() {
                p.send(stream, i, g)?;
            }
        } else if let Some(p) = &peers.w1_f32 {
            for (i, g) in self.dw1.iter().enumerate() {
                p.send(stream, i, g)?;
            }
        }
        Ok(())
    }

    /// Takes the other GPU's gradients as [`Model::send_gradients`] sent them and gives their
    /// slots back unread.
    pub(crate) fn drop_received(&self, peers: &Peers) -> Result<()> {
        let slot = peers.w2.receive(0)?;
        peers.w2.give_back(0, slot)?;
        if let Some(p) = &peers.w1_bf16 {
            for i in 0..self.dw1_bf16.len() {
                let slot = p.receive(i)?;
                p.give_back(i, slot)?;
            }
        } else if let Some(p) = &peers.w1_f32 {
            for i in 0..self.dw1.len() {
                let slot = p.receive(i)?;
                p.give_back(i, slot)?;
            }
        }
        Ok(())
    }

    /// Queues on `stream` the update of `W1`'s bucket `i` by the last step's gradient: the
    /// mean of this GPU's and the other's where they travel by peer copies, the gradient as
    /// all-reduced otherwise (as computed in a world of one).
    fn pay(
        &mut self,
        gpu: &Gpu,
        stream: &CudaStream,
        reduce: Option<&Reduce>,
        i: usize,
    ) -> Result<()> {
        let lr = self.m.lr;
        let travel = travelling(reduce);
        let peers = travel.and_then(|r| r.peers.as_ref());
        let w = &mut self.w1[i];
        match (travel, self.dw1_bf16.get(i)) {
            (Some(_), Some(gh)) => match peers.and_then(|p| p.w1_bf16.as_ref()) {
                Some(p) => p.update_by_mean((gpu, stream), i, gh, w, lr),
                None => sgd(gpu, stream, w, gh, lr),
            },
            _ => {
                let g = self.dw1.get(i).ok_or_else(one_gpu_model)?;
                match peers.and_then(|p| p.w1_f32.as_ref()) {
                    Some(p) => p.update_by_mean((gpu, stream), i, g, w, lr),
                    None => sgd(gpu, stream, w, g, lr),
                }
            }
        }?;
        self.owed[i] = false;
        Ok(())
    }

    /// Queues on `stream` bucket `i`'s part of the forward product, `part` of `x_i` and the
    /// bucket, with the bucket's owed update applied first (as [`Model::pay`] would, by the same
    /// gradients), inside the product where it can be.
    fn pay_in_forward(
        &mut self,
        (gpu, stream): (&Gpu, &CudaStream),
        reduce: Option<&Reduce>,
        i: usize,
        (part, xi): (&Gemm, &impl DevicePtr<f32>),
    ) -> Result<Applied> {
        let (lr, k1) = (self.m.lr, self.forward);
        let travel = travelling(reduce);
        let peers = travel.and_then(|r| r.peers.as_ref());
        let (w, c) = (&mut self.w1[i], &mut self.hpre);
        let applied = match (travel, self.dw1_bf16.get(i)) {
            (Some(_), Some(gh)) => match peers.and_then(|p| p.w1_bf16.as_ref()) {
                Some(p) => p.with_other(i, |other| {
                    sgemm_after_sgd_pair(gpu, stream, k1, part, xi, (w, (gh, other), lr), c)
                }),
                None => sgemm_after_sgd(gpu, stream, k1, part, xi, (w, gh, lr), c),
            },
            _ => {
                let g = self.dw1.get(i).ok_or_else(one_gpu_model)?;
                match peers.and_then(|p| p.w1_f32.as_ref()) {
                    Some(p) => p.with_other(i, |other| {
                        sgemm_after_sgd_pair(gpu, stream, k1, part, xi, (w, (g, other), lr), c)
                    }),
                    None => sgemm_after_sgd(gpu, stream, k1, part, xi, (w, g, lr), c),
                }
            }
        }?;
        self.owed[i] = false;
        Ok(applied)
    }

    /// Queues on `stream` (the model stream) every update of the last step still owed
    /// ([`Updates::InOrder`], [`Updates::InForward`]), so that `W1` holds the step's result.
    pub(crate) fn pay_owed(
        &mut self,
        gpu: &Gpu,
        stream: &CudaStream,
        reduce: Option<&Reduce>,
    ) -> Result<()> {
        for i in 0..self.owed.len() {
            if self.owed[i] {
                self.pay(gpu, stream, reduce, i)?;
            }
        }
        Ok(())
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
    /// averaged over the GPUs before the update (all-reduced, or copied to the other GPU and
    /// averaged in the update), `dL/dW2` while `dL/dW1` is computed and each bucket of `dL/dW1`
    /// while the next is, and each bucket of `W1` is updated on the update stream as soon as
    /// its gradient has arrived, while the model stream goes on, or, [`Updates::InOrder`], on
    /// the model stream just before the next step's product that reads it, or,
    /// [`Updates::InForward`], inside that product. In a model of one
    /// GPU ([`Model::new`]), each gradient product adds `-lr dL/dW1` to its bucket of `W1` as
    /// it writes it (`C = -lr A B + C`): no gradient in memory, no pass to apply it.
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
        let k1 = self.forward;
        // This step's moments, where it is the one to trace.
        let mut marks = match &mut self.trace {
            Some(t) if t.skip == 0 && t.marks.is_empty() => Some(Vec::new()),
            Some(t) => {
                t.skip = t.skip.saturating_sub(1);
                None
            }
            None => None,
        };
        let mut mark = |stream: &CudaStream, what: String| -> Result<()> {
            if let Some(m) = &mut marks {
                use streamline::error::DriverContext;
                let timed = Some(cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT);
                let e = stream.record_event(timed).op("cuEventRecord")?;
                m.push((what, e, std::time::Instant::now()));
            }
            Ok(())
        };
        mark(s, "step".into())?;
        // Forward: a = relu(x W1), y = a W2; `x W1` as the sum of the buckets' products, so
        // that each waits only for its own bucket's update (queued just before it where it is
        // owed).
        let buckets = self.w1.len();
        for (i, (r0, n)) in bucket_spans(d, buckets).enumerate() {
            let (part, xi) = if buckets == 1 {
                (Gemm::dense(b, h, d), x.view(0..b * d)?)
            } else {
                let part = Gemm {
                    lda: d,
                    beta: if i == 0 { 0.0 } else { 1.0 },
                    ..Gemm::dense(b, h, n)
                };
                (part, x.view(r0..r0 + (b - 1) * d + n)?)
            };
            let in_forward = reduce.is_some_and(|r| r.updates == Updates::InForward);
            if self.owed[i] && in_forward {
                let applied = self.pay_in_forward((gpu, s), reduce, i, (&part, &xi))?;
                let what = match applied {
                    Applied::InProduct => format!("forward {i}, updating its bucket"),
                    Applied::ByPass => format!("update {i} and forward {i}"),
                };
                mark(s, what)?;
                continue;
            }
            if self.owed[i] {
                self.pay(gpu, s, reduce, i)?;
                mark(s, format!("update {i}"))?;
            }
            sgemm(gpu, s, k1, &part, &xi, &self.w1[i], &mut self.hpre)?;
            if buckets > 1 {
                mark(s, format!("forward {i}"))?;
            }
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
        // A world of one GPU has nothing to average: its step skips the all-reduces (and the
        // rounding for them), and keeps the rest, the update stream included.
        let travel = travelling(reduce);
        let peers = travel.and_then(|r| r.peers.as_ref());
        match (travel, peers) {
            (Some(r), Some(p)) => p.w2.send(&r.stream, 0, &self.dw2)?,
            (Some(r), None) => {
                r.comm
                    .all_reduce_in_place(&r.stream, &mut self.dw2, ReduceOp::Avg)?;
            }
            (None, _) => {}
        }
        relu_backward(gpu, s, &self.da, &self.hpre, &mut self.dh)?;
        transpose(gpu, s, b, d, x, &mut self.xt)?;
        mark(s, "second layer, transposed x".into())?;
        let spans = bucket_spans(d, self.w1.len());
        let in_order = reduce.is_some_and(|r| r.updates != Updates::Beside);
        for (i, (r0, n)) in spans.enumerate() {
            let (xt, product) = (self.xt.view(r0 * b..(r0 + n) * b)?, Gemm::dense(n, h, b));
            match (travel, self.dw1_bf16.get_mut(i)) {
                // The gradient travels in bf16: the product writes it rounded, with no f32
                // copy.
                (Some(r), Some(gh)) => {
                    sgemm_to_bf16(gpu, s, &product, &xt, &self.dh, gh)?;
                    mark(s, format!("gradient {i}"))?;
                    match peers.and_then(|p| p.w1_bf16.as_ref()) {
                        Some(p) => {
                            mark(&r.stream, format!("copy {i} reached"))?;
                            p.send(&r.stream, i, &*gh)?;
                            mark(&r.stream, format!("copy {i} done"))?;
                        }
                        None => {
                            mark(&r.stream, format!("all-reduce {i} reached"))?;
                            r.comm.all_reduce_in_place(&r.stream, gh, ReduceOp::Avg)?;
                            mark(&r.stream, format!("all-reduce {i} done"))?;
                        }
                    }
                }
                // A model of one GPU: the product adds `-lr dL/dW1` to the bucket of `W1` as
                // it writes it, with no gradient in memory and no pass to apply it.
                (None, _) if self.dw1.is_empty() => {
                    let update = Gemm {
                        alpha: -lr,
                        beta: 1.0,
                        ..product
                    };
                    sgemm(gpu, s, k, &update, &xt, &self.dh, &mut self.w1[i])?;
                    mark(s, format!("gradient {i} applied"))?;
                    continue;
                }
                (travel, _) => {
                    let g = self.dw1.get_mut(i).ok_or_else(one_gpu_model)?;
                    sgemm(gpu, s, k, &product, &xt, &self.dh, g)?;
                    mark(s, format!("gradient {i}"))?;
                    match (travel, peers.and_then(|p| p.w1_f32.as_ref())) {
                        (Some(r), Some(p)) => {
                            mark(&r.stream, format!("copy {i} reached"))?;
                            p.send(&r.stream, i, &*g)?;
                            mark(&r.stream, format!("copy {i} done"))?;
                        }
                        (Some(r), None) => {
                            mark(&r.stream, format!("all-reduce {i} reached"))?;
                            r.comm.all_reduce_in_place(&r.stream, g, ReduceOp::Avg)?;
                            mark(&r.stream, format!("all-reduce {i} done"))?;
                        }
                        (None, _) => {}
                    }
                }
            }
            if in_order {
                self.owed[i] = true;
            } else {
                let u = reduce.map_or(s, |r| &*r.update);
                self.pay(gpu, u, reduce, i)?;
                mark(u, format!("update {i}"))?;
            }
        }
        match peers {
            Some(p) => {
                p.w2.update_by_mean((gpu, s), 0, &self.dw2, &mut self.w2, lr)?;
            }
            None => sgd(gpu, s, &mut self.w2, &self.dw2, lr)?,
        }
        mark(s, "second layer updated".into())?;
        if let (Some(t), Some(m)) = (&mut self.trace, marks) {
            t.marks = m;
        }
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
