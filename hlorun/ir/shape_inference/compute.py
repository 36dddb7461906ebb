"""Shape inference for the computing ops: dot, reduce, reduce-window,
select-and-scatter, convolution, fft, triangular-solve, cholesky and batch
norm (XLA's ``ShapeInference``)."""

from __future__ import annotations

from typing import Sequence

from ..attrs import ConvDims, WindowDim
from ..shape import UNBOUNDED_SIZE, Shape
from .common import (InferenceError, compatible, compatible_ignoring_fp, dims_compatible,
                     dynamic_flags, expect_array, higher_precision, human, is_complex, is_float,
                     is_unbounded, make, same_dimensions, same_type_ignoring_fp)


def infer_dot(lhs: Shape, rhs: Shape, lc: Sequence[int], rc: Sequence[int],
              lb: Sequence[int], rb: Sequence[int], preferred: str | None = None) -> Shape:
    """``InferDotOpShape``: batch dims, then lhs free dims, then rhs free dims;
    the element type is ``preferred`` (the instruction's own) when given."""
    expect_array(lhs, "lhs of dot")
    expect_array(rhs, "rhs of dot")
    dnums = (f"lhs_contracting_dimensions={list(lc)} rhs_contracting_dimensions={list(rc)} "
             f"lhs_batch_dimensions={list(lb)} rhs_batch_dimensions={list(rb)}")
    for rank, c, b in ((lhs.rank, lc, lb), (rhs.rank, rc, rb)):
        if not all(0 <= d < rank for d in list(c) + list(b)):
            raise InferenceError(f"A dimension number is out of range in Dot: {dnums}. "
                                 f"{lhs} {rhs}")
        if len(set(c)) != len(c) or len(set(b)) != len(b):
            raise InferenceError(f"A dimension number is not unique in Dot: {dnums}.")
    what = f"Cannot infer shape for dot operation: {human(lhs)} <dot> {human(rhs)}."
    if len(lc) != len(rc):
        raise InferenceError(f"{what} Must specify the same number of contracting dimensions "
                             "for lhs and rhs.")
    for a, b in zip(lc, rc):
        x, y = lhs.dimensions[a], rhs.dimensions[b]
        if not (x == y or UNBOUNDED_SIZE in (x, y)):
            raise InferenceError(f"{what} Contracting dimension sizes are not compatible.")
    if len(lb) != len(rb):
        raise InferenceError(f"{what} Must the same number of batch dimensions for lhs and rhs.")
    for a, b in zip(lb, rb):
        x, y = lhs.dimensions[a], rhs.dimensions[b]
        if not (x == y or UNBOUNDED_SIZE in (x, y)):
            raise InferenceError(f"{what} Batch dimension sizes are not compatible.")
    lf, rf = dynamic_flags(lhs), dynamic_flags(rhs)
    dims = [lhs.dimensions[d] for d in lb]
    dyn = [lf[d] for d in lb]
    for d in range(lhs.rank):
        if d not in lc and d not in lb:
            dims.append(lhs.dimensions[d])
            dyn.append(lf[d])
    for d in range(rhs.rank):
        if d not in rc and d not in rb:
            dims.append(rhs.dimensions[d])
            dyn.append(rf[d])
    et = preferred or higher_precision(lhs.element_type, rhs.element_type)
    return make(et, dims, dyn)


