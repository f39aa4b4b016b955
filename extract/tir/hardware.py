"""The hardware a program is compiled for, as far as its graph's features need it.

`hardware_of(target)` turns a TVM target (a `tvm.target.Target`, its JSON/string form,
or None) into a `Hardware`: what the size-invariant node features of `extract.tir.graph`
measure against — cache sizes and vector width on a CPU; threads, shared memory and
registers per block and per multiprocessor on a GPU.

* CPU (`llvm`): L1d / L2 per core, cache line and SIMD width from the target's `mcpu`
  (`CPUS`: the processors this project measures on and common ones). For a CPU not in
  the table, the SIMD width is what LLVM knows of it (AVX-512, AVX, else SSE: 512, 256
  or 128 bits, `-mattr` included, below) and the caches are this machine's
  (`/sys/devices/system/cpu/cpu0/cache`) when it is that CPU, else a typical x86
  core's. The target, not the machine extracting, decides: a log measured on a Zen 3
  keeps Zen 3's caches when it is extracted elsewhere. A target without `mcpu` gets this
  machine's caches and 256 bits. `-mattr` changes the width for every CPU: 512 bits with
  `+avx512…`, at most 256 with `-avx512f`.
* GPU (`cuda`, …): `max_threads_per_block`, `max_shared_memory_per_block`,
  `thread_warp_size` from the target's attributes; per-multiprocessor limits (threads,
  blocks, registers, shared memory) from its `arch` (`GPU_ARCHS`, CUDA's occupancy
  tables), else those of sm_80.
"""
from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass, replace
from typing import Any, Dict, Optional

KIB = 1024


@dataclass(frozen=True)
class Hardware:
    kind: str = "cpu"                     # "cpu" | "gpu"
    l1_bytes: int = 32 * KIB              # CPU: L1 data cache per core
    l2_bytes: int = 512 * KIB             # CPU: L2 per core
    line_bytes: int = 64
    vector_bits: int = 256                # CPU: SIMD register width
    # GPU (per block: the target's attributes; per multiprocessor: the arch's)
    max_threads_per_block: int = 1024
    max_thread_xyz: tuple = (1024, 1024, 64)
    max_shared_per_block: int = 48 * KIB
    warp_size: int = 32
    max_regs_per_thread: int = 255
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    shared_per_sm: int = 164 * KIB
    shared_banks: int = 32
    bank_bytes: int = 4

    @property
    def is_gpu(self) -> bool:
        return self.kind == "gpu"


# mcpu → (L1d, L2, SIMD bits)
CPUS: Dict[str, tuple] = {
    "znver2": (32 * KIB, 512 * KIB, 256), "znver3": (32 * KIB, 512 * KIB, 256),
    "znver4": (32 * KIB, 1024 * KIB, 512), "znver5": (48 * KIB, 1024 * KIB, 512),
    "haswell": (32 * KIB, 256 * KIB, 256), "broadwell": (32 * KIB, 256 * KIB, 256),
    "skylake": (32 * KIB, 256 * KIB, 256), "skylake-avx512": (32 * KIB, 1024 * KIB, 512),
    "cascadelake": (32 * KIB, 1024 * KIB, 512), "icelake-server": (48 * KIB, 1280 * KIB, 512),
    "rocketlake": (48 * KIB, 512 * KIB, 512), "sapphirerapids": (48 * KIB, 2048 * KIB, 512),
    "alderlake": (48 * KIB, 1280 * KIB, 256), "emeraldrapids": (48 * KIB, 2048 * KIB, 512),
    "graniterapids": (48 * KIB, 2048 * KIB, 512),
}
# Bump when `hardware_of` answers differently for some target: extraction caches key on it.
HARDWARE_VERSION = 3
# arch → (max threads / SM, max blocks / SM, registers / SM, shared bytes / SM)
GPU_ARCHS: Dict[str, tuple] = {
    "sm_50": (2048, 32, 65536, 64 * KIB), "sm_60": (2048, 32, 65536, 64 * KIB),
    "sm_61": (2048, 32, 65536, 96 * KIB), "sm_70": (2048, 32, 65536, 96 * KIB),
    "sm_75": (1024, 16, 65536, 64 * KIB), "sm_80": (2048, 32, 65536, 164 * KIB),
    "sm_86": (1536, 16, 65536, 100 * KIB), "sm_89": (1536, 24, 65536, 100 * KIB),
    "sm_90": (2048, 32, 65536, 228 * KIB),
}
GPU_KINDS = ("cuda", "rocm", "vulkan", "metal", "opencl", "webgpu")


