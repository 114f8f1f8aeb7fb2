"""The package's build (pyproject.toml has its metadata): it ships the library
it runs on. That is the file $ATTNGRAPH_LIB names, else this checkout's
build/libattngraph.so, made with `make` first when the checkout has none; it is
copied into the package, which loads it before an installed one. Built
outside a checkout, the package has no library of its own and loads the
installed libattngraph.so.0.2 (make install)."""
import os
import shutil
import subprocess

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT = os.path.dirname(HERE)


def library():
    named = os.environ.get("ATTNGRAPH_LIB")
    if named:
        if not os.path.isfile(named):
            raise SystemExit(f"attngraph: ATTNGRAPH_LIB={named}: no such file (expected "
                             "the libattngraph.so to ship)")
        return named
    if not os.path.isfile(os.path.join(CHECKOUT, "Makefile")):
        return None
    built = os.path.join(CHECKOUT, "build", "libattngraph.so")
    if not os.path.exists(built):
        subprocess.run(["make", "-C", CHECKOUT, "--no-print-directory", "build/libattngraph.so"],
                       check=True)
    return built


class with_library(build_py):
    def run(self):
        super().run()
        lib = library()
        if lib:
            shutil.copyfile(lib, os.path.join(self.build_lib, "attngraph", "libattngraph.so"))


class binary(Distribution):
    """A wheel with a shared library in it is this platform's only."""

    def has_ext_modules(self):
        return True


# In a checkout, setuptools' own files go under its build folder, not into python/.
options = {}
if os.path.isfile(os.path.join(CHECKOUT, "Makefile")):
    work = os.path.join(CHECKOUT, "build", "python")
    os.makedirs(work, exist_ok=True)
    options = {"build": {"build_base": work}, "egg_info": {"egg_base": work}}
setup(cmdclass={"build_py": with_library}, distclass=binary, options=options)
