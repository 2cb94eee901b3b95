//! Per-pixel work over a plane stack (the channels of one image).
//!
//! A kernel that computes one output pixel for every channel would otherwise load, compute and
//! store channel by channel: the store of one channel orders it before the next channel's loads,
//! so each thread waits for one global-memory latency per channel. Here the values of up to
//! four channels are computed before any is stored, so their loads are in flight together.

/// Calls `store(c, value(c))` for every channel `c < channels`, computing each group of up to
/// four values before storing it.
#[inline(always)]
pub fn for_channels(channels: u32, value: impl Fn(u32) -> f32, mut store: impl FnMut(u32, f32)) {
    let mut c = 0;
    while c < channels {
        c += match channels - c {
            1 => group::<1>(c, &value, &mut store),
            2 => group::<2>(c, &value, &mut store),
            3 => group::<3>(c, &value, &mut store),
            _ => group::<4>(c, &value, &mut store),
        };
    }
}

#[inline(always)]
fn group<const N: usize>(
    first: u32,
    value: &impl Fn(u32) -> f32,
    store: &mut impl FnMut(u32, f32),
) -> u32 {
    let mut v = [0.0f32; N];
    for (k, slot) in v.iter_mut().enumerate() {
        *slot = value(first + k as u32);
    }
    for (k, &x) in v.iter().enumerate() {
        store(first + k as u32, x);
    }
    N as u32
}
