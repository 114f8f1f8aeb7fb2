"""The ctypes mirrors (attngraph/_structs.py) agree with the C headers: a C
program prints sizeof, offsetof and field sizes of every mirrored struct and
the value of every mirrored enum constant; ctypes must say the same."""
import ctypes
import os
import shutil
import subprocess

import pytest

from attngraph import _structs as S
from conftest import ROOT


def c_program():
    lines = ["#include <stdio.h>", "#include <stddef.h>", "#include <attngraph.h>",
             "int main(void) {"]
    for st in S.STRUCTS:
        name = st.__name__
        lines.append('printf("%s %%zu\\n", sizeof(%s));' % (name, name))
        for field, _ in st._fields_:
            lines.append('printf("%s.%s %%zu %%zu\\n", offsetof(%s, %s), sizeof(((%s *)0)->%s));'
                         % (name, field, name, field, name, field))
    for enum in S.ENUMS:
        for const in enum:
            lines.append('printf("%s %%d\\n", (int)%s);' % (const, const))
    lines.append('printf("igraph_t %zu\\n", sizeof(igraph_t));')
    lines.append("return 0; }")
    return "\n".join(lines) + "\n"


def python_side():
    out = []
    for st in S.STRUCTS:
        out.append("%s %d" % (st.__name__, ctypes.sizeof(st)))
        for field, ctype in st._fields_:
            out.append("%s.%s %d %d" % (st.__name__, field, getattr(st, field).offset,
                                        ctypes.sizeof(ctype)))
    for enum in S.ENUMS:
        out += ["%s %d" % kv for kv in enum.items()]
    return out


@pytest.mark.skipif(not shutil.which("cc") or not shutil.which("pkg-config"),
                    reason="needs a C compiler and pkg-config")
def test_structs_match_headers(tmp_path):
    src = tmp_path / "layout.c"
    src.write_text(c_program())
    exe = tmp_path / "layout"
    flags = subprocess.run(["pkg-config", "--cflags", "igraph"], capture_output=True,
                           text=True, check=True).stdout.split()
    subprocess.run(["cc", "-std=c11", "-I" + os.path.join(ROOT, "include")] + flags +
                   [str(src), "-o", str(exe)], check=True)
    c_lines = subprocess.run([str(exe)], capture_output=True, text=True,
                             check=True).stdout.splitlines()
    igraph_size = int(c_lines.pop().split()[1])
    assert igraph_size <= S.IGRAPH_T_BYTES, "IGRAPH_T_BYTES is smaller than sizeof(igraph_t)"
    assert c_lines == python_side()
