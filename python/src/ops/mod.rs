//! Every operation of the Python package, described once.
//!
//! An [`Op`] names its arguments in order, with the dtypes and ranks its tensors take; says
//! what dtype its output has; gives its output's shape from the arguments, after every check
//! that needs no device (the rules of `streamline::spec`); and queues it. Everything Python
//! sees is made from this table, not written again per operation:
//! - [`operations`]: the table for the Python layer, which makes from it the torch schema of
//!   each custom operator, its fake implementation and the checks of the caller's tensors;
//! - [`output_shape`]: the shape rule, for outputs the Python layer allocates and for fake
//!   tensors while `torch.compile` traces;
//! - [`call`]: one entry point that checks the arguments against the description and runs the
//!   operation on the caller's stream.

mod args;
mod image;
mod math;

use crate::device::{on_stream, to_py_as, Names};
use args::{Args, TensorArg};
use cudarc::driver::CudaStream;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;
use std::time::Instant;
use streamline::{Error, Gpu, Result};

/// Element types of the tensors the operations take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dtype {
    U8,
    I32,
    F32,
    F16,
    Bf16,
}

impl Dtype {
    const ALL: [Dtype; 5] = [Dtype::U8, Dtype::I32, Dtype::F32, Dtype::F16, Dtype::Bf16];

    /// The name torch and the Python layer give it.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::U8 => "uint8",
            Dtype::I32 => "int32",
            Dtype::F32 => "float32",
            Dtype::F16 => "float16",
            Dtype::Bf16 => "bfloat16",
        }
    }

    fn parse(s: &str) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| d.name() == s)
    }
}

/// The dtypes a tensor argument takes.
#[derive(Clone, Copy, Debug)]
pub enum Dtypes {
    /// One of these.
    Of(&'static [Dtype]),
    /// The dtype of the named earlier tensor argument.
    Like(&'static str),
}

/// A tensor argument.
#[derive(Clone, Copy, Debug)]
pub struct Tensor {
    pub dtypes: Dtypes,
    /// Allowed ranks, both ends included.
    pub ranks: (usize, usize),
    /// Written by the operation (`Tensor(a!)` in the schema).
    pub mutated: bool,
    /// Rows of consecutive elements at any row pitch (a matrix), instead of dense.
    pub rows: bool,
    /// Holds the output's initial values, which the operation reads: the output itself (the
    /// custom operator's implementation makes the output a copy of it).
    pub initial_output: bool,
}

impl Tensor {
    const fn of(dtypes: &'static [Dtype], lo: usize, hi: usize) -> Tensor {
        Tensor {
            dtypes: Dtypes::Of(dtypes),
            ranks: (lo, hi),
            mutated: false,
            rows: false,
            initial_output: false,
        }
    }

    const fn matrix(dtypes: Dtypes) -> Tensor {
        Tensor {
            dtypes,
            ranks: (2, 2),
            mutated: false,
            rows: true,
            initial_output: false,
        }
    }
}

/// What an argument is.
#[derive(Clone, Copy, Debug)]
pub enum Ty {
    Tensor(Tensor),
    /// A tensor, or `None`.
    OptTensor(Tensor),
    /// Boxes `[batch index, x1, y1, x2, y2]`: a float32 `(K, 5)` tensor read by the kernel, or
    /// rows the host checked (a tensor in the schema).
    Boxes,
    Int,
    Float,
    OptFloat,
    Bool,
    Str,
    Ints,
    Floats,
    /// A given augmentation draw `(boxes, angles, sigmas)` or `None`: direct calls only (not
    /// in the schema, and always last).
    Draw,
}

impl Ty {
    /// The type in a torch operator schema (`None` for direct-call arguments).
    fn schema(&self) -> Option<&'static str> {
        Some(match self {
            Ty::Tensor(t) if t.mutated => "Tensor(a!)",
            Ty::Tensor(_) | Ty::Boxes => "Tensor",
            Ty::OptTensor(_) => "Tensor?",
            Ty::Int => "int",
            Ty::Float => "float",
            Ty::OptFloat => "float?",
            Ty::Bool => "bool",
            Ty::Str => "str",
            Ty::Ints => "int[]",
            Ty::Floats => "float[]",
            Ty::Draw => return None,
        })
    }

    /// The kind as the Python layer tells arguments apart.
    fn kind(&self) -> &'static str {
        match self {
            Ty::Tensor(_) => "tensor",
            Ty::OptTensor(_) => "tensor?",
            Ty::Boxes => "boxes",
            Ty::Draw => "host",
            _ => "value",
        }
    }
}

