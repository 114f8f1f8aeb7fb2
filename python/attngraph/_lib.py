"""Finding and loading libattngraph, and its errors.

The library is, in this order: the file $ATTNGRAPH_LIB names; the build
tree's build/libattngraph.so (when this package is the repository's
python/attngraph); the copy `pip install ./python` put in the package; the
installed libattngraph.so.0.2 (the SONAME: 0.x releases carry the minor version).
"""
import ctypes
import ctypes.util
import os

from . import _structs as S


class Error(Exception):
    """A failure the library reported; str(e) is its one-line message and
    e.status its status name (e.g. "bad format")."""

    def __init__(self, message, status=None):
        super().__init__(message)
        self.status = status


# ------------------------------------------------------------------ loading

def _candidates():
    named = os.environ.get("ATTNGRAPH_LIB")
    if named:
        return [named]
    here = os.path.dirname(os.path.abspath(__file__))
    build = os.path.join(os.path.dirname(os.path.dirname(here)), "build", "libattngraph.so")
    shipped = os.path.join(here, "libattngraph.so")   # pip install ./python put it there
    out = [p for p in (build, shipped) if os.path.exists(p)]
    found = ctypes.util.find_library("attngraph")
    return out + ([found] if found else []) + [SONAME]


def _load():
    tried = []
    for path in _candidates():
        try:
            return ctypes.CDLL(path), path
        except OSError as e:
            tried.append(str(e))
    raise ImportError("attngraph: cannot load the library (set ATTNGRAPH_LIB to "
                      "libattngraph.so, build it with make, or make install): " +
                      "; ".join(tried))


# the package's version, which must be the library's: the structs here mirror its headers
VERSION = "0.2.0"
# the installed library's name while the major version is 0: each minor release may change its ABI
SONAME = "libattngraph.so." + ".".join(VERSION.split(".")[:2])

lib, path = _load()
if not hasattr(lib, "ag_version"):
    raise ImportError(f"attngraph: {path} is older than this Python package ({VERSION}) "
                      "and has no ag_version: set ATTNGRAPH_LIB to the libattngraph.so "
                      "built from the same source")
for _name, (_res, _args) in S.FUNCTIONS.items():
    _f = getattr(lib, _name)
    _f.restype, _f.argtypes = _res, _args
if lib.ag_version().decode() != VERSION:
    raise ImportError(f"attngraph: {path} is version {lib.ag_version().decode()}; this Python "
                      f"package is {VERSION}, and their structs need not match: set "
                      "ATTNGRAPH_LIB to the libattngraph.so built from the same source")

_libc = ctypes.CDLL(None)
c_free = _libc.free
c_free.argtypes, c_free.restype = [ctypes.c_void_p], None
# memory the library will free(): the arrays of an ag_nbhd_t rebuilt from a pickle
c_malloc = _libc.malloc
c_malloc.argtypes, c_malloc.restype = [ctypes.c_size_t], ctypes.c_void_p


def _igraph():
    """libigraph as the library loaded it (for igraph_destroy)."""
    name = ctypes.util.find_library("igraph") or "libigraph.so.3"
    g = ctypes.CDLL(name)
    g.igraph_destroy.argtypes, g.igraph_destroy.restype = [ctypes.c_void_p], None
    return g


igraph = _igraph()


def simd_isa():
    """The vector instruction set the kernels run: "avx512", "avx2" or "base"
    (the environment's AG_SIMD may name a lower one than the CPU's best)."""
    return lib.ag_simd_isa().decode()


def err():
    return S.ag_error_t()


def check(rc, e):
    """Raises Error with the library's message when rc is not AG_OK."""
    if rc:
        status = lib.ag_status_str(rc).decode()
        msg = e.msg.decode("utf-8", "replace") or status
        raise Error(msg, status)


def _check_simd_env():
    """AG_SIMD naming no variant, or one the CPU cannot run, is refused on import,
    as the CLI refuses it."""
    e = err()
    check(lib.ag_simd_env_check(ctypes.byref(e)), e)


_check_simd_env()
