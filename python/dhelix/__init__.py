"""dhelix: the DHelix shim as a Python package.

The package holds the native build (dhelix/lib/libdhelix_shim.so, dhelix/bin/dhelix,
dhelix/bin/dhelix-pairs, dhelix/include/dhelix_nccl.h) and the `dhelix` console command
(dhelix.cli). Nothing here is loaded into a training process: the shim enters a job through
LD_PRELOAD (`dhelix run`), and Python only launches it.
"""
import os

_HERE = os.path.dirname(os.path.abspath(__file__))


def shim_path():
    """Path of the installed libdhelix_shim.so (what LD_PRELOAD must name)."""
    return os.path.join(_HERE, "lib", "libdhelix_shim.so")


def cli_path():
    """Path of the installed C `dhelix` (plan, show, validate, config, profile-pairs)."""
    return os.path.join(_HERE, "bin", "dhelix")


def include_dir():
    """Directory of the public C header dhelix_nccl.h."""
    return os.path.join(_HERE, "include")
