"""The files of a program call one way (make check-layers, part of make check).

src/README.md's walls say which folders' headers a folder may include; within
the tool, where every file includes cli/cli.h, they cannot see which file calls
which. The objects can: a file that uses a function another defines depends on
it (nm). This fails when the files of a folder call each other in a circle
(a.c uses b.c, which uses a.c, perhaps through others), naming the circle.

Usage: check_layers.py SRCDIR OBJDIR [SRCDIR OBJDIR]...
       (e.g. src/cli build/src/cli): the objects of SRCDIR's .c files only, so
       that a stale object of a file since removed is not counted.
"""
import glob
import os
import subprocess
import sys


def depends(srcdir, objdir):
    """file -> the files of srcdir whose functions or data it uses."""
    defined, used = {}, {}
    for src in sorted(glob.glob(os.path.join(srcdir, "*.c"))):
        name = os.path.basename(src)
        obj = os.path.join(objdir, name[:-2] + ".o")
        if not os.path.exists(obj):
            sys.exit(f"check-layers: {obj}: missing (build first)")
        used[name] = set()
        out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDRB":
                defined[parts[2]] = name
            elif len(parts) == 2 and parts[0] == "U":
                used[name].add(parts[1])
    return {f: {defined[s] for s in syms if s in defined and defined[s] != f}
            for f, syms in used.items()}


def circle(graph):
    """A list of files calling each other in a circle, or None."""
    state = {}   # 1: on the path, 2: done

    def visit(f, path):
        state[f] = 1
        for g in sorted(graph[f]):
            if state.get(g) == 1:
                return path[path.index(g):] + [g]
            if g not in state:
                found = visit(g, path + [g])
                if found:
                    return found
        state[f] = 2
        return None

    for f in sorted(graph):
        if f not in state:
            found = visit(f, [f])
            if found:
                return found
    return None


def main(args):
    if not args or len(args) % 2:
        sys.exit("usage: check_layers.py SRCDIR OBJDIR [SRCDIR OBJDIR]...")
    for srcdir, objdir in zip(args[::2], args[1::2]):
        graph = depends(srcdir, objdir)
        if not graph:
            sys.exit(f"check-layers: {srcdir}: no .c files")
        found = circle(graph)
        if found:
            sys.exit(f"check-layers: {srcdir}: files call each other in a circle: "
                     + " -> ".join(found))
        print(f"check-layers: the {len(graph)} files of {srcdir} call one way")


if __name__ == "__main__":
    main(sys.argv[1:])
