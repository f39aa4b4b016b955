"""NCHW conv2d for x86 CPUs: AutoTVM's `conv2d_NCHWc.x86` space, scheduled with s_tir.

Compute (as AutoTVM's x86 NCHW template): pack data to NCHW[ic_bn]c and the kernel to
OIHW[ic_bn]i[oc_bn]o, convolve in NCHW[oc_bn]c, unpack to NCHW. Packing is part of
the measured function, as it was in AutoTVM's `conv2d_nchw.x86`.

Knobs, in AutoTVM's definition order (so indices of old logs stay meaningful):
  tile_ic    2-way split of input channels   (inner = ic_bn, the packing block)
  tile_oc    2-way split of output channels  (inner = oc_bn, the vector axis)
  tile_ow    2-way split of output width     (inner = reg_n ≤ 64, the register tile)
  unroll_kw  unroll the kernel-width loop    (kernels wider than 1 only)
  tile_oh    rows of output per register tile, 1 or 2 (AutoTVM defines it for 1×1 only;
             here for every kernel, so that each ResNet-18 workload has ≥ 500 configs)
  unroll_ow  unroll the register tile        (AutoTVM always unrolls; a knob here)
Placement is AutoTVM's: parallel over fused (batch, oc_chunk, oh_outer), vectorise
oc_block in the accumulator, the write-back and the unpack, accumulator of one
register tile computed at ow_chunk. Logs without the last two knobs read as AutoTVM's
fixed choice (tile_oh = 1 for k > 1, unroll_ow = True).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence

from extract.autotvm.space import Config, ConfigSpace, OptionKnob, SplitKnob
from extract.tir.workloads import Conv2dWorkload
from .base import Template, Unchecked, register_template


def _int(value: Any, what: str) -> int:
    """A JSON integer (not a bool, not a float, not a string)."""
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{what} {value!r} is not an integer")
    return value


def _pair(value: Any, what: str) -> int:
    """One int from AutoTVM's int / [h, w] / [t, l, b, r] forms; asymmetric is refused."""
    values = [value] if not isinstance(value, (list, tuple)) else list(value)
    if len(values) not in (1, 2, 4):
        raise ValueError(f"{what} {value!r} is not an integer, [h, w] or [top, left, bottom, right]")
    values = [_int(v, what) for v in values]
    if len(set(values)) != 1:
        raise ValueError(f"only symmetric {what} is supported, got {value!r}")
    return values[0]


def _tensor_shape(arg: Any, position: str) -> List[int]:
    if not (isinstance(arg, (list, tuple)) and len(arg) == 3 and arg[0] == "TENSOR"
            and isinstance(arg[1], (list, tuple))):
        raise ValueError(f"{position} argument {arg!r} is not ['TENSOR', shape, dtype]")
    if arg[2] != "float32":
        raise ValueError(f"only float32 is supported, {position} is {arg[2]!r}")
    return [_int(x, f"{position} dimension") for x in arg[1]]


