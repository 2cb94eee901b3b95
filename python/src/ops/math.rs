//! The arithmetic operations' descriptions: seed 000's elementwise function and the matrix
//! products (FP32, and half precision on tensor cores).

use super::args::{Args, TensorArg};
use super::{arg, Dtype, Dtypes, Extra, Op, Out, Tensor, Ty};
use cudarc::driver::CudaStream;
use half::{bf16, f16};
use std::sync::Arc;
use streamline::ops::heavy::heavy;
use streamline::ops::hgemm::{hgemm, HgemmKernel};
use streamline::ops::matmul::{self, Gemm};
use streamline::{Error, Gpu, Result};

/// The dtype a launcher was given but does not take (the description lets only its own through).
fn unsupported(name: &'static str, t: &TensorArg) -> Error {
    Error::arg(
        name,
        format!("dtype {} is not supported here", t.dtype.name()),
    )
}

/// Seed 000's `x^2 + x^3 sin(x) cos(x) + tan(x)`, elementwise, in f32 (rounded once for half
/// precision), any shape.
pub const HEAVY: Op = Op {
    name: "heavy",
    args: &[arg(
        "x",
        Ty::Tensor(Tensor::of(&[Dtype::F32, Dtype::F16, Dtype::Bf16], 0, 32)),
    )],
    out: Out::Like("x"),
    out_rows: false,
    in_place: false,
    names: &[("y", "out")],
    shape: |a| Ok(a.tensor("x")?.shape.clone()),
    run: |g, s, a, y| {
        let x = a.tensor("x")?;
        match x.dtype {
            Dtype::F32 => heavy::<f32>(g, s, &x.on(s), &mut y.on(s))?,
            Dtype::F16 => heavy::<f16>(g, s, &x.on(s), &mut y.on(s))?,
            Dtype::Bf16 => heavy::<bf16>(g, s, &x.on(s), &mut y.on(s))?,
            _ => return Err(unsupported("x", x)),
        }
        Ok(Extra::Nothing)
    },
};

/// The arguments of a matrix product `alpha * a @ b + beta * c` of `dtypes`: `c` holds the
/// output's initial values (read when `beta` is not 0).
const fn gemm_args(dtypes: &'static [Dtype]) -> [super::Arg; 5] {
    let like_a = Tensor::matrix(Dtypes::Like("a"));
    [
        arg("a", Ty::Tensor(Tensor::matrix(Dtypes::Of(dtypes)))),
        arg("b", Ty::Tensor(like_a)),
        arg(
            "c",
            Ty::OptTensor(Tensor {
                initial_output: true,
                ..like_a
            }),
        ),
        arg("alpha", Ty::Float),
        arg("beta", Ty::Float),
    ]
}

const SGEMM_ARGS: [super::Arg; 5] = gemm_args(&[Dtype::F32]);
const MATMUL_ARGS: [super::Arg; 5] = gemm_args(&[Dtype::F32, Dtype::Bf16, Dtype::F16]);

/// The product's dimensions and strides, checked (`ldc`: the output's row stride).
fn gemm(a: &Args, ldc: Option<usize>) -> Result<Gemm> {
    let (ta, tb) = (a.tensor("a")?, a.tensor("b")?);
    let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
    if tb.shape[0] != k {
        return Err(Error::arg(
            "b",
            format!("has {} rows; a ({m}, {k}) needs {k}", tb.shape[0]),
        ));
    }
    let beta = a.f32("beta")?;
    if beta != 0.0 && a.opt_tensor("c")?.is_none() {
        return Err(Error::arg(
            "out",
            "required when beta is not 0 (it is read)",
        ));
    }
    let g = Gemm {
        m,
        n,
        k,
        lda: ta.row_stride(),
        ldb: tb.row_stride(),
        ldc: ldc.unwrap_or(n.max(1)),
        alpha: a.f32("alpha")?,
        beta,
    };
    g.validate()?;
    Ok(g)
}

fn gemm_shape(a: &Args) -> Result<Vec<usize>> {
    let g = gemm(a, None)?;
    Ok(vec![g.m, g.n])
}

/// Queues the product on the kernels of `a`'s dtype, writing `y` (which holds `c`'s values).
fn gemm_run(gpu: &Gpu, s: &Arc<CudaStream>, a: &Args, y: &TensorArg) -> Result<Extra> {
    let g = gemm(a, Some(y.row_stride()))?;
    let (ta, tb) = (a.tensor("a")?, a.tensor("b")?);
    let auto = HgemmKernel::Auto;
    match ta.dtype {
        Dtype::F32 => {
            let k = matmul::Kernel::Auto;
            matmul::sgemm(gpu, s, k, &g, &ta.on(s), &tb.on(s), &mut y.on(s))?
        }
        Dtype::Bf16 => hgemm::<bf16>(gpu, s, auto, &g, &ta.on(s), &tb.on(s), &mut y.on(s))?,
        Dtype::F16 => hgemm::<f16>(gpu, s, auto, &g, &ta.on(s), &tb.on(s), &mut y.on(s))?,
        _ => return Err(unsupported("a", ta)),
    }
    Ok(Extra::Nothing)
}

/// `alpha * a @ b + beta * c` in FP32 (no TF32), row-major, rows at any pitch.
pub const SGEMM: Op = Op {
    name: "sgemm",
    args: &SGEMM_ARGS,
    out: Out::Like("a"),
    out_rows: true,
    in_place: false,
    names: &[("c", "out")],
    shape: gemm_shape,
    run: gemm_run,
};

/// `alpha * a @ b + beta * c` for float32 (as `sgemm`), bfloat16 or float16 matrices of one
/// dtype; half precision on tensor cores, accumulated in f32 and rounded once.
pub const MATMUL: Op = Op {
    name: "matmul",
    args: &MATMUL_ARGS,
    out: Out::Like("a"),
    out_rows: true,
    in_place: false,
    names: &[("c", "out")],
    shape: gemm_shape,
    run: gemm_run,
};
