//! Timing device work with CUDA events.

use crate::error::{DriverContext, Result};
use cudarc::driver::{sys::CUevent_flags, CudaStream};
use std::sync::Arc;

/// Milliseconds between two events recorded around `work` on `stream` (the host waits for the
/// end event).
pub fn time_on(stream: &Arc<CudaStream>, work: impl FnOnce() -> Result<()>) -> Result<f64> {
    let ctx = stream.context();
    let start = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .op("cuEventCreate")?;
    let end = ctx
        .new_event(Some(CUevent_flags::CU_EVENT_DEFAULT))
        .op("cuEventCreate")?;
    start.record(stream).op("cuEventRecord")?;
    work()?;
    end.record(stream).op("cuEventRecord")?;
    end.synchronize().op("cuEventSynchronize")?;
    Ok(start.elapsed_ms(&end).op("cuEventElapsedTime")? as f64)
}

/// Median of a sample (mean of the middle two for even counts). Empty input gives NaN.
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut v = samples.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

#[cfg(test)]
mod tests {
    use super::median;

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
