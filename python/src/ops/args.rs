//! The arguments of one call, read from Python as the operation's description says, and read
//! back by name, typed, by the operation.

use super::{Draw, Dtype, Dtypes, Op, Ty};
use cudarc::driver::CudaStream;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;
use streamline::engine::External;
use streamline::{Error, Result};

/// A caller's device tensor, as the Python layer took it from a CUDA array of the call's
/// device after checking its dtype, rank and layout.
#[derive(Clone, Debug)]
pub struct TensorArg {
    pub ptr: u64,
    pub shape: Vec<usize>,
    pub dtype: Dtype,
    /// Elements from one row to the next, for a matrix taken at any row pitch.
    pub pitch: Option<usize>,
}

impl TensorArg {
    /// Reads `(address, shape, dtype, row pitch or None)`.
    pub fn extract(name: &str, v: &Bound<'_, PyAny>) -> PyResult<TensorArg> {
        let (ptr, shape, dtype, pitch): (u64, Vec<usize>, String, Option<usize>) = v
            .extract()
            .map_err(|e| PyTypeError::new_err(format!("{name}: {e}")))?;
        let dtype = Dtype::parse(&dtype).ok_or_else(|| {
            PyTypeError::new_err(format!("{name}: dtype {dtype} is not supported"))
        })?;
        Ok(TensorArg {
            ptr,
            shape,
            dtype,
            pitch,
        })
    }

    /// Elements from the first to one past the last.
    pub fn len(&self) -> usize {
        match (self.pitch, self.shape.as_slice()) {
            (_, [0, _] | [_, 0]) => 0,
            (Some(p), [rows, cols]) => (rows - 1) * p + cols,
            _ => self.shape.iter().product(),
        }
    }

    /// Elements from one row to the next of a matrix: its pitch, or its row length (at least 1).
    pub fn row_stride(&self) -> usize {
        self.pitch
            .unwrap_or_else(|| self.shape.last().copied().unwrap_or(1))
            .max(1)
    }

    /// The tensor as elements of `T` (its dtype, checked by the description), used on `s`.
    pub fn on<T>(&self, s: &Arc<CudaStream>) -> External<T> {
        // SAFETY: the Python layer took `ptr` and the extent from a CUDA array of this device,
        // checked to be of this dtype and layout against the operation's description, which the
        // caller holds for the call; its owner (PyTorch's caching allocator) frees it only in
        // the order of the stream it was used on, or after `record_stream`, as for torch's own
        // operations.
        unsafe { External::new(self.ptr, self.len(), s) }
    }
}

/// An argument's value.
#[derive(Debug)]
enum Value {
    Tensor(TensorArg),
    Rows(Vec<[f32; 5]>),
    Int(i64),
    Float(f64),
    Bool(bool),
    Str(String),
    Ints(Vec<i64>),
    Floats(Vec<f64>),
    Draw(Draw),
    None,
}