/// One argument: its name in Python and what it is.
#[derive(Clone, Copy, Debug)]
pub struct Arg {
    pub name: &'static str,
    pub ty: Ty,
}

const fn arg(name: &'static str, ty: Ty) -> Arg {
    Arg { name, ty }
}

/// The output's dtype.
#[derive(Clone, Copy, Debug)]
pub enum Out {
    Of(Dtype),
    /// The dtype of the named tensor argument.
    Like(&'static str),
}

/// What a call gives back besides its output.
pub enum Extra {
    Nothing,
    /// The augmentation's draw: crop boxes `[x1, y1, x2, y2]`, angles, sigmas.
    Draw(Draw),
}

/// An augmentation draw as Python holds it.
pub type Draw = (Vec<[f32; 4]>, Vec<f32>, Vec<f32>);

/// One operation.
pub struct Op {
    /// Its name in `streamline.functional` and `torch.ops.streamline`.
    pub name: &'static str,
    /// Its arguments in the schema's order.
    pub args: &'static [Arg],
    pub out: Out,
    /// Whether the output may be written at any row pitch (a matrix).
    pub out_rows: bool,
    /// Whether the output may be exactly the first argument (an elementwise operation in
    /// place); any other overlap with an input is refused.
    pub in_place: bool,
    /// How the library's argument names read in Python.
    pub names: Names,
    /// The output's shape, after the checks that need no device.
    pub shape: fn(&Args) -> Result<Vec<usize>>,
    /// Queues the operation on the stream, writing the output (shape and dtype checked).
    pub run: fn(&Gpu, &Arc<CudaStream>, &Args, &TensorArg) -> Result<Extra>,
}

impl Op {
    /// The torch schema after the name: `(Tensor inpt, float[] mean, ...) -> Tensor`.
    fn schema(&self) -> String {
        let args: Vec<String> = self
            .args
            .iter()
            .filter_map(|a| a.ty.schema().map(|t| format!("{t} {}", a.name)))
            .collect();
        format!("({}) -> Tensor", args.join(", "))
    }

    fn out_dtype(&self, a: &Args) -> Result<Dtype> {
        match self.out {
            Out::Of(d) => Ok(d),
            Out::Like(name) => Ok(a.tensor(name)?.dtype),
        }
    }
}

/// Every operation, in the order of `streamline.functional`.
static OPS: &[&Op] = &[
    &image::TO_FLOAT,
    &image::NORMALIZE,
    &image::RESIZE,
    &image::ROTATE,
    &image::GAUSSIAN_BLUR,
    &image::ROI_ALIGN,
    &image::ROI_ALIGN_BACKWARD,
    &image::AUGMENT,
    &image::AUGMENT_DRAWN,
    &image::AUGMENT_RAGGED,
    &math::HEAVY,
    &math::SGEMM,
    &math::MATMUL,
];

fn find(name: &str) -> PyResult<&'static Op> {
    OPS.iter().copied().find(|o| o.name == name).ok_or_else(|| {
        pyo3::exceptions::PyKeyError::new_err(format!("no operation named {name:?}"))
    })
}

/// One argument as the Python layer reads it: `(name, kind, dtypes, dtype of, (rank lo, rank
/// hi), mutated, rows, initial output)`; the tensor fields are empty for other kinds.
type ArgRow = (
    &'static str,
    &'static str,
    Vec<&'static str>,
    Option<&'static str>,
    (usize, usize),
    bool,
    bool,
    bool,
);

/// One operation as the Python layer reads it: `(name, schema, arguments, output dtype or
/// None, output dtype of, output rows, in place)`.
type OpRow = (
    &'static str,
    String,
    Vec<ArgRow>,
    Option<&'static str>,
    Option<&'static str>,
    bool,
    bool,
);

/// The table, for the Python layer to make its bindings from.
#[pyfunction]
pub fn operations() -> Vec<OpRow> {
    OPS.iter()
        .map(|op| {
            let args = op
                .args
                .iter()
                .map(|a| {
                    let t = match a.ty {
                        Ty::Tensor(t) | Ty::OptTensor(t) => Some(t),
                        _ => None,
                    };
                    let (dtypes, like) = match t.map(|t| t.dtypes) {
                        Some(Dtypes::Of(d)) => (d.iter().map(|d| d.name()).collect(), None),
                        Some(Dtypes::Like(n)) => (vec![], Some(n)),
                        None => (vec![], None),
                    };
                    (
                        a.name,
                        a.ty.kind(),
                        dtypes,
                        like,
                        t.map_or((0, 0), |t| t.ranks),
                        t.is_some_and(|t| t.mutated),
                        t.is_some_and(|t| t.rows),
                        t.is_some_and(|t| t.initial_output),
                    )
                })
                .collect();
            let (dtype, like) = match op.out {
                Out::Of(d) => (Some(d.name()), None),
                Out::Like(n) => (None, Some(n)),
            };
            (
                op.name,
                op.schema(),
                args,
                dtype,
                like,
                op.out_rows,
                op.in_place,
            )
        })
        .collect()
}