def verify_reducer(params: Sequence[Shape], result: Shape, inits: Sequence[Shape],
                   input_types: Sequence[str], inputs: int) -> None:
    """``VerifyReducerShape``: ``(acc..., x...) -> acc`` with scalar
    accumulators matching the init values and the inputs' element types."""
    if len(params) != inputs * 2:
        raise InferenceError(f"Reduction function must take {inputs * 2} parameters, but takes "
                             f"{len(params)} parameter(s).")
    if result.is_array:
        if inputs != 1:
            raise InferenceError(f"Reduction function must produce a tuple with {inputs} "
                                 "elements, but produces a scalar")
        accs = [result]
    elif result.is_tuple:
        if len(result.tuple_shapes) != inputs:
            raise InferenceError(f"Reduction function must produce a tuple with {inputs} "
                                 f"elements, but has {len(result.tuple_shapes)} elements")
        accs = list(result.tuple_shapes)
    else:
        raise InferenceError("Reduction function must produce a scalar or tuple of scalars, "
                             f"but has shape: {human(result)}")
    for acc in accs:
        if acc.dimensions:
            raise InferenceError("Reduction function must return a scalar or tuple of scalars "
                                 f"but returns shape: {human(result)}")
    for i in range(inputs):
        if not compatible(accs[i], params[i]):
            raise InferenceError(f"Reduction function's {i}-th parameter shape differs from the "
                                 f"result shape: {human(params[i])} vs {human(accs[i])}")
        if not compatible_ignoring_fp(accs[i], inits[i]):
            raise InferenceError(f"Reduction function's accumulator shape at index {i} differs "
                                 f"from the init_value shape: {human(accs[i])} vs "
                                 f"{human(inits[i])}")
        elem = make(input_types[i], [])
        if not compatible_ignoring_fp(elem, params[inputs + i]):
            raise InferenceError(f"Reduction function's {inputs + i}-th parameter shape differs "
                                 f"from the input type element type: "
                                 f"{human(params[inputs + i])} vs {human(elem)}")
        if not compatible_ignoring_fp(accs[i], params[inputs + i]):
            raise InferenceError(f"Reduction function's {inputs + i}-th parameter shape must "
                                 f"match the result shape, but got {human(params[inputs + i])} "
                                 f"vs {human(accs[i])}.")


def infer_reduce(args: Sequence[Shape], dims: Sequence[int], params: Sequence[Shape],
                 result: Shape) -> Shape:
    """``InferReduceShape``: N inputs, N init values, ``to_apply`` a reducer."""
    if not args:
        raise InferenceError("Reduce must have at least 2 arguments, has 0")
    if len(args) % 2:
        raise InferenceError(f"Reduce must have an even number of arguments, has {len(args)}")
    n = len(args) // 2
    inputs, inits = args[:n], args[n:]
    for s in inputs:
        if not s.is_array:
            raise InferenceError(f"Expected array argument for operand of reduce, but got "
                                 f"{human(s)}.")
    for i in range(1, n):
        if not same_dimensions(inputs[0], inputs[i]):
            raise InferenceError("All reduced tensors must have compatible dimension. Tensor at "
                                 f"index 0 has shape {human(inputs[0])}, and tensor at index "
                                 f"{i} has shape {human(inputs[i])}.")
    arg = inputs[0]
    for d in dims:
        if d < 0 or d >= arg.rank:
            raise InferenceError(f"Reducing out-of-bounds dimension {d} in shape {human(arg)}.")
    verify_reducer(params, result, inits, [s.element_type for s in inputs], n)
    if len(set(dims)) != len(dims):
        raise InferenceError(f"Duplicate reduction dimension: {dims}")
    flags = dynamic_flags(arg)
    keep = [i for i in range(arg.rank) if i not in dims]
    new_dims = [arg.dimensions[i] for i in keep]
    new_dyn = [flags[i] for i in keep]
    if result.is_scalar:
        return make(result.element_type, new_dims, new_dyn)
    return Shape.tuple([make(s.element_type, new_dims, new_dyn) for s in result.tuple_shapes])


def _dilated(bound: int, dilation: int) -> int:
    return 0 if bound == 0 else (bound - 1) * dilation + 1


def _strided(bound: int, window: int, stride: int) -> int:
    if bound <= 0 or window > bound:
        return 0
    return (bound - window) // stride + 1


def window_output_shape(base: Shape, window: Sequence[WindowDim], et: str) -> Shape:
    """``InferWindowOutputShape``."""
    if len(window) != base.rank:
        raise InferenceError(f"Window has dimension {len(window)} but base shape has dimension "
                             f"{base.rank}.")
    dims = []
    for i, w in enumerate(window):
        if w.size <= 0:
            raise InferenceError("Window has a non-positive dimension.")
        if w.stride <= 0:
            raise InferenceError("Window has a non-positive stride.")
        if w.base_dilation < 1:
            raise InferenceError("Window has a non-positive base area dilation factor.")
        if w.window_dilation < 1:
            raise InferenceError("Window has a non-positive window dilation factor.")
        if is_unbounded(base, i):
            dims.append(UNBOUNDED_SIZE)
            continue
        padded = w.padding_low + _dilated(base.dimensions[i], w.base_dilation) + w.padding_high
        dims.append(_strided(padded, _dilated(w.size, w.window_dilation), w.stride))
    return make(et, dims, dynamic_flags(base))


