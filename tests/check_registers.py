#!/usr/bin/env python3
"""No stack traffic in the vector kernels' micro-kernels (make check-registers).

Usage: check_registers.py OBJECT...

For every function of the objects whose name ends in _avx2 or _avx512 (the
loops isa.c registers per instruction set), each micro-kernel loop (an
innermost loop, between a backward branch and its target, that does at least
MIN_FMAS multiply-adds an iteration: the register-blocked score and P.V blocks)
must keep its vectors in registers: no instruction of it may take a vector
operand from the stack or store anything there (a spill). A general register's
read from the stack (a loop bound GCC parked there) is counted, not refused.
The AVX2 variant once ran the 16-lane blocks written for AVX-512's 32 registers:
with AVX2's 16, nearly every FMA of its tile loop read an accumulator from the
stack (0.03 of the FMA peak), and this check would have named each loop.
Fails as well when the tiled kernel's AVX2 tile loop has no such loop at all
(the check would otherwise pass on a renamed or an empty function).
"""
import re
import subprocess
import sys

MIN_FMAS = 8
FUNC = re.compile(r"^[0-9a-f]+ <([\w.]+)>:$")   # f.cold, f.constprop.0: their own
INSN = re.compile(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$")
FMA = ("vfmadd", "vfnmadd", "vfmsub", "vfnmsub")
MUST_HAVE = "ag_i_tile_q4_avx2"


def functions(obj):
    """(name, [(address, mnemonic, operands)]) of each function in obj."""
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", obj], check=True,
                          capture_output=True, text=True).stdout
    name, body = None, []
    for line in text.splitlines():
        m = FUNC.match(line)
        if m:
            if name:
                yield name, body
            name, body = m.group(1), []
        elif name and (m := INSN.match(line)):
            body.append((int(m.group(1), 16), m.group(2), m.group(3)))
    if name:
        yield name, body


def innermost_loops(body):
    """[first, last] index pairs of the loops that hold no other loop: each
    backward branch and its target. Of two branches back to one target the
    nearer is taken: GCC enters an inner loop's body again from the end of the
    outer one, whose epilogue (the block's stores, spilled once a call) is not
    part of the inner loop."""
    at = {addr: k for k, (addr, _, _) in enumerate(body)}
    loops = []
    for k, (addr, op, args) in enumerate(body):
        if op.startswith("j") and args:
            try:
                target = int(args.split()[0], 16)
            except ValueError:   # an indirect jump
                continue
            if target <= addr and target in at:
                loops.append((at[target], k))
    return [(a, b) for a, b in loops
            if not any(a <= c and d < b or a < c and d <= b for c, d in loops)]


def frame_registers(body):
    """The registers that address the stack: %rsp, and %rbp where the
    prologue makes it the frame pointer (a function that realigns its stack
    for 32- or 64-byte vectors does; elsewhere at -O2 %rbp is a general
    register)."""
    prologue = body[:24]
    if any(op == "mov" and args.replace(" ", "") == "%rsp,%rbp" for _, op, args in prologue):
        return ("%rsp", "%rbp")
    return ("%rsp",)


def stack_use(op, args, frame):
    """'vector' or 'store' for refused stack traffic, 'read' for a general
    register's read, None without any."""
    if not any("(" + r in args for r in frame):
        return None
    if re.search(r"%[xyz]mm", args):
        return "vector"
    if (re.search(r",\s*-?(0x[0-9a-f]+)?\((%rsp|%rbp)[^)]*\)$", args)
            and not op.startswith(("cmp", "test"))):
        return "store"
    return "read"


def main(objs):
    failures, loops, reads, seen = 0, 0, 0, set()
    for obj in objs:
        for name, body in functions(obj):
            if not re.search(r"_avx(2|512)$", name):
                continue
            frame = frame_registers(body)
            for a, b in innermost_loops(body):
                insns = body[a:b + 1]
                if sum(op.startswith(FMA) for _, op, _ in insns) < MIN_FMAS:
                    continue
                loops += 1
                seen.add(name)
                for addr, op, args in insns:
                    use = stack_use(op, args, frame)
                    reads += use == "read"
                    if use in ("vector", "store"):
                        what = "a vector on the stack" if use == "vector" else "a spill"
                        print(f"{obj}: {name}: the loop at {insns[0][0]:#x} keeps {what}: "
                              f"{addr:#x} {op} {args}")
                        failures += 1
                        break
    print(f"check-registers: {loops} micro-kernel loops in {len(seen)} functions, "
          f"{failures} with stack traffic ({reads} reads of a general register from it)")
    if failures:
        print("check-registers: gcc's -O2 build keeps none (clang's is not expected to: "
              "docs/performance.md)")
    if MUST_HAVE not in seen:
        print(f"check-registers: no micro-kernel loop in {MUST_HAVE}")
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
