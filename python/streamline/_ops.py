"""Streamline's operations as Python sees them, made from their one description.

The native module describes each operation once (``_native.operations()``): its arguments, the
dtypes and ranks of its tensors, and its output's dtype; the output's shape comes from the
library's own rules (``_native.output_shape``), after every check that needs no device. From
that description this module makes, for every operation:

- :func:`run`: the direct call on CUDA tensors or ``__cuda_array_interface__`` objects: each
  tensor checked and named, the output made or checked, the stream chosen, the work queued
  without a sync;
- :func:`call`: :func:`run`, or while ``torch.compile`` traces, the custom operator;
- the custom operator ``torch.ops.streamline.<name>`` (when torch is installed): its schema,
  its implementation (:func:`run`) and its fake implementation (the output's shape and dtype,
  no data touched), with the mutated arguments declared.

:mod:`streamline.functional` only turns torchvision's arguments into the description's.
"""
from . import _native
from ._arrays import _torch_dtype_name, array, device_of, disjoint, output, stream_handle
from ._boxes import roi_boxes

LIB = "streamline"

#: every rank a tensor can have here (the native call checks an output's exact shape)
_ANY_RANK = range(0, 33)

#: the torch module, once the operators are registered
TORCH = None


class Arg:
    """One argument of an operation: ``kind`` is ``tensor``, ``tensor?``, ``boxes``, ``value``
    or ``host`` (direct calls only); tensors take ``dtypes`` (or the dtype of the argument
    ``like``) and a rank in ``ranks``."""

    __slots__ = ("name", "kind", "dtypes", "like", "ranks", "mutated", "rows", "initial_output")

    def __init__(self, name, kind, dtypes, like, ranks, mutated, rows, initial_output):
        self.name, self.kind, self.dtypes, self.like = name, kind, tuple(dtypes), like
        self.ranks = range(ranks[0], ranks[1] + 1)
        self.mutated, self.rows, self.initial_output = mutated, rows, initial_output

    @property
    def is_tensor(self):
        return self.kind in ("tensor", "tensor?")


class Op:
    """One operation: its name, torch schema, arguments and output."""

    __slots__ = ("name", "schema", "args", "out_dtype", "out_like", "out_rows", "in_place", "tensors", "boxes")

    def __init__(self, name, schema, args, out_dtype, out_like, out_rows, in_place):
        self.name, self.schema = name, schema
        self.args = tuple(Arg(*a) for a in args)
        self.out_dtype, self.out_like, self.out_rows, self.in_place = out_dtype, out_like, out_rows, in_place
        #: ``(index, Arg)`` of the tensor arguments, and the index of the boxes (or ``None``)
        self.tensors = tuple((i, a) for i, a in enumerate(self.args) if a.is_tensor)
        self.boxes = next((i for i, a in enumerate(self.args) if a.kind == "boxes"), None)

    def __repr__(self):
        return f"streamline::{self.name}{self.schema}"


#: name -> :class:`Op`, every operation the native module describes
OPS = {row[0]: Op(*row) for row in _native.operations()}


def signed(seed):
    """A 64-bit seed as the signed int64 a schema's ``int`` holds."""
    seed &= 2**64 - 1
    return seed - 2**64 if seed >= 2**63 else seed


def _tensor(a, rows=False):
    """An :class:`Array` as the native module takes a tensor: ``(address, shape, dtype, row
    pitch)``, the pitch ``None`` unless taken as a matrix of padded ``rows``."""
    return a.ptr, a.shape, a.dtype, (a.strides[0] if rows and a.strides else None)


def tracing():
    """Whether ``torch.compile`` is tracing: then calls go through the custom operators, which
    the compiled graph calls."""
    return TORCH is not None and TORCH.compiler.is_compiling()


def call(name, args, out=None, stream=None, device=None):
    """Operation ``name`` on ``args`` (the schema's order) into ``out`` (made if ``None``):
    directly, or through its custom operator while ``torch.compile`` traces."""
    if tracing():
        return through_operator(name, args, out, stream)
    return run(name, args, out, stream, device)[0]


def through_operator(name, args, out=None, stream=None):
    """``torch.ops.streamline.<name>(*args)``, copied into ``out`` if given."""
    if stream is not None:
        raise ValueError("stream: cannot be given under torch.compile or to a call that records gradients; "
                         "use torch.cuda.stream(...) around the call")
    y = op(name)(*args)
    if out is None:
        return y
    out.copy_(y)
    return out


