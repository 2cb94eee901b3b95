//! Recording a timeline with timing events on the streams, without making the host wait.

use super::{Interval, OpKind, Timeline};
use crate::engine::pool::{timing_event, StreamPool};
use crate::error::{DriverContext, Error, Result};
use cudarc::driver::{CudaContext, CudaEvent, CudaStream};
use std::sync::Arc;

struct Pending {
    track: usize,
    name: String,
    kind: OpKind,
    iteration: Option<usize>,
    start: CudaEvent,
    end: CudaEvent,
}

/// Records operations with timing events on their streams, without making the host wait;
/// [`Recorder::finish`] reads the timestamps once everything has run.
pub struct Recorder {
    ctx: Arc<CudaContext>,
    tracks: Vec<String>,
    origin: Option<CudaEvent>,
    /// Whether the origin was set by [`Recorder::begin`]: times then count from it.
    begun: bool,
    pending: Vec<Pending>,
    spare: Vec<CudaEvent>,
}

impl Recorder {
    /// A recorder for these tracks, with `capacity` operations' events made ahead so that
    /// recording does not create events inside the measured loop.
    pub fn new(ctx: &Arc<CudaContext>, tracks: Vec<String>, capacity: usize) -> Result<Recorder> {
        let spare = (0..2 * capacity)
            .map(|_| timing_event(ctx))
            .collect::<Result<_>>()?;
        Ok(Recorder {
            ctx: ctx.clone(),
            tracks,
            origin: None,
            begun: false,
            pending: Vec::new(),
            spare,
        })
    }

    /// A recorder with one track per stream of `pool`, named after its lanes (see
    /// [`Recorder::new`]).
    pub fn for_pool(pool: &StreamPool, capacity: usize) -> Result<Recorder> {
        let tracks = (0..pool.len()).map(|i| pool.name(i).to_string()).collect();
        Recorder::new(pool.context(), tracks, capacity)
    }

    fn event(&mut self) -> Result<CudaEvent> {
        match self.spare.pop() {
            Some(e) => Ok(e),
            None => timing_event(&self.ctx),
        }
    }

    /// Sets time zero at this point of `stream` (at the first operation otherwise), so that
    /// timelines of several devices, each begun on an idle device at one moment of the host,
    /// line up where they began ([`Timeline::of_devices`]); the timeline's times then count
    /// from here. Call it before the first operation.
    pub fn begin(&mut self, stream: &CudaStream) -> Result<()> {
        if self.origin.is_some() {
            return Err(Error::arg(
                "begin",
                "the recording has begun already (at its first operation)",
            ));
        }
        let o = self.event()?;
        o.record(stream).op("cuEventRecord")?;
        self.origin = Some(o);
        self.begun = true;
        Ok(())
    }

    /// Runs `work` (which queues work on `stream`) between two timing events on `stream`,
    /// shown on track `track`.
    pub fn op<R>(
        &mut self,
        track: usize,
        stream: &CudaStream,
        name: impl Into<String>,
        kind: OpKind,
        iteration: Option<usize>,
        work: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        if track >= self.tracks.len() {
            return Err(Error::arg(
                "track",
                format!("{track} is not below {}", self.tracks.len()),
            ));
        }
        let start = self.event()?;
        let end = self.event()?;
        start.record(stream).op("cuEventRecord")?;
        if self.origin.is_none() {
            let o = self.event()?;
            o.record(stream).op("cuEventRecord")?;
            self.origin = Some(o);
        }
        let r = work()?;
        end.record(stream).op("cuEventRecord")?;
        self.pending.push(Pending {
            track,
            name: name.into(),
            kind,
            iteration,
            start,
            end,
        });
        Ok(r)
    }

    /// Waits for the recorded operations and returns the timeline, times relative to the
    /// earliest start (or to [`Recorder::begin`]).
    pub fn finish(self) -> Result<Timeline> {
        let mut tl = Timeline::new(self.tracks);
        let Some(origin) = self.origin else {
            return Ok(tl);
        };
        let mut raw = Vec::with_capacity(self.pending.len());
        for p in &self.pending {
            let s = origin.elapsed_ms(&p.start).op("cuEventElapsedTime")? as f64 * 1000.0;
            let e = origin.elapsed_ms(&p.end).op("cuEventElapsedTime")? as f64 * 1000.0;
            raw.push((s, e.max(s)));
        }
        let t0 = if self.begun {
            0.0
        } else {
            raw.iter().map(|r| r.0).fold(f64::INFINITY, f64::min)
        };
        for (p, (s, e)) in self.pending.into_iter().zip(raw) {
            tl.push(Interval {
                track: p.track,
                name: p.name,
                kind: p.kind,
                start_us: s - t0,
                end_us: e - t0,
                iteration: p.iteration,
            })?;
        }
        Ok(tl)
    }
}
