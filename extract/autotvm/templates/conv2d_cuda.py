"""Direct NCHW conv2d for CUDA GPUs: AutoTVM's `tutorial/conv2d_no_batching`, with s_tir.

The template of TVM's "Tuning High Performance Convolution on NVIDIA GPUs" tutorial
(tune_conv2d_cuda.py, batch 1), rebuilt as a `tvm.s_tir.Schedule`. Compute is
`topi.nn.conv2d_nchw` (a `pad_temp` stage, then the reduction), as in the tutorial.

Knobs, in the tutorial's definition order (so indices of old logs stay meaningful):
  tile_f, tile_y, tile_x   4-way splits of output channels / height / width:
                           blockIdx, vthread, threadIdx, inner (per-thread) tile
  tile_rc, tile_ry, tile_rx  3-way splits of the reduction axes: outer, middle, inner
  auto_unroll_max_step     0, 512, 1500 (pragma on the outermost loop of the kernel)
  unroll_explicit          0, 1 (same)
Schedule (the tutorial's): padding inlined into the shared read of the data; the conv
accumulates in a local cache (OL) computed at threadIdx.x of the output; data and kernel
are read to shared memory (AA, WW) at the outer reduction loop and to local memory
(AL, WL) at the middle one; the shared reads are fetched cooperatively by all threads.
As in the tutorial, the `ry` axis is split by `tile_rx` and `rx` by `tile_ry` (the same
for square kernels). The three vthread axes are bound to `vthread.z/y/x`, not to one
tag "vthread" (s_tir would merge loops bound to the same tag into one thread), and the
accumulator's init is decomposed before the outer reduction loop, where TE put it.
Configs a GPU cannot run (> 1024 threads, > 64 threadIdx.z, > 48 KB shared memory per
block: AutoTVM's `check_gpu` limits) raise `InvalidGpuConfig` from `schedule`, as AutoTVM's
builder recorded them as instantiation errors.
"""
from __future__ import annotations

import math
from typing import Any, List

from extract.autotvm.space import Config, ConfigSpace, OptionKnob, SplitKnob
from extract.tir.workloads import Conv2dWorkload
from .base import Template, register_template
from .conv2d_x86 import parse_conv2d_args

# AutoTVM's `check_gpu` limits: the device's max threads per block, max threadIdx.x/y/z
# and max shared memory per block (CUDA: 1024, 1024/1024/64, 48 KB on every NVIDIA GPU)
MAX_THREADS_PER_BLOCK = 1024
MAX_THREAD_XYZ = (1024, 1024, 64)
MAX_SHARED_MEMORY_PER_BLOCK = 48 * 1024
FLOAT32_BYTES = 4


class InvalidGpuConfig(ValueError):
    """The config builds a kernel the GPU cannot launch (AutoTVM: "invalid gpu kernel")."""