def run(name, args, out=None, stream=None, device=None):
    """Operation ``name`` on ``args`` (the description's order, direct-call arguments
    included), queued on ``stream`` (PyTorch's current one by default) without a sync. Returns
    ``(output, extra)``: ``extra`` is what the operation gives back besides (the augmentation's
    host draw), else ``None``."""
    spec = OPS[name]
    values = list(args)
    inputs = []  # (name, Array) of the tensors read, in the description's order
    like = {}
    for i, a in spec.tensors:
        v = args[i]
        if v is None:
            continue
        dtypes = a.dtypes if a.like is None else (like[a.like],)
        if a.initial_output and v is out:
            # The output itself holds its initial values: checked as the output.
            values[i] = _tensor(array(v, "out", dtypes, a.ranks, writable=True, row_strided=a.rows), a.rows)
            continue
        x = array(v, a.name, dtypes, a.ranks, writable=a.mutated, row_strided=a.rows)
        like[a.name] = x.dtype
        inputs.append((a.name, x))
        values[i] = _tensor(x, a.rows)
    dev = device_of(inputs, device)
    keep = None
    if spec.boxes is not None:
        values[spec.boxes], keep = roi_boxes(args[spec.boxes], dev, _tensor)
    values = tuple(values)
    dtype = spec.out_dtype or like[spec.out_like]
    if out is None:
        out, y = output(None, inputs, _native.output_shape(name, values), dtype, dev, row_strided=spec.out_rows)
    else:
        # Its shape is checked by the native call, before any device is touched.
        y = array(out, "out", (dtype,), _ANY_RANK, writable=True, row_strided=spec.out_rows)
        if y.device is not None and y.device != dev:
            raise ValueError(f"out: is on cuda:{y.device}; the inputs are on cuda:{dev}")
    if not (spec.in_place and y.ptr == inputs[0][1].ptr):
        disjoint("out", y, inputs)
    s = stream_handle(stream, dev, inputs + [("out", y)])
    if keep is not None:
        keep(stream, s)
    return out, _native.call(name, dev, s, values, _tensor(y, spec.out_rows))


def op(name):
    """``torch.ops.streamline.<name>``."""
    return getattr(TORCH.ops.streamline, name)


def _implementation(spec):
    """The operator's CUDA implementation: the direct call, with an output made from the
    argument that holds its initial values (cloned: an operator does not write its inputs)."""
    initial = [i for i, a in enumerate(spec.args) if a.initial_output]

    def implementation(*args):
        args, out = list(args), None
        for i in initial:
            if args[i] is not None:
                out = args[i] = args[i].clone()
        return run(spec.name, args, out)[0]

    return implementation


def _fake(spec):
    """The operator's fake implementation: an empty tensor of the output's shape (the
    description's rule on the arguments' shapes) and dtype, on the first tensor's device."""

    def fake(*args):
        values, first, tensors = [], None, {}
        for a, v in zip(spec.args, args):
            if (a.is_tensor or a.kind == "boxes") and v is not None:
                first = v if first is None else first
                tensors[a.name] = v
                # Boxes of any dtype are converted to float32 before a launch.
                dtype = "float32" if a.kind == "boxes" else _torch_dtype_name(v.dtype) or str(v.dtype)
                values.append((0, tuple(int(d) for d in v.shape), dtype, None))
            else:
                values.append(v)
        shape = _native.output_shape(spec.name, tuple(values))
        dtype = getattr(TORCH, spec.out_dtype) if spec.out_dtype else tensors[spec.out_like].dtype
        return first.new_empty(shape, dtype=dtype)

    return fake


def _roi_align_context(ctx, inputs, output):
    x, boxes, size, scale, ratio, aligned = inputs
    ctx.save_for_backward(boxes)
    ctx.args = (list(x.shape), list(size), scale, ratio, aligned, TORCH.are_deterministic_algorithms_enabled())


def _roi_align_backward(ctx, grad):
    (boxes,) = ctx.saved_tensors
    shape, size, scale, ratio, aligned, det = ctx.args
    gx = op("roi_align_backward")(grad.contiguous(), boxes, shape, size, scale, ratio, aligned, det)
    return gx, None, None, None, None, None


_registered = False


def register(torch):
    """Defines ``torch.ops.streamline.*`` from the description (once)."""
    global _registered, TORCH
    if _registered:
        return
    lib = torch.library.Library(LIB, "DEF")
    for spec in OPS.values():
        lib.define(spec.name + spec.schema)
        lib.impl(spec.name, _implementation(spec), "CUDA")
        torch.library.register_fake(f"{LIB}::{spec.name}", _fake(spec), lib=lib)
    torch.library.register_autograd(f"{LIB}::roi_align", _roi_align_backward, setup_context=_roi_align_context,
                                    lib=lib)
    # The library must outlive this function: torch drops the definitions with it.
    register.lib = lib
    _registered = True
    TORCH = torch
