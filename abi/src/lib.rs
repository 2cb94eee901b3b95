//! The contract between the GPU kernels and the host.
//!
//! Both sides compile this crate: `gpu-kernels` for `nvptx64-nvidia-cuda`, the host for the
//! machine it runs on. Every kernel takes exactly one `#[repr(C)]` parameter struct by value,
//! so the kernel's signature, the host's launch and the PTX manifest all follow from the
//! definitions here and nothing is restated by hand on either side.
#![no_std]

pub mod heavy;
pub mod image;
pub mod matmul;
pub mod spin;
pub mod train;

/// What the host knows about one kernel entry point: its PTX name and the layout of its single
/// by-value parameter. The build manifest records the layout found in the PTX; the host refuses
/// PTX whose layout differs, so a changed struct never reaches a stale kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// Entry-point name in the PTX (`.entry NAME`), also the Rust function name.
    pub name: &'static str,
    /// Size in bytes of the parameter struct.
    pub param_size: usize,
    /// Alignment in bytes of the parameter struct.
    pub param_align: usize,
    /// Occupancy promise compiled into the PTX, if any.
    pub bounds: Option<LaunchBounds>,
}

/// A kernel's promise to the assembler (PTX `.maxntid` and `.minnctapersm`): it is never
/// launched with more than `max_threads` threads per block, and `min_blocks` blocks should fit
/// on one multiprocessor at once, which caps the registers per thread accordingly. The host
/// refuses launches that would break the promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchBounds {
    /// Most threads per block any launch uses.
    pub max_threads: u32,
    /// Blocks per multiprocessor the register allocation must allow.
    pub min_blocks: u32,
}

impl KernelSpec {
    /// The spec of a kernel whose one parameter is `P`.
    pub const fn of<P>(name: &'static str) -> Self {
        KernelSpec {
            name,
            param_size: core::mem::size_of::<P>(),
            param_align: core::mem::align_of::<P>(),
            bounds: None,
        }
    }

    /// This spec with launch bounds (see [`LaunchBounds`]).
    pub const fn with_bounds(self, max_threads: u32, min_blocks: u32) -> Self {
        KernelSpec {
            bounds: Some(LaunchBounds {
                max_threads,
                min_blocks,
            }),
            ..self
        }
    }
}

/// Every kernel entry point the crate `gpu-kernels` exports. The build keeps exactly these
/// symbols visible and the host checks that each is present with the expected layout.
pub const KERNELS: &[KernelSpec] = &[
    heavy::HEAVY_F32,
    heavy::HEAVY_F16,
    matmul::SGEMM_1_NAIVE.spec,
    matmul::SGEMM_2_TILED.spec,
    matmul::SGEMM_3_BLOCKED.spec,
    matmul::SGEMM_4_VECTORIZED.spec,
    matmul::SGEMM_5_PIPELINED_128X128.spec,
    matmul::SGEMM_5_PIPELINED_128X64.spec,
    matmul::SGEMM_5_PIPELINED_64X64.spec,
    image::TO_FLOAT,
    image::NORMALIZE,
    image::ROI_ALIGN,
    image::ROI_ALIGN_ONE_SAMPLE,
    image::ROTATE_NEAREST,
    image::ROTATE_BILINEAR,
    image::GAUSSIAN_BLUR,
    image::RESIZE_BILINEAR,
    image::RESIZE_BILINEAR_AA,
    image::RESIZE_NEAREST,
    image::AUGMENT,
    spin::SPIN_COPY_F32,
    train::RELU_F32,
    train::RELU_BACKWARD_F32,
    train::MSE_GRAD_F32,
    train::SGD_F32,
    train::TRANSPOSE_F32,
];

/// How a contiguous elementwise range `[0, n)` splits into a scalar head, a body of 16-byte
/// vectors and a scalar tail, so that both input and output are accessed with 16-byte
/// loads/stores where their alignment allows it.
///
/// `x_addr` and `y_addr` are the byte addresses of the input and output, `elem` the element size
/// in bytes (a power of two not above 16). When the two addresses differ modulo 16 no common
/// vector alignment exists and everything is scalar (`head == n`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VectorSplit {
    /// Elements before the first 16-byte-aligned element.
    pub head: u64,
    /// Number of 16-byte vectors after the head.
    pub vectors: u64,
    /// Elements after the last vector.
    pub tail: u64,
}

impl VectorSplit {
    /// Elements per 16-byte vector for an element of `elem` bytes.
    pub const fn lanes(elem: u64) -> u64 {
        16 / elem
    }

    /// Splits `n` elements of `elem` bytes read at `x_addr` and written at `y_addr`.
    pub const fn new(x_addr: u64, y_addr: u64, n: u64, elem: u64) -> Self {
        let lanes = Self::lanes(elem);
        if x_addr % 16 != y_addr % 16 || !x_addr.is_multiple_of(elem) {
            return VectorSplit {
                head: n,
                vectors: 0,
                tail: 0,
            };
        }
        let mis = x_addr % 16;
        let mut head = if mis == 0 { 0 } else { (16 - mis) / elem };
        if head > n {
            head = n;
        }
        let rest = n - head;
        VectorSplit {
            head,
            vectors: rest / lanes,
            tail: rest % lanes,
        }
    }

    /// Elements handled one at a time (head plus tail).
    pub const fn scalars(&self) -> u64 {
        self.head + self.tail
    }

    /// Index of the `i`-th scalar element (`i < scalars()`): head elements first, then the tail.
    pub const fn scalar_index(&self, i: u64, elem: u64) -> u64 {
        if i < self.head {
            i
        } else {
            self.head + self.vectors * Self::lanes(elem) + (i - self.head)
        }
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;

    /// Every element is covered exactly once, vectors start 16-byte aligned on both sides.
    #[test]
    fn split_covers_every_element_once() {
        for elem in [2u64, 4] {
            for xo in (0..32).step_by(elem as usize) {
                for yo in (0..32).step_by(elem as usize) {
                    for n in 0..40u64 {
                        let s = VectorSplit::new(1024 + xo, 4096 + yo, n, elem);
                        let lanes = VectorSplit::lanes(elem);
                        let mut seen = std::vec![0u8; n as usize];
                        for i in 0..s.scalars() {
                            seen[s.scalar_index(i, elem) as usize] += 1;
                        }
                        for v in 0..s.vectors {
                            let first = s.head + v * lanes;
                            assert_eq!((1024 + xo + first * elem) % 16, 0);
                            assert_eq!((4096 + yo + first * elem) % 16, 0);
                            for l in 0..lanes {
                                seen[(first + l) as usize] += 1;
                            }
                        }
                        assert!(
                            seen.iter().all(|&c| c == 1),
                            "elem {elem} xo {xo} yo {yo} n {n}"
                        );
                    }
                }
            }
        }
    }
}
