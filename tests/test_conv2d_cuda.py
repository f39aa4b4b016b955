"""The CUDA template `tutorial/conv2d_no_batching`: space, indices, schedule, build."""
from __future__ import annotations

import itertools
import math
import random
import re
import shutil
import subprocess

import pytest

from extract.autotvm.space import ConfigSpace, OptionKnob, SplitKnob
from extract.autotvm.templates import Conv2dWorkload, get_template
from extract.autotvm.templates.conv2d_cuda import Conv2dCuda, InvalidGpuConfig

NAME = "tutorial/conv2d_no_batching"
RESNET = Conv2dWorkload(1, 512, 7, 7, 512, 3, 3, 1, 1)  # the tutorial's layer
SMALL = Conv2dWorkload(1, 4, 6, 6, 8, 3, 3, 1, 1)
KNOBS = ["tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx",
         "auto_unroll_max_step", "unroll_explicit"]


@pytest.fixture(scope="module")
def template():
    return get_template(NAME)


def entity(f, y, x, rc, ry, rx, unroll=512, explicit=1):
    return [["tile_f", "sp", f], ["tile_y", "sp", y], ["tile_x", "sp", x],
            ["tile_rc", "sp", rc], ["tile_ry", "sp", ry], ["tile_rx", "sp", rx],
            ["auto_unroll_max_step", "ot", unroll], ["unroll_explicit", "ot", explicit]]


def cuda_source(template, wl, config) -> str:
    import tvm

    mod = template.schedule(wl, config).mod
    return tvm.compile(mod, target=template.make_target()).mod.imports[0].inspect_source()


def shared_sizes(src: str):
    return {name: int(n) for name, n in
            re.findall(r"__shared__ alignas\(\d+\) float (\w+)\[(\d+)\]", src)}


# ---------------------------------------------------------------- registry and args
def test_registered_for_cuda(template):
    assert isinstance(template, Conv2dCuda)
    assert template.target_kind == "cuda"
    assert get_template("conv2d_no_batching") is template  # the TVM <= 0.6 task name
    target = template.make_target()
    assert target.kind.name == "cuda" and target.host.kind.name == "llvm"
    assert template.make_target(4).kind.name == "cuda"  # the CLI passes a thread count


def test_parse_tutorial_task_args(template):
    # the tutorial: N, H, W, CO, CI, KH, KW, strides=(1, 1), padding=(1, 1)
    assert template.parse_task_args([1, 7, 7, 512, 512, 3, 3, [1, 1], [1, 1]]) == RESNET
    assert template.parse_task_args([1, 7, 7, 512, 512, 3, 3, 1, 1]) == RESNET
    # CO before CI, stride 2
    assert (template.parse_task_args([1, 56, 56, 128, 64, 3, 3, [2, 2], [1, 1]])
            == Conv2dWorkload(1, 64, 56, 56, 128, 3, 3, 2, 1))
    for wl in (RESNET, SMALL, Conv2dWorkload(1, 64, 56, 56, 128, 1, 3, 2, 0)):
        assert template.parse_task_args(template.task_args(wl)) == wl
    assert template.task_args(RESNET) == [1, 7, 7, 512, 512, 3, 3, [1, 1], [1, 1]]
    with pytest.raises(ValueError, match="batch 1"):
        template.parse_task_args([2, 7, 7, 512, 512, 3, 3, 1, 1])


# ---------------------------------------------------------------- space and indices
def test_space_size_by_hand(template):
    # ordered factorisations of 2^a into k factors: C(a + k - 1, k - 1)
    resnet = template.space(RESNET)
    assert [k.name for k in resnet.knobs] == KNOBS
    # tile_f 512=2^9 4-way: C(12,3)=220; tile_y/x 7 4-way: 4; tile_rc 2^9 3-way: C(11,2)=55;
    # tile_ry/rx 3 3-way: 3; unroll 3; explicit 2
    assert [len(k) for k in resnet.knobs] == [220, 4, 4, 55, 3, 3, 3, 2]
    assert len(resnet) == 220 * 4 * 4 * 55 * 3 * 3 * 3 * 2 == 10_454_400
    small = template.space(SMALL)
    # tile_f 8 4-way: C(6,3)=20; 6=2*3 4-way: 4*4=16; tile_rc 4 3-way: C(4,2)=6
    assert [len(k) for k in small.knobs] == [20, 16, 16, 6, 3, 3, 3, 2]
    assert len(small) == 20 * 16 * 16 * 6 * 3 * 3 * 3 * 2 == 1_658_880


@pytest.mark.parametrize("wl", [RESNET, SMALL], ids=["resnet", "small"])
def test_index_round_trip(template, wl):
    space = template.space(wl)
    rng = random.Random(0)
    for index in [0, len(space) - 1] + [rng.randrange(len(space)) for _ in range(300)]:
        config = space.get(index)
        assert space.index_of(config.values) == index
        assert space.from_entity(space.to_entity(config)).index == index