@register_template
class Conv2dCuda(Template[Conv2dWorkload]):
    name = "tutorial/conv2d_no_batching"
    # TVM <= 0.6 named the task after the template function (same args, same space)
    task_names = ("conv2d_no_batching",)
    target_kind = "cuda"
    workload_type = Conv2dWorkload

    def parse_task_args(self, args):
        wl = parse_conv2d_args(args)
        if wl.batch != 1:
            raise ValueError(f"{self.name} handles batch 1 only, got {wl.batch}")
        return wl

    def task_args(self, wl: Conv2dWorkload) -> List[Any]:
        # N, H, W, CO, CI, KH, KW, strides, padding; the tutorial passed (s, s) and (p, p)
        return [wl.batch, wl.height, wl.width, wl.out_channels, wl.in_channels,
                wl.kernel_h, wl.kernel_w, [wl.stride, wl.stride], [wl.padding, wl.padding]]

    def space(self, wl: Conv2dWorkload) -> ConfigSpace:
        return ConfigSpace([
            SplitKnob("tile_f", wl.out_channels, 4),
            SplitKnob("tile_y", wl.out_height, 4),
            SplitKnob("tile_x", wl.out_width, 4),
            SplitKnob("tile_rc", wl.in_channels, 3),
            SplitKnob("tile_ry", wl.kernel_h, 3),
            SplitKnob("tile_rx", wl.kernel_w, 3),
            OptionKnob("auto_unroll_max_step", [0, 512, 1500]),
            OptionKnob("unroll_explicit", [0, 1]),
        ])

    def make_target(self, num_cores: int = 1, arch: str = "sm_80"):
        """CUDA target with an x86 LLVM host; `num_cores` is accepted and ignored (the CLI
        passes its CPU thread count to every template)."""
        from tvm.target import Target
        return Target({"kind": "cuda", "arch": arch,
                       "max_num_threads": MAX_THREADS_PER_BLOCK,
                       "max_threads_per_block": MAX_THREADS_PER_BLOCK,
                       "max_shared_memory_per_block": MAX_SHARED_MEMORY_PER_BLOCK},
                      host={"kind": "llvm", "mtriple": "x86_64-linux-gnu"})

    def compute(self, wl: Conv2dWorkload):
        """The workload's own computation (`topi.nn.conv2d_nchw`), as in the tutorial."""
        return wl.prim_func()

    def check_threads(self, config: Config) -> None:
        """Threads per block and per dimension, known from the config alone."""
        tz, ty, tx = (config[k][2] for k in ("tile_f", "tile_y", "tile_x"))
        threads = tz * ty * tx
        if threads > MAX_THREADS_PER_BLOCK:
            raise InvalidGpuConfig(f"{threads} threads per block ({tz}x{ty}x{tx}) exceed "
                                   f"the maximum {MAX_THREADS_PER_BLOCK}")
        for name, extent, limit in zip("zyx", (tz, ty, tx), MAX_THREAD_XYZ[::-1]):
            if extent > limit:
                raise InvalidGpuConfig(f"threadIdx.{name} extent {extent} exceeds "
                                       f"the maximum {limit}")

    def schedule(self, wl: Conv2dWorkload, config: Config):
        from tvm import s_tir

        if wl.batch != 1:
            raise ValueError(f"{self.name} handles batch 1 only, got {wl.batch}")
        self.check_threads(config)
        # AutoTVM splits by the inner factors, the outermost extent is the rest (rounded up)
        tile_f, tile_y, tile_x, tile_rc, tile_ry, tile_rx = (
            [None] + list(config[k][1:])
            for k in ("tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx"))

        sch = s_tir.Schedule(self.compute(wl))
        pad = sch.get_sblock("pad_temp")
        conv = sch.get_sblock("conv2d_nchw")

        # caches: conv accumulates in local memory (OL = the conv block), `output` writes it
        # back; data (padding inlined) and kernel go through shared, then local memory
        output = sch.cache_write(conv, 0, "local")
        data_shared = sch.cache_read(conv, "pad_temp", "shared")  # AA
        sch.compute_inline(pad)
        kernel_shared = sch.cache_read(conv, "kernel", "shared")  # WW
        data_local = sch.cache_read(conv, "pad_temp_shared", "local")  # AL
        kernel_local = sch.cache_read(conv, "kernel_shared", "local")  # WL

        # tile and bind the spatial axes of the output
        n, f, y, x = sch.get_loops(output)
        bf, vf, tf, fi = sch.split(f, tile_f)
        by, vy, ty, yi = sch.split(y, tile_y)
        bx, vx, tx, xi = sch.split(x, tile_x)
        sch.reorder(n, bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
        # three distinct vthread tags: s_tir merges loops that share a tag into one thread
        for loop, tag in ((bf, "blockIdx.z"), (by, "blockIdx.y"), (bx, "blockIdx.x"),
                          (vf, "vthread.z"), (vy, "vthread.y"), (vx, "vthread.x"),
                          (tf, "threadIdx.z"), (ty, "threadIdx.y"), (tx, "threadIdx.x")):
            sch.bind(loop, tag)
        sch.compute_at(conv, tx, preserve_unit_loops=True)

        # tile the reduction axes (ry by tile_rx and rx by tile_ry, as the tutorial does)
        on, of, oy, ox, rc, ry, rx = sch.get_loops(conv)[-7:]
        rco, rcm, rci = sch.split(rc, tile_rc)
        ryo, rym, ryi = sch.split(ry, tile_rx)
        rxo, rxm, rxi = sch.split(rx, tile_ry)
        sch.reorder(rco, ryo, rxo, rcm, rym, rxm, rci, ryi, rxi, on, of, oy, ox)

        # local reads at the middle reduction loop, then shared reads at the outer one
        # (s_tir attaches a producer only once its consumers are under the loop)
        sch.compute_at(data_local, rxm, preserve_unit_loops=True)
        sch.compute_at(kernel_local, rxm, preserve_unit_loops=True)
        sch.compute_at(data_shared, rxo, preserve_unit_loops=True)
        sch.compute_at(kernel_shared, rxo, preserve_unit_loops=True)
        self.check_shared_memory(sch)

        # cooperative fetching: nparts splits of the fused copy over threadIdx.z/y/x
        for load in (data_shared, kernel_shared):
            fused = sch.fuse(*sch.get_loops(load)[-4:])
            tz_l, fused = sch.split(fused, [tile_f[2], None])
            ty_l, fused = sch.split(fused, [tile_y[2], None])
            tx_l, fused = sch.split(fused, [tile_x[2], None])
            sch.bind(tz_l, "threadIdx.z")
            sch.bind(ty_l, "threadIdx.y")
            sch.bind(tx_l, "threadIdx.x")

        # tune unroll: pragmas on the kernel's outermost loop (the tutorial's kernel_scope)
        sch.annotate(n, "pragma_auto_unroll_max_step", int(config["auto_unroll_max_step"]))
        sch.annotate(n, "pragma_unroll_explicit", int(config["unroll_explicit"]))
        # the accumulator's init before the reduction loops, where TE put it
        sch.decompose_reduction(conv, rco)
        return sch

    @staticmethod
    def shared_memory_bytes(sch) -> int:
        """Shared bytes of the attached AA and WW copies: the product of their loops'
        extents (the region read per outer reduction step, which the buffers are
        compacted to at lowering)."""
        total = 0
        for name in ("pad_temp_shared", "kernel_shared"):
            # right after compute_at (before the cooperative fetch fuses them): 4 copy loops
            loops = sch.get_loops(sch.get_sblock(name))[-4:]
            total += math.prod(int(sch.get(loop).extent) for loop in loops) * FLOAT32_BYTES
        return total

    def check_shared_memory(self, sch) -> None:
        total = self.shared_memory_bytes(sch)
        if total > MAX_SHARED_MEMORY_PER_BLOCK:
            raise InvalidGpuConfig(f"{total} bytes of shared memory per block exceed the "
                                   f"maximum {MAX_SHARED_MEMORY_PER_BLOCK}")