def parse_conv2d_args(args: Sequence[Any]) -> Conv2dWorkload:
    """AutoTVM conv2d task args → workload.

    Accepts `topi_nn_conv2d` (TVM 0.5), `topi_x86_conv2d_NCHWc` (0.6) and
    `conv2d_NCHWc.x86`/`conv2d_nchw.x86`/`conv2d_no_batching` (0.7+): data, kernel, strides,
    padding, dilation, …; packed 5-D data / 6-D kernel shapes are unpacked.
    """
    if not isinstance(args, (list, tuple)) or len(args) < 3:
        raise ValueError(f"conv2d task args {args!r} are too short")
    if isinstance(args[0], (list, tuple)) and args[0] and args[0][0] == "TENSOR":
        data, kernel = _tensor_shape(args[0], "data"), _tensor_shape(args[1], "kernel")
        if any(d < 1 for d in data + kernel):
            raise ValueError(f"conv2d shapes {data} / {kernel} have a dimension < 1")
        if len(data) == 5:  # NCHW[x]c
            data = [data[0], data[1] * data[4], data[2], data[3]]
        if len(kernel) == 6:  # OIHW[x]i[y]o
            kernel = [kernel[0] * kernel[5], kernel[1] * kernel[4], kernel[2], kernel[3]]
        if len(data) != 4 or len(kernel) != 4:
            raise ValueError(f"conv2d shapes {data} / {kernel} are not NCHW / OIHW")
        stride = _pair(args[2], "stride")
        padding = _pair(args[3], "padding") if len(args) > 3 else 0
        if len(args) > 4 and not isinstance(args[4], str) and _pair(args[4], "dilation") != 1:
            raise ValueError(f"dilation {args[4]!r} is not supported")
        n, c, h, w = data
        o, ci, kh, kw = kernel
        if ci != c:
            raise ValueError(f"kernel input channels {ci} != data channels {c}")
        return Conv2dWorkload(n, c, h, w, o, kh, kw, stride, padding)
    # tutorial/conv2d_no_batching: N, H, W, CO, CI, KH, KW, stride, padding
    if len(args) != 9:
        raise ValueError(f"conv2d task args {args!r}: expected tensors or 9 integers")
    n, h, w, co, ci, kh, kw = (_int(a, "conv2d shape") for a in args[:7])
    return Conv2dWorkload(n, ci, h, w, co, kh, kw, _pair(args[7], "stride"), _pair(args[8], "padding"))


