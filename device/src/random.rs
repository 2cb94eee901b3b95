//! Counter-based random numbers: Philox4x32-10 (Salmon et al., "Parallel random numbers: as
//! easy as 1, 2, 3", SC 2011), the generator behind cuRAND's and PyTorch's CUDA random
//! operations. A draw is a pure function of a 64-bit key (the seed) and a 128-bit counter, so
//! any thread can draw its own numbers in any order and the same seed and counter give the
//! same numbers on every GPU and on the host.
//!
//! Plain integer code, compiled for both targets: a CPU test can call it too.

/// Philox's multipliers and Weyl key increments.
const M0: u32 = 0xD251_1F53;
const M1: u32 = 0xCD9E_8D57;
const W0: u32 = 0x9E37_79B9;
const W1: u32 = 0xBB67_AE85;

/// High and low halves of the 64-bit product `a * b`.
#[inline(always)]
fn mul_hi_lo(a: u32, b: u32) -> (u32, u32) {
    let p = a as u64 * b as u64;
    ((p >> 32) as u32, p as u32)
}

/// Four random 32-bit words for `counter` under `key` (ten rounds).
#[inline(always)]
pub fn philox4x32_10(counter: [u32; 4], key: [u32; 2]) -> [u32; 4] {
    let (mut c, mut k) = (counter, key);
    let mut round = 0;
    while round < 10 {
        if round > 0 {
            k = [k[0].wrapping_add(W0), k[1].wrapping_add(W1)];
        }
        let (hi0, lo0) = mul_hi_lo(M0, c[0]);
        let (hi1, lo1) = mul_hi_lo(M1, c[2]);
        c = [hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0];
        round += 1;
    }
    c
}

/// A word as a float in `[0, 1)`: its top 24 bits times `2^-24`, every value exact.
#[inline(always)]
pub fn unit_f32(word: u32) -> f32 {
    (word >> 8) as f32 * (1.0 / 16_777_216.0)
}

/// A word as an integer in `0..n` (`n >= 1`): the high half of `word * n`, which differs from
/// a uniform choice by at most `n / 2^32`.
#[inline(always)]
pub fn below(word: u32, n: u32) -> u32 {
    ((word as u64 * n as u64) >> 32) as u32
}