/// Boxes of `roi_align`: rows the host checks, or a `(K, 5)` float32 tensor on the device.
pub enum Boxes<'a> {
    Host(&'a [[f32; 5]]),
    Device(&'a TensorArg),
}

/// The arguments of one call of an operation, in its description's order.
pub struct Args {
    op: &'static Op,
    values: Vec<Value>,
}

impl Args {
    /// Reads `args` as `op` describes them; direct-call arguments at the end may be left out.
    /// A value of the wrong type is a `TypeError` naming the argument.
    pub fn extract(op: &'static Op, args: &Bound<'_, PyTuple>) -> PyResult<Args> {
        let schema = op.args.iter().filter(|a| !matches!(a.ty, Ty::Draw)).count();
        if args.len() < schema || args.len() > op.args.len() {
            return Err(PyTypeError::new_err(format!(
                "{}: takes {} arguments, got {}",
                op.name,
                schema,
                args.len()
            )));
        }
        let mut values = Vec::with_capacity(op.args.len());
        for (i, a) in op.args.iter().enumerate() {
            let v = match args.get_item(i) {
                Ok(v) => v,
                Err(_) => {
                    values.push(Value::None);
                    continue;
                }
            };
            let name = a.name;
            let bad = |e: PyErr| PyTypeError::new_err(format!("{name}: {e}"));
            let value = match a.ty {
                _ if v.is_none() && a.ty.optional() => Value::None,
                Ty::Tensor(t) | Ty::OptTensor(t) => {
                    let x = TensorArg::extract(name, &v)?;
                    let (lo, hi) = t.ranks;
                    let dtype_ok = match t.dtypes {
                        Dtypes::Of(d) => d.contains(&x.dtype),
                        Dtypes::Like(other) => values.iter().zip(op.args).any(|(v, a)| {
                            a.name == other && matches!(v, Value::Tensor(o) if o.dtype == x.dtype)
                        }),
                    };
                    if !dtype_ok {
                        let allowed = match t.dtypes {
                            Dtypes::Of(d) => {
                                d.iter().map(|d| d.name()).collect::<Vec<_>>().join(", ")
                            }
                            Dtypes::Like(other) => format!("the dtype of {other}"),
                        };
                        return Err(PyTypeError::new_err(format!(
                            "{name}: dtype {} is not supported; allowed: {allowed}",
                            x.dtype.name()
                        )));
                    }
                    if !(lo..=hi).contains(&x.shape.len()) {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "{name}: has {} dimensions (shape {:?}); allowed: {lo} to {hi}",
                            x.shape.len(),
                            x.shape
                        )));
                    }
                    if x.pitch.is_some() && !t.rows {
                        return Err(pyo3::exceptions::PyValueError::new_err(format!(
                            "{name}: must be contiguous"
                        )));
                    }
                    Value::Tensor(x)
                }
                Ty::Boxes => match v.extract::<Vec<[f32; 5]>>() {
                    Ok(rows) => Value::Rows(rows),
                    Err(_) => Value::Tensor(TensorArg::extract(name, &v)?),
                },
                Ty::Int => Value::Int(v.extract().map_err(bad)?),
                Ty::Float | Ty::OptFloat => Value::Float(v.extract().map_err(bad)?),
                Ty::Bool => Value::Bool(v.extract().map_err(bad)?),
                Ty::Str => Value::Str(v.extract().map_err(bad)?),
                Ty::Ints => Value::Ints(v.extract().map_err(bad)?),
                Ty::Floats => Value::Floats(v.extract().map_err(bad)?),
                Ty::Draw => Value::Draw(v.extract().map_err(bad)?),
            };
            values.push(value);
        }
        Ok(Args { op, values })
    }

    fn get(&self, name: &'static str) -> Result<&Value> {
        self.op
            .args
            .iter()
            .position(|a| a.name == name)
            .and_then(|i| self.values.get(i))
            .ok_or_else(|| Error::arg(name, format!("{} has no such argument", self.op.name)))
    }

    fn wrong(&self, name: &'static str, what: &str) -> Error {
        Error::arg(name, format!("{} takes {what} here", self.op.name))
    }

    pub fn tensor(&self, name: &'static str) -> Result<&TensorArg> {
        match self.get(name)? {
            Value::Tensor(t) => Ok(t),
            _ => Err(self.wrong(name, "a tensor")),
        }
    }

    pub fn opt_tensor(&self, name: &'static str) -> Result<Option<&TensorArg>> {
        match self.get(name)? {
            Value::Tensor(t) => Ok(Some(t)),
            Value::None => Ok(None),
            _ => Err(self.wrong(name, "a tensor or None")),
        }
    }

    pub fn boxes(&self, name: &'static str) -> Result<Boxes<'_>> {
        match self.get(name)? {
            Value::Tensor(t) => Ok(Boxes::Device(t)),
            Value::Rows(r) => Ok(Boxes::Host(r)),
            _ => Err(self.wrong(name, "boxes")),
        }
    }

    pub fn int(&self, name: &'static str) -> Result<i64> {
        match self.get(name)? {
            Value::Int(v) => Ok(*v),
            _ => Err(self.wrong(name, "an integer")),
        }
    }

    /// An integer that must be at least 0.
    pub fn usize(&self, name: &'static str) -> Result<usize> {
        let v = self.int(name)?;
        usize::try_from(v).map_err(|_| Error::arg(name, format!("{v}: must be >= 0")))
    }

    pub fn f32(&self, name: &'static str) -> Result<f32> {
        match self.get(name)? {
            Value::Float(v) => Ok(*v as f32),
            _ => Err(self.wrong(name, "a number")),
        }
    }

    pub fn opt_f32(&self, name: &'static str) -> Result<Option<f32>> {
        match self.get(name)? {
            Value::Float(v) => Ok(Some(*v as f32)),
            Value::None => Ok(None),
            _ => Err(self.wrong(name, "a number or None")),
        }
    }

    pub fn bool(&self, name: &'static str) -> Result<bool> {
        match self.get(name)? {
            Value::Bool(v) => Ok(*v),
            _ => Err(self.wrong(name, "a bool")),
        }
    }

    pub fn str(&self, name: &'static str) -> Result<&str> {
        match self.get(name)? {
            Value::Str(v) => Ok(v),
            _ => Err(self.wrong(name, "a string")),
        }
    }

    /// Integers that must each be at least 0.
    pub fn usizes(&self, name: &'static str) -> Result<Vec<usize>> {
        match self.get(name)? {
            Value::Ints(v) => v
                .iter()
                .map(|&x| {
                    usize::try_from(x).map_err(|_| Error::arg(name, format!("{x}: must be >= 0")))
                })
                .collect(),
            _ => Err(self.wrong(name, "a list of integers")),
        }
    }

    /// Exactly `N` integers, each at least 0.
    pub fn usize_array<const N: usize>(&self, name: &'static str) -> Result<[usize; N]> {
        let v = self.usizes(name)?;
        <[usize; N]>::try_from(v.as_slice())
            .map_err(|_| Error::arg(name, format!("{v:?}: needs {N} values")))
    }

    pub fn f32s(&self, name: &'static str) -> Result<Vec<f32>> {
        match self.get(name)? {
            Value::Floats(v) => Ok(v.iter().map(|&x| x as f32).collect()),
            _ => Err(self.wrong(name, "a list of numbers")),
        }
    }

    /// The given draw, if any.
    pub fn draw(&self, name: &'static str) -> Result<Option<&Draw>> {
        match self.get(name)? {
            Value::Draw(d) => Ok(Some(d)),
            Value::None => Ok(None),
            _ => Err(self.wrong(name, "a draw or None")),
        }
    }
}

impl Ty {
    /// Whether `None` is a value of it.
    fn optional(&self) -> bool {
        matches!(self, Ty::OptTensor(_) | Ty::OptFloat | Ty::Draw)
    }
}