@register_template
class Conv2dX86(Template[Conv2dWorkload]):
    name = "conv2d_NCHWc.x86"
    task_names = ("conv2d_nchw.x86", "topi_x86_conv2d_NCHWc", "topi_nn_conv2d")
    target_kind = "llvm"
    workload_type = Conv2dWorkload

    def parse_task_args(self, args):
        return parse_conv2d_args(args)

    def task_args(self, wl: Conv2dWorkload) -> List[Any]:
        p = wl.padding
        return [["TENSOR", [wl.batch, wl.in_channels, wl.height, wl.width], "float32"],
                ["TENSOR", [wl.out_channels, wl.in_channels, wl.kernel_h, wl.kernel_w], "float32"],
                [wl.stride, wl.stride], [p, p, p, p], [1, 1], "NCHW", "NCHW", "float32"]

    def space(self, wl: Conv2dWorkload) -> ConfigSpace:
        knobs = [
            SplitKnob("tile_ic", wl.in_channels, 2),
            SplitKnob("tile_oc", wl.out_channels, 2),
            SplitKnob("tile_ow", wl.out_width, 2, keep=lambda v: v[-1] <= 64),
        ]
        if wl.kernel_w > 1:
            knobs.append(OptionKnob("unroll_kw", [True, False]))
        knobs.append(OptionKnob("tile_oh", [1, 2] if wl.out_height > 1 else [1]))
        knobs.append(OptionKnob("unroll_ow", [True, False]))
        return ConfigSpace(knobs)

    def default_values(self, wl: Conv2dWorkload) -> Dict[str, Any]:
        return {"tile_oh": 1, "unroll_ow": True}

    def make_target(self, num_cores: int = 1):
        from tvm.target import Target
        from tvm.target.codegen import llvm_get_system_cpu
        return Target({"kind": "llvm", "mtriple": "x86_64-linux-gnu",
                       "mcpu": llvm_get_system_cpu(), "num-cores": num_cores})

    def compute(self, wl: Conv2dWorkload, ic_bn: int, oc_bn: int):
        from tvm import te, topi

        n, c, o, p, s = wl.batch, wl.in_channels, wl.out_channels, wl.padding, wl.stride
        data = te.placeholder((n, c, wl.height, wl.width), name="data")
        kernel = te.placeholder((o, c, wl.kernel_h, wl.kernel_w), name="kernel")
        padded = topi.nn.pad(data, (0, 0, p, p), (0, 0, p, p), name="data_pad") if p else data
        ph, pw = wl.height + 2 * p, wl.width + 2 * p
        data_vec = te.compute(
            (n, c // ic_bn, ph, pw, ic_bn),
            lambda b, cc, h, w, cb: padded[b, cc * ic_bn + cb, h, w], name="data_vec")
        kernel_vec = te.compute(
            (o // oc_bn, c // ic_bn, wl.kernel_h, wl.kernel_w, ic_bn, oc_bn),
            lambda oc, ic, h, w, icb, ocb: kernel[oc * oc_bn + ocb, ic * ic_bn + icb, h, w],
            name="kernel_vec")
        ic = te.reduce_axis((0, c), name="ic")
        kh = te.reduce_axis((0, wl.kernel_h), name="kh")
        kw = te.reduce_axis((0, wl.kernel_w), name="kw")
        conv = te.compute(
            (n, o // oc_bn, wl.out_height, wl.out_width, oc_bn),
            lambda b, oc, h, w, ocb: te.sum(
                data_vec[b, ic // ic_bn, h * s + kh, w * s + kw, ic % ic_bn]
                * kernel_vec[oc, ic // ic_bn, kh, kw, ic % ic_bn, ocb], axis=[ic, kh, kw]),
            name="conv")
        output = te.compute(
            (n, o, wl.out_height, wl.out_width),
            lambda b, oc, h, w: conv[b, oc // oc_bn, h, w, oc % oc_bn], name="output")
        return te.create_prim_func([data, kernel, output])

    def schedule(self, wl: Conv2dWorkload, config: Config):
        from tvm import s_tir

        ic_bn, oc_bn = config["tile_ic"][-1], config["tile_oc"][-1]
        reg_n, oh_f = config["tile_ow"][-1], config["tile_oh"]
        unroll_kw = config.values.get("unroll_kw", False)
        schedule = s_tir.Schedule(self.compute(wl, ic_bn, oc_bn))
        sch = Unchecked(schedule)

        if wl.padding:
            sch.compute_inline(sch.get_sblock("data_pad"))
        # packing stages: parallel over outer axes, vectorise the innermost block
        b, cc, h, _w, _cb = sch.get_loops(sch.get_sblock("data_vec"))
        sch.parallel(sch.fuse(b, cc, h))
        oc, ic, kh, kw, icb, ocb = sch.get_loops(sch.get_sblock("kernel_vec"))
        sch.reorder(oc, kh, ic, kw, icb, ocb)
        if oc_bn > 1:
            sch.vectorize(ocb)
        sch.parallel(sch.fuse(oc, kh))

        # unpack: the outer loop nest every other conv stage is attached to
        out = sch.get_sblock("output")
        b, c, h, w = sch.get_loops(out)
        oc_chunk, oc_block = sch.split(c, [None, oc_bn])
        oh_outer, oh_inner = sch.split(h, [None, oh_f])
        ow_chunk, ow_block = sch.split(w, [None, reg_n])
        sch.reorder(oc_chunk, oh_outer, ow_chunk, oh_inner, ow_block, oc_block)
        par = sch.fuse(b, oc_chunk, oh_outer)
        sch.parallel(par)
        sch.vectorize(oc_block)

        # conv write-back (C) at the parallel axis, accumulator (CC) at its ow_chunk
        acc = sch.get_sblock("conv")
        write_back = sch.cache_write(acc, 0, "global")
        # unit loops kept so that the loop nest has the same shape for every config
        sch.compute_at(write_back, par, preserve_unit_loops=True)
        oh_i, ow, ocb = sch.get_loops(write_back)[-3:]
        wb_chunk, wb_block = sch.split(ow, [None, reg_n])
        sch.reorder(wb_chunk, oh_i, wb_block, ocb)
        sch.vectorize(ocb)
        sch.compute_at(acc, wb_chunk, preserve_unit_loops=True)
        oh_i, ow_b, ocb, ic, kh, kw = sch.get_loops(acc)[-6:]
        ic_chunk, ic_block = sch.split(ic, [None, ic_bn])
        if unroll_kw:
            sch.reorder(ic_chunk, kh, ic_block, kw, oh_i, ow_b, ocb)
            sch.unroll(kw)
        else:
            sch.reorder(ic_chunk, kh, kw, ic_block, oh_i, ow_b, ocb)
        # loop kinds before decomposing: the update block alone is not a "complete" block
        sch.vectorize(ocb)
        if config["unroll_ow"]:
            sch.unroll(ow_b)
            sch.unroll(oh_i)
        sch.decompose_reduction(acc, ic_chunk)
        return schedule