def infer_reduce_window(inputs: Sequence[Shape], inits: Sequence[Shape],
                        window: Sequence[WindowDim], params: Sequence[Shape],
                        result: Shape) -> Shape:
    """``InferReduceWindowShape`` (variadic)."""
    for i in range(1, len(inputs)):
        if not same_dimensions(inputs[0], inputs[i]):
            raise InferenceError("All reduced tensors must have the same dimension. Tensor 0 "
                                 f"has shape {human(inputs[0])}, Tensor {i} has shape "
                                 f"{human(inputs[i])}")
    verify_reducer(params, result, inits, [s.element_type for s in inputs], len(inputs))
    outs = []
    for s, init in zip(inputs, inits):
        expect_array(s, "operand of reduce-window")
        outs.append(window_output_shape(s, window, init.element_type))
    if result.is_scalar:
        return outs[0]
    return Shape.tuple(outs)


def infer_select_and_scatter(operand: Shape, select: tuple[list[Shape], Shape],
                             window: Sequence[WindowDim], source: Shape, init: Shape,
                             scatter: tuple[list[Shape], Shape]) -> Shape:
    """``InferSelectAndScatterShape``: the operand's shape."""
    expect_array(operand, "operand of select-and-scatter")
    sp, sr = select
    if len(sp) != 2:
        raise InferenceError(f"Select function must take 2 parameters, but takes {len(sp)} "
                             "parameter(s).")
    if not compatible(sr, make("pred", [])):
        raise InferenceError("Select function must have rank-0 PRED result.")
    elem = make(operand.element_type, [])
    for which, p in (("first", sp[0]), ("second", sp[1])):
        if not compatible_ignoring_fp(elem, p):
            raise InferenceError(f"Select function's {which} parameter shape currently must "
                                 f"match the operand element shape, but got {human(p)} vs "
                                 f"{human(elem)}.")
    verify_reducer(scatter[0], scatter[1], [init], [source.element_type], 1)
    windowed = window_output_shape(operand, window, operand.element_type)
    if not compatible_ignoring_fp(source, windowed):
        raise InferenceError("Source shape does not match the shape of window-reduced operand: "
                             f"source({human(source)}), window-reduced "
                             f"operand({human(windowed)}).")
    return operand


def infer_convolution(lhs: Shape, rhs: Shape, fgc: int, bgc: int,
                      window: Sequence[WindowDim], dn: ConvDims,
                      preferred: str | None = None) -> Shape:
    """``InferConvolveShape`` (forward kind, as the verifier uses it)."""
    expect_array(lhs, "lhs of convolution")
    expect_array(rhs, "rhs of convolution")
    if fgc <= 0:
        raise InferenceError(f"feature_group_count must be a positive number, got {fgc}")
    if bgc <= 0:
        raise InferenceError(f"batch_group_count must be a positive number, got {bgc}")
    if bgc > 1 and fgc > 1:
        raise InferenceError(f"both batch_group_count {bgc} and feature_group_count {fgc} "
                             "cannot be greater than 1")
    nsp = len(dn.input_spatial)
    if len(window) != nsp:
        raise InferenceError("Window must have same number of dimensions as dimension numbers.")
    n = nsp + 2
    if lhs.rank != n:
        raise InferenceError(f"The LHS argument to a convolution should have rank {n}; lhs: "
                             f"{human(lhs)}.")
    if rhs.rank != n:
        raise InferenceError(f"The RHS argument to a convolution should have rank {n}; rhs: "
                             f"{human(rhs)}.")
    in_sp = [lhs.dimensions[d] for d in dn.input_spatial]
    in_feat = lhs.dimensions[dn.input_feature]
    in_batch = lhs.dimensions[dn.input_batch]
    k_sp = [rhs.dimensions[d] for d in dn.kernel_spatial]
    k_in = rhs.dimensions[dn.kernel_input_feature]
    k_out = rhs.dimensions[dn.kernel_output_feature]
    pair = f"<conv>({human(lhs)}, {human(rhs)})"
    if k_out % bgc:
        raise InferenceError(f"Expected output feature dimension size (value {k_out}) to be a "
                             f"multiple of batch group count {bgc}; got {pair}")
    if k_out % fgc:
        raise InferenceError(f"Expected output feature dimension (value {k_out}) to be "
                             f"divisible by feature_group_count (value {fgc}); got {pair}")
    if in_batch % bgc:
        raise InferenceError(f"Expected input batch dimension (value {in_batch}) to be "
                             f"divisible by batch_group_count (value {bgc}); got {pair}")
    if in_feat % fgc or in_feat // fgc != k_in:
        raise InferenceError(
            f"Expected LHS feature dimension (value {in_feat}) to be a multiple of "
            f"feature_group_count (value {fgc}), and LHS feature dimension / "
            f"feature_group_count = RHS feature dimension (value {k_in}); got {pair}")
    if k_sp != [w.size for w in window]:
        raise InferenceError(f"Window dimensions do not match RHS shape: RHS shape: "
                             f"{human(rhs)}, window sizes {[w.size for w in window]}.")
    base = make(lhs.element_type, in_sp, [d == UNBOUNDED_SIZE for d in in_sp])
    out_sp = window_output_shape(base, window, lhs.element_type)
    dims = [0] * n
    dims[dn.output_batch] = in_batch // bgc
    dims[dn.output_feature] = k_out
    for i, d in enumerate(dn.output_spatial):
        dims[d] = out_sp.dimensions[i]
    dyn = [False] * n
    lf, rf = dynamic_flags(lhs), dynamic_flags(rhs)
    for i in range(n):
        if lf[i]:
            if i == dn.input_batch:
                dyn[dn.output_batch] = True
            elif i != dn.input_feature and i in dn.input_spatial:
                dyn[dn.output_spatial[dn.input_spatial.index(i)]] = True
        if rf[i]:
            if i == dn.kernel_output_feature:
                raise InferenceError("Dynamic output feature dim on convolution kernel is not "
                                     f"supported: rhs shape is {rhs}")
            if i != dn.kernel_input_feature and i in dn.kernel_spatial:
                dyn[dn.output_spatial[dn.kernel_spatial.index(i)]] = True
    et = preferred or higher_precision(lhs.element_type, rhs.element_type)
    return make(et, dims, dyn)