/// The output shape of operation `name` on `args` (the schema's arguments; tensors as
/// `(address, shape, dtype, row pitch or None)`, whose address is not read), after the checks
/// that need no device.
#[pyfunction]
pub fn output_shape(name: &str, args: &Bound<'_, PyTuple>) -> PyResult<Vec<usize>> {
    let op = find(name)?;
    let a = Args::extract(op, args)?;
    (op.shape)(&a).map_err(|e| to_py_as(e, op.names))
}

/// Checks `args` and `out` against operation `name` and queues it on `stream` of `device`, with
/// the GIL released; returns the augmentation's draw where it made one on the host, else
/// `None`.
#[pyfunction]
pub fn call<'py>(
    py: Python<'py>,
    name: &str,
    device: usize,
    stream: u64,
    args: &Bound<'py, PyTuple>,
    out: &Bound<'py, PyAny>,
) -> PyResult<Option<Draw>> {
    let (op, a, y) = checked(name, args, out)?;
    let extra = on_stream(py, device, stream, op.names, |g, s| (op.run)(g, s, &a, &y))?;
    Ok(match extra {
        Extra::Nothing => None,
        Extra::Draw(d) => Some(d),
    })
}

/// Host time of one call of operation `name` made from Rust (the mean of `iters`, in seconds,
/// checks included): what the Python call's own cost is measured against.
#[pyfunction]
pub fn host_time<'py>(
    py: Python<'py>,
    name: &str,
    device: usize,
    stream: u64,
    args: &Bound<'py, PyTuple>,
    out: &Bound<'py, PyAny>,
    iters: usize,
) -> PyResult<f64> {
    let (op, a, y) = checked(name, args, out)?;
    on_stream(py, device, stream, op.names, |g, s| {
        let t = Instant::now();
        for _ in 0..iters {
            checked_output(op, &a, &y)?;
            (op.run)(g, s, &a, &y)?;
        }
        Ok(t.elapsed().as_secs_f64() / iters.max(1) as f64)
    })
}

/// Operation `name` with its arguments and output read from Python and checked against it
/// (device-free: a wrong call is refused before any device is touched).
fn checked(
    name: &str,
    args: &Bound<'_, PyTuple>,
    out: &Bound<'_, PyAny>,
) -> PyResult<(&'static Op, Args, TensorArg)> {
    let op = find(name)?;
    let a = Args::extract(op, args)?;
    let y = TensorArg::extract("out", out)?;
    checked_output(op, &a, &y).map_err(|e| to_py_as(e, op.names))?;
    Ok((op, a, y))
}

/// Checks the arguments (the shape rule) and that `y` has the output's shape and dtype.
fn checked_output(op: &Op, a: &Args, y: &TensorArg) -> Result<()> {
    let shape = (op.shape)(a)?;
    let dtype = op.out_dtype(a)?;
    if y.shape != shape {
        return Err(Error::arg(
            "out",
            format!("has shape {}; needs {}", tuple(&y.shape), tuple(&shape)),
        ));
    }
    if y.dtype != dtype {
        return Err(Error::arg(
            "out",
            format!("has dtype {}; needs {}", y.dtype.name(), dtype.name()),
        ));
    }
    for arg in op.args {
        if let Ty::Tensor(t) | Ty::OptTensor(t) = arg.ty {
            if t.initial_output && a.opt_tensor(arg.name)?.is_some_and(|c| c.ptr != y.ptr) {
                return Err(Error::arg(
                    "out",
                    format!(
                        "must be the tensor given as `{}`, which holds the output's initial values",
                        arg.name
                    ),
                ));
            }
        }
    }
    if y.pitch.is_some() && !op.out_rows {
        return Err(Error::arg("out", "must be contiguous".to_string()));
    }
    Ok(())
}

/// A shape as Python writes a tuple: `(2, 3)`, `(5,)`, `()`.
fn tuple(shape: &[usize]) -> String {
    match shape {
        [d] => format!("({d},)"),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}