def _autotvm_split_options(extent, num_outputs):
    """AutoTVM's split order, independently of extract.autotvm.space: all inner-factor tuples
    whose product divides the extent, the innermost factor varying slowest."""
    divisors = [d for d in range(1, extent + 1) if extent % d == 0]
    inner = [t for t in itertools.product(divisors, repeat=num_outputs - 1)
             if extent % math.prod(t) == 0]
    return sorted(inner, key=lambda t: t[::-1])


def test_from_entity_index(template):
    space = template.space(RESNET)
    values = [[-1, 2, 8, 1], [-1, 1, 7, 1], [-1, 1, 1, 7], [-1, 4, 2], [-1, 1, 3], [-1, 3, 1]]
    expected, radix = 0, 1
    for extent, value in zip([512, 7, 7, 512, 3, 3], values):
        options = _autotvm_split_options(extent, len(value))
        expected += options.index(tuple(value[1:])) * radix
        radix *= len(options)
    expected += 1 * radix + 1 * radix * 3  # auto_unroll_max_step 512 (1 of 3), explicit 1
    config = space.from_entity(entity(*values, unroll=512, explicit=1))
    assert config.index == expected
    assert config["tile_f"] == [-1, 2, 8, 1] and config["unroll_explicit"] == 1
    # AutoTVM v0.1 logs may spell the outer factor out
    spelled = entity([32, 2, 8, 1], [1, 1, 7, 1], [1, 1, 1, 7], [64, 4, 2], [1, 1, 3], [1, 3, 1])
    assert space.from_entity(spelled).index == expected
    with pytest.raises(ValueError):
        space.from_entity(entity(*values)[:-1])  # a knob missing


def test_index_arithmetic_matches_real_autotvm_records():
    """Two records of TVM's TopHub cuda_v0.04.log (topi_nn_conv2d, the CUDA direct
    template of TVM 0.5: the same knobs with 2-way reduction splits) and their indices."""
    def space(co):
        return ConfigSpace([
            SplitKnob("tile_f", co, 4), SplitKnob("tile_y", 8, 4), SplitKnob("tile_x", 8, 4),
            SplitKnob("tile_rc", 2048, 2), SplitKnob("tile_ry", 1, 2), SplitKnob("tile_rx", 1, 2),
            OptionKnob("auto_unroll_max_step", [0, 512, 1500]),
            OptionKnob("unroll_explicit", [0, 1])])
    e1 = entity([6, 1, 32, 1], [4, 1, 2, 1], [1, 1, 8, 1], [64, 32], [1, 1], [1, 1], 1500, 1)
    e2 = entity([28, 2, 8, 1], [2, 2, 2, 1], [1, 1, 8, 1], [64, 32], [1, 1], [1, 1], 0, 0)
    assert space(192).from_entity(e1).index == 8797896
    assert space(448).from_entity(e2).index == 734204


# ---------------------------------------------------------------- schedule and build
def test_tutorial_like_config_compiles(template):
    space = template.space(RESNET)
    config = space.from_entity(entity([-1, 2, 8, 1], [-1, 1, 7, 1], [-1, 1, 1, 7],
                                      [-1, 4, 2], [-1, 1, 3], [-1, 3, 1], 512, 1))
    src = cuda_source(template, RESNET, config)
    kernels = set(re.findall(r"__global__ void (?:__launch_bounds__\(\d+\) )?(\w+)\(", src))
    assert len(kernels) == 1  # padding inlined: one kernel
    assert "__launch_bounds__(56)" in src  # 8 x 7 x 1 threads
    # AA: rc 4*2=8 channels x (7 rows + 2) x (7 cols + 2); WW: 2*8*1=16 out channels x 8 x 3 x 3
    assert shared_sizes(src) == {"pad_temp_shared_ptr": 8 * 9 * 9, "kernel_shared_ptr": 16 * 8 * 9}
    for axis in ("blockIdx.z", "threadIdx.z", "threadIdx.y"):
        assert f"(int){axis}" in src
    assert "__syncthreads()" in src
    # OL: vthread 2 x per-thread tile 1 x 1 x 7
    assert re.search(r"float conv2d_nchw_local_ptr\[14\]", src)