def infer_fft(s: Shape, fft_type: str, length: Sequence[int]) -> Shape:
    """``InferFftShape``."""
    rank = len(length)
    if rank < 1 or rank > 3:
        raise InferenceError(f"FFT only supports ranks 1-3; got {rank}.")
    if s.rank < rank:
        raise InferenceError(f"FFT of rank {rank} requires input of at least same rank; got "
                             f"input of rank {s.rank}")
    t = s.element_type
    if fft_type in ("FFT", "IFFT"):
        if not is_complex(t):
            raise InferenceError(f"{fft_type} requires complex input type, found {t.upper()}.")
        return s
    if fft_type == "RFFT":
        if t not in ("f32", "f64"):
            raise InferenceError(f"RFFT requires F32 or F64 input type, found {t.upper()}.")
        for i in range(rank):
            d = s.rank - rank + i
            if s.dimensions[d] != UNBOUNDED_SIZE and s.dimensions[d] != length[i]:
                raise InferenceError(f"RFFT requires innermost dimensions match fft_length but "
                                     f"dimension {d} is {s.dimensions[d]} and should be "
                                     f"{length[i]}.")
        dims = list(s.dimensions)
        if length[-1]:
            dims[-1] = length[-1] // 2 + 1
        return make("c64" if t == "f32" else "c128", dims, dynamic_flags(s))
    if fft_type == "IRFFT":
        if not is_complex(t):
            raise InferenceError(f"IRFFT requires complex input type, found {t.upper()}.")
        for i in range(rank - 1):
            d = s.rank - rank + i
            if s.dimensions[d] != length[i]:
                raise InferenceError("IRFFT requires all but one innermost dimensions match "
                                     f"fft_length, but dimension {d} is {s.dimensions[d]} and "
                                     f"should be {length[i]}.")
        last = s.dimensions[-1]
        if (last or length[-1]) and last != UNBOUNDED_SIZE and last != length[-1] // 2 + 1:
            raise InferenceError(f"IRFFT requires innermost dimension matches fft_length/2+1, "
                                 f"but dimension {s.rank - 1} is {last} and should be "
                                 f"{length[-1] // 2 + 1}.")
        dims = list(s.dimensions)
        dims[-1] = length[-1]
        return make("f32" if t == "c64" else "f64", dims, dynamic_flags(s))
    raise InferenceError(f"Unexpected fft_type: {fft_type}")