@functools.lru_cache(maxsize=1)
def machine_cpu() -> Hardware:
    """This machine's L1d / L2 per core and cache line (a typical core where unreadable)."""
    sizes: Dict[str, int] = {}
    line = 64
    root = "/sys/devices/system/cpu/cpu0/cache"
    try:
        for index in sorted(os.listdir(root)):
            path = os.path.join(root, index)
            if not index.startswith("index"):
                continue
            level = open(os.path.join(path, "level")).read().strip()
            kind = open(os.path.join(path, "type")).read().strip()
            size = open(os.path.join(path, "size")).read().strip()
            value = int(size.rstrip("KMG")) * {"K": KIB, "M": KIB * KIB, "G": KIB ** 3}.get(size[-1:], 1)
            if level == "1" and kind in ("Data", "Unified"):
                sizes["l1"] = value
                line = int(open(os.path.join(path, "coherency_line_size")).read().strip() or 64)
            elif level == "2":
                sizes["l2"] = value
    except (OSError, ValueError):
        pass
    return Hardware(l1_bytes=sizes.get("l1", 32 * KIB), l2_bytes=sizes.get("l2", 512 * KIB), line_bytes=line)


def _attrs(target) -> Dict[str, Any]:
    """(kind, attributes) of a target in any of its forms."""
    if target is None:
        return {}
    if isinstance(target, dict):
        return dict(target)
    if isinstance(target, str):
        text = target.strip()
        if text.startswith("{"):
            return json.loads(text)
        # a target string, "llvm -mcpu=znver3 -num-cores=1": its kind and -key=value options
        words = text.split()
        attrs: Dict[str, Any] = {"kind": words[0] if words else "llvm"}
        for word in words[1:]:
            key, sep, value = word.lstrip("-").partition("=")
            if sep:
                attrs[key] = value
        return attrs
    attrs = {k: (v if isinstance(v, (int, float, str)) else str(v)) for k, v in dict(target.attrs).items()}
    attrs["kind"] = target.kind.name
    return attrs


def hardware_of(target=None) -> Hardware:
    """The `Hardware` of a target (None: this machine's CPU)."""
    attrs = _attrs(target)
    kind = str(attrs.get("kind", "llvm"))
    if kind in GPU_KINDS:
        arch = str(attrs.get("arch", "sm_80"))
        per_sm = GPU_ARCHS.get(arch, GPU_ARCHS["sm_80"])
        max_threads = int(attrs.get("max_threads_per_block", attrs.get("max_num_threads", 1024)))
        return Hardware(kind="gpu", max_threads_per_block=max_threads,
                        max_thread_xyz=(max_threads, max_threads, 64),
                        max_shared_per_block=int(attrs.get("max_shared_memory_per_block", 48 * KIB)),
                        warp_size=int(attrs.get("thread_warp_size", 32)),
                        max_threads_per_sm=per_sm[0], max_blocks_per_sm=per_sm[1], regs_per_sm=per_sm[2],
                        shared_per_sm=per_sm[3])
    mcpu, mattr = str(attrs.get("mcpu", "")), str(attrs.get("mattr", ""))
    if mcpu in CPUS:
        l1, l2, bits = CPUS[mcpu]
        return Hardware(l1_bytes=l1, l2_bytes=l2, vector_bits=_with_mattr(bits, mattr))
    if mcpu:
        hw = machine_cpu() if mcpu == _system_cpu() else Hardware()
        bits = _llvm_simd_bits(mcpu, str(attrs.get("mtriple", "x86_64-linux-gnu")), mattr)
        return replace(hw, vector_bits=bits or hw.vector_bits)
    hw = machine_cpu()
    return replace(hw, vector_bits=_with_mattr(hw.vector_bits, mattr))


def _with_mattr(bits: int, mattr: str) -> int:
    """A CPU's SIMD width as the target's `-mattr` changes it: LLVM emits 512-bit vectors
    with `+avx512…` and none without `avx512f`, whatever the CPU has."""
    if "-avx512f" in mattr:
        return min(bits, 256)
    if "+avx512" in mattr:
        return 512
    return max(bits, 256) if "+avx" in mattr else bits


@functools.lru_cache(maxsize=1)
def _system_cpu() -> str:
    from tvm.target.codegen import llvm_get_system_cpu

    return str(llvm_get_system_cpu())


@functools.lru_cache(maxsize=None)
def _llvm_simd_bits(mcpu: str, triple: str, mattr: str) -> Optional[int]:
    """The widest x86 SIMD registers of `mcpu` as LLVM knows it, widened by `mattr` (None:
    not an x86 CPU LLVM knows, e.g. another architecture's, whose width the table must give)."""
    import tvm
    from tvm.target.codegen import llvm_is_valid_cpu, target_has_features

    if not triple.startswith(("x86_64", "i686", "i386")) or not llvm_is_valid_cpu(mcpu, triple):
        return None
    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu, "mtriple": triple})
    bits = 512 if target_has_features("avx512f", target) else 256 if target_has_features("avx", target) else 128
    return _with_mattr(bits, mattr)