def test_thread_and_vthread_binding(template):
    space = template.space(SMALL)
    # f: block 2, vthread 1, threads 2, inner 2; y: 1, 2 vthreads, 3 threads, 1; x: 1, 1, 2, 3
    # rc [-1, 2, 1]; tile_ry [-1, 1, 1] (rx inner 1) and tile_rx [-1, 3, 1] (ry inner 3)
    config = space.from_entity(entity([-1, 1, 2, 2], [-1, 2, 3, 1], [-1, 1, 2, 3],
                                      [-1, 2, 1], [-1, 1, 1], [-1, 3, 1], 0, 0))
    src = cuda_source(template, SMALL, config)
    assert "__launch_bounds__(12)" in src  # 2 x 3 x 2
    for axis in ("blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z"):
        assert f"(int){axis}" in src
    # per block: 4 out channels, 6 rows, 6 cols; at rxo the rc inner extent is 2, ry inner 3
    # (tile_rx), rx inner 1 (tile_ry): AA 2 x (6 + 2) x 6, WW 4 x 2 x 3 x 1
    assert shared_sizes(src) == {"pad_temp_shared_ptr": 2 * 8 * 6, "kernel_shared_ptr": 4 * 2 * 3}
    assert re.search(r"float conv2d_nchw_local_ptr\[12\]", src)  # 2 vthreads x 2 x 1 x 3
    assert "#pragma unroll" not in src  # auto_unroll_max_step 0


@pytest.mark.parametrize("explicit", [0, 1])
def test_unroll_pragmas(template, explicit):
    space = template.space(SMALL)
    config = space.from_entity(entity([-1, 1, 2, 2], [-1, 2, 3, 1], [-1, 1, 2, 3],
                                      [-1, 2, 1], [-1, 1, 3], [-1, 3, 1], 1500, explicit))
    src = cuda_source(template, SMALL, config)
    if explicit:
        assert "#pragma unroll" not in src and src.count("for (") <= 1  # unrolled in TIR
    else:
        assert "#pragma unroll" in src  # left to nvcc


def test_random_valid_configs_compile(template, monkeypatch):
    """Random valid configs of a stride-2 layer build; the shared memory checked at
    schedule time is what the CUDA source declares."""
    import tvm

    checked = []
    check = Conv2dCuda.check_shared_memory
    monkeypatch.setattr(Conv2dCuda, "check_shared_memory", lambda self, sch: (
        checked.append(self.shared_memory_bytes(sch)), check(self, sch)))
    wl = Conv2dWorkload(1, 16, 14, 14, 32, 3, 3, 2, 1)
    space = template.space(wl)
    rng = random.Random(1)
    built = 0
    while built < 4:
        config = space.get(rng.randrange(len(space)))
        if config["auto_unroll_max_step"] and config["unroll_explicit"]:
            continue  # fully unrolled sources take seconds; keep the test fast
        try:
            sch = template.schedule(wl, config)
        except InvalidGpuConfig:
            continue
        src = tvm.compile(sch.mod, target=template.make_target()).mod.imports[0].inspect_source()
        sizes = shared_sizes(src)
        assert set(sizes) == {"pad_temp_shared_ptr", "kernel_shared_ptr"}
        assert 4 * sum(sizes.values()) == checked[-1] <= 48 * 1024
        threads = config["tile_f"][2] * config["tile_y"][2] * config["tile_x"][2]
        assert threads == 1 or f"__launch_bounds__({threads})" in src
        built += 1


@pytest.mark.parametrize("values, message", [
    # 64 x 7 x 7 = 3136 threads
    (([-1, 1, 64, 1], [-1, 1, 7, 1], [-1, 1, 7, 1], [-1, 1, 1], [-1, 1, 1], [-1, 1, 1]),
     "3136 threads per block"),
    # threadIdx.z 128 > 64 (128 threads in all)
    (([-1, 1, 128, 1], [-1, 1, 1, 1], [-1, 1, 1, 1], [-1, 1, 1], [-1, 1, 1], [-1, 1, 1]),
     "threadIdx.z extent 128"),
    # all 512 input channels per step: AA 512 x 9 x 9 floats alone is 162 KB
    (([-1, 1, 8, 1], [-1, 1, 7, 1], [-1, 1, 1, 7], [-1, 1, 512], [-1, 1, 3], [-1, 1, 3]),
     "bytes of shared memory per block exceed the maximum 49152"),
])
def test_invalid_configs_raise(template, values, message):
    config = template.space(RESNET).from_entity(entity(*values))
    with pytest.raises(InvalidGpuConfig, match=message):
        template.schedule(RESNET, config)