def infer_triangular_solve(a: Shape, b: Shape, left_side: bool) -> Shape:
    """``InferTriangularSolveShape``: the shape of ``b``."""
    if not (is_float(a.element_type) or is_complex(a.element_type)) \
            or a.element_type != b.element_type:
        raise InferenceError("Expected element types in shape to be floating or complex and "
                             f"identical for TriangularSolve; got {a.element_type.upper()} and "
                             f"{b.element_type.upper()}.")
    if a.rank < 2:
        raise InferenceError(f"The 'a' argument to TriangularSolve must have rank >= 2, got "
                             f"shape {a}")
    if b.rank != a.rank:
        raise InferenceError(f"Arguments to triangular solve must have equal rank; got {b} and "
                             f"{a}.")
    if a.dimensions[-2] != a.dimensions[-1] and UNBOUNDED_SIZE not in a.dimensions[-2:]:
        raise InferenceError(f"The two minor dimensions of 'a' must have equal size, got {a}.")
    shared = b.dimensions[-2 if left_side else -1]
    if a.dimensions[-1] != shared and UNBOUNDED_SIZE not in (a.dimensions[-1], shared):
        raise InferenceError("The shared dimension of 'a' and 'b' does not match, got shapes "
                             f"{a} and {b}")
    if a.dimensions[:-2] != b.dimensions[:-2]:
        raise InferenceError("The leading batch dimensions of the arguments to triangular "
                             f"solve must be equal; got {b} and {a}.")
    return b


def infer_cholesky(a: Shape) -> Shape:
    if not (is_float(a.element_type) or is_complex(a.element_type)):
        raise InferenceError("Expected element type in shape to be floating or complex for "
                             f"Cholesky; got {a.element_type.upper()}.")
    if a.rank < 2:
        raise InferenceError(f"The 'a' argument to Cholesky must have rank >= 2, got shape {a}")
    if a.dimensions[-2] != a.dimensions[-1] and UNBOUNDED_SIZE not in a.dimensions[-2:]:
        raise InferenceError(f"The two minor dimensions of 'a' must have compatible size, got "
                             f"{a}.")
    return a


def infer_batch_norm(kind: str, shapes: Sequence[Shape], feature_index: int) -> Shape:
    """``InferBatchNorm{Training,Inference,Grad}Shape``: rank-1 scale/offset/
    mean/variance vectors of the feature dimension's size; training and grad
    return (operand-shaped, feature vector, feature vector)."""
    operand = shapes[0]
    expect_array(operand, f"operand of batch norm {kind}")
    if feature_index < 0 or feature_index >= operand.rank:
        raise InferenceError(f"batch-norm-{kind} expects feature_index to be smaller than the "
                             f"rank of operand_shape; got feature_index {feature_index}, and "
                             f"rank {operand.rank}.")
    if not is_float(operand.element_type):
        raise InferenceError(f"The operand to batch-norm-{kind} must have a floating point "
                             f"element type, but the shape is {operand.element_type.upper()}.")
    features = operand.dimensions[feature_index]
    vectors = shapes[1:4] if kind == "grad" else shapes[1:]
    for v in vectors:
        expect_array(v, f"input of batch norm {kind}")
        if v.rank != 1:
            raise InferenceError(f"Each input of batch-norm-{kind} must be rank 1; got "
                                 f"{human(v)}.")
        if not same_type_ignoring_fp(v.element_type, operand.element_type):
            raise InferenceError(f"The inputs of batch-norm-{kind} must have the same element "
                                 f"type as the operand; got {human(v)} and {human(operand)}.")
        if not dims_compatible(v.dimensions[0], features):
            raise InferenceError(f"The size of the inputs of batch-norm-{kind} should be "
                                 f"compatible with feature count {features}; got {human(v)}.")
    if kind == "grad":
        grad = shapes[4]
        expect_array(grad, "output_grad of batch norm grad")
        if grad.rank != operand.rank or not all(
                dims_compatible(a, b) for a, b in zip(operand.dimensions, grad.dimensions)):
            raise InferenceError("The bounds of operand shape should be compatible with "
                                 f"output_grad's; got {human(operand)} and {human(grad)}.")
    if kind == "inference":
        return operand
    vec = make(operand.element_type, [features], [dynamic_flags(operand)[feature_index]])
    return Shape.tuple([operand, vec, vec])
