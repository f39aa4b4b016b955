"""tensor-program runtime simulator: learn how long a tensor program runs under a config."""
from setuptools import find_packages, setup

setup(
    name="tpsim",
    version="0.1.0",
    description="Graph-neural-network simulator of tensor-program runtimes (TVM TIR, XLA HLO)",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10",
    packages=find_packages(include=["extract*", "simulator*", "datasets*", "benchmarks*"]),
    package_data={"datasets": ["**/*.gz", "**/*.md", "**/*.npz"], "extract": ["xla/proto/*.proto"]},
    install_requires=[
        # torch 2.13.0 is the CPU wheel on the machine's disk; a looser pin pulls a CUDA build
        "torch==2.13.0",
        # dgl 2.1.0 is PyPI's newest Linux wheel; see simulator/dgl_compat.py
        "dgl==2.1.0",
        "packaging",
        "pandas",
        # TVM 0.27 with the FFI release whose MetaSchedule feature extractor does not crash
        "apache-tvm==0.27.0.post1",
        "apache-tvm-ffi==0.1.14.post1",
        "numpy",
        "scipy",
        "matplotlib",
        "tqdm",
        "protobuf",
        "xgboost-cpu",
        "psutil",
        # one writer per output folder (extract/fileio.py)
        "filelock",
        # MetaSchedule's LocalBuilder/LocalRunner pools pickle their jobs with it (apache-tvm
        # does not depend on it)
        "cloudpickle",
        # TVM's RPC tracker (python -m tvm.exec.rpc_tracker; extract/autotvm/rpc.py) needs it
        "tornado",
    ],
    extras_require={
        "jax": ["jax"],
        # hypothesis: property-based tests of the readers (garbled, truncated, non-finite input);
        # pytest-xdist: the suite's files spread over the cores (pytest.ini)
        "test": ["pytest", "pytest-xdist", "jax", "hypothesis"],
    },
)