# ---------------------------------------------------------------- numerical check
# The CUDA kernel run on the CPU: one pthread per GPU thread, blocks one after another,
# __shared__ arrays static (one block at a time), __syncthreads a pthread barrier.
EMULATOR = r"""
#include <pthread.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <algorithm>
struct Dim3 { int x, y, z; };
static thread_local Dim3 threadIdx, blockIdx;
static pthread_barrier_t barrier;
#define __global__
#define __launch_bounds__(x)
#define __shared__ static
#define __syncthreads() pthread_barrier_wait(&barrier)
#define uint unsigned int
KERNEL
struct Arg { Dim3 t, b; float *out, *data, *kernel; };
static void* run(void* p) {
  Arg* a = (Arg*)p; threadIdx = a->t; blockIdx = a->b;
  main_kernel(a->out, a->data, a->kernel);
  return nullptr;
}
int main(int argc, char** argv) {
  int g[3], b[3]; long n[3];
  for (int i = 0; i < 3; ++i) {
    g[i] = atoi(argv[1 + i]); b[i] = atoi(argv[4 + i]); n[i] = atol(argv[7 + i]);
  }
  float* buf[3];
  for (int i = 0; i < 3; ++i) {
    buf[i] = (float*)calloc(n[i], 4);
    if (i && fread(buf[i], 4, n[i], fopen(argv[9 + i], "rb")) != (size_t)n[i]) return 3;
  }
  int threads = b[0] * b[1] * b[2];
  pthread_barrier_init(&barrier, nullptr, threads);
  pthread_t* th = new pthread_t[threads]; Arg* args = new Arg[threads];
  for (int blk = 0; blk < g[0] * g[1] * g[2]; ++blk) {
    Dim3 bid{blk % g[0], blk / g[0] % g[1], blk / (g[0] * g[1])};
    for (int i = 0; i < threads; ++i) {
      int x = i % b[0], y = i / b[0] % b[1], z = i / (b[0] * b[1]);
      args[i] = Arg{{x, y, z}, bid, buf[0], buf[1], buf[2]};
      if (pthread_create(&th[i], nullptr, run, &args[i])) return 2;
    }
    for (int j = 0; j < threads; ++j) pthread_join(th[j], nullptr);
  }
  fwrite(buf[0], 4, n[0], fopen(argv[12], "wb"));
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("wl, values", [
    (SMALL,
     ([-1, 1, 2, 2], [-1, 2, 3, 1], [-1, 1, 2, 3], [-1, 2, 1], [-1, 1, 1], [-1, 3, 1], 0, 0)),
    (Conv2dWorkload(1, 6, 9, 9, 12, 3, 3, 2, 1),
     ([-1, 2, 3, 1], [-1, 1, 1, 5], [-1, 5, 1, 1], [-1, 3, 2], [-1, 1, 3], [-1, 1, 1], 512, 1)),
    (Conv2dWorkload(1, 4, 7, 7, 6, 1, 3, 1, 0),  # 1x3 kernel: ry split by tile_rx, rounded up
     ([-1, 1, 3, 2], [-1, 1, 7, 1], [-1, 1, 1, 5], [-1, 1, 4], [-1, 1, 1], [-1, 3, 1], 1500, 0)),
], ids=["small", "stride2", "kernel1x3"])
def test_kernel_computes_conv2d(template, tmp_path, wl, values):
    import numpy as np

    config = template.space(wl).from_entity(entity(*values))
    src = cuda_source(template, wl, config)
    kernel_src = src[src.index('extern "C" __global__'):].replace(
        "__shared__ alignas(64)", "alignas(64) __shared__")
    (tmp_path / "emu.cc").write_text(EMULATOR.replace("KERNEL", kernel_src))
    subprocess.run(["g++", "-O1", "-w", "-o", str(tmp_path / "emu"), str(tmp_path / "emu.cc"),
                    "-lpthread"], check=True)

    rng = np.random.default_rng(0)
    data = rng.uniform(-1, 1, (1, wl.in_channels, wl.height, wl.width)).astype("float32")
    weight = rng.uniform(-1, 1, (wl.out_channels, wl.in_channels, wl.kernel_h, wl.kernel_w))
    weight = weight.astype("float32")
    p, s = wl.padding, wl.stride
    padded = np.pad(data, ((0, 0), (0, 0), (p, p), (p, p)))
    windows = np.lib.stride_tricks.sliding_window_view(
        padded, (wl.kernel_h, wl.kernel_w), axis=(2, 3))[:, :, ::s, ::s]
    expected = np.einsum("ncyxhw,ochw->noyx", windows, weight)
    data.tofile(tmp_path / "data.bin")
    weight.tofile(tmp_path / "kernel.bin")

    splits = [config["tile_x"], config["tile_y"], config["tile_f"]]
    extents = [wl.out_width, wl.out_height, wl.out_channels]
    grid = [e // math.prod(v[1:]) for e, v in zip(extents, splits)]
    block = [v[2] for v in splits]
    sizes = [expected.size, data.size, weight.size]
    subprocess.run([str(tmp_path / "emu"), *map(str, grid + block + sizes),
                    str(tmp_path / "data.bin"), str(tmp_path / "kernel.bin"),
                    str(tmp_path / "out.bin")], check=True, timeout=60)
    out = np.fromfile(tmp_path / "out.bin", dtype="float32").reshape(expected.shape)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
