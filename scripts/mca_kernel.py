#!/usr/bin/env python3
"""Static cycle estimate of a kernel loop with llvm-mca (deterministic, no timing noise).

    scripts/mca_kernel.py SRC BEGIN END [--cpu znver3] [--iterations 50] [--pressure N]

Copies SRC (a .cpp under src/) to a temporary directory, inserts llvm-mca region markers
(`# LLVM-MCA-BEGIN` / `# LLVM-MCA-END`, as asm statements with a memory clobber) after the
first line matching the regular expression BEGIN and before the next line matching END
(`+END`: after it), compiles the copy to assembly with the Release flags, and prints for
each region (one per template instance of the enclosing function) its instructions and
cycles per iteration under `llvm-mca -mcpu=CPU`. --pressure N also prints region N's
resource pressure per iteration (vector ALU pipes, load and store pipes: which one binds).

znver3 (AMD Zen 3) is the reference AVX2-only CPU of issue 18. LLVM 14 (Debian 12's
`llvm` package) has no AVX-512 AMD model; its numbers are estimates of the issue rate,
not measurements (no cache misses, no frontend). docs/PERFORMANCE.md says where they
were used. Needs llvm-mca and c++filt (binutils); it is not part of the build or tests.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FLAGS = ["-O3", "-DNDEBUG", "-std=c++20", "-DHWY_WANT_AVX3_DL=1", "-I" + os.path.join(ROOT, "src")]


def die(msg):
    print("mca_kernel: " + msg, file=sys.stderr)
    sys.exit(2)


def mark(src_lines, begin, end):
    after = end.startswith("+")
    end_re = re.compile(end[1:] if after else end)
    begin_re = re.compile(begin)
    out, state = [], 0
    b = '__asm__ volatile("# LLVM-MCA-BEGIN" ::: "memory");'
    e = '__asm__ volatile("# LLVM-MCA-END" ::: "memory");'
    for line in src_lines:
        if state == 1 and not after and end_re.search(line):
            out.append(e)
            state = 2
        out.append(line)
        if state == 1 and after and end_re.search(line):
            out.append(e)
            state = 2
        if state == 0 and begin_re.search(line):
            out.append(b)
            state = 1
    if state == 0:
        die(f"no line matches BEGIN {begin!r}")
    if state == 1:
        die(f"no line after BEGIN matches END {end!r}")
    return out


def region_functions(asm_text):
    """The mangled function each LLVM-MCA-BEGIN marker lies in, in order."""
    fn, names = "?", []
    for line in asm_text.split("\n"):
        m = re.match(r"^(_Z[\w.$]+):", line)
        if m:
            fn = m.group(1)
        if "LLVM-MCA-BEGIN" in line:
            names.append(fn)
    out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout.split("\n")
    return [re.sub(r"chimera::kernels::\(anonymous namespace\)::", "", n) for n in out[: len(names)]]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("src")
    ap.add_argument("begin")
    ap.add_argument("end")
    ap.add_argument("--cpu", default="znver3")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--pressure", type=int, default=None, help="print region N's (0-based) resource pressure")
    args = ap.parse_args()
    for tool in ("llvm-mca", "c++filt", "c++"):
        if not shutil.which(tool):
            die(f"{tool} not found (llvm-mca: `apt install llvm`)")
    src = os.path.abspath(args.src)
    if not os.path.isfile(src):
        die(f"no such file: {args.src}")
    with open(src) as f:
        lines = f.read().split("\n")
    with tempfile.TemporaryDirectory() as tmp:
        copy = os.path.join(tmp, os.path.basename(src))
        with open(copy, "w") as f:
            f.write("\n".join(mark(lines, args.begin, args.end)))
        asm = copy + ".s"
        cc = subprocess.run(["c++", *FLAGS, "-S", "-o", asm, copy], capture_output=True, text=True)
        if cc.returncode != 0:
            die("compiling the marked copy failed:\n" + cc.stderr[-4000:])
        with open(asm) as f:
            names = region_functions(f.read())
        mca = subprocess.run(
            ["llvm-mca", f"-mcpu={args.cpu}", f"-iterations={args.iterations}", "-instruction-info=false", asm],
            capture_output=True, text=True)
        if mca.returncode != 0:
            die("llvm-mca failed:\n" + mca.stderr[-4000:])
    blocks = [b for b in re.split(r"\n\[\d+\] Code Region", "\n" + mca.stdout) if "Total Cycles" in b]
    if len(blocks) != len(names):
        die(f"{len(names)} markers but {len(blocks)} regions in llvm-mca's report (a region GCC emptied?)")
    for i, (name, b) in enumerate(zip(names, blocks)):
        insts = int(re.search(r"Instructions:\s+(\d+)", b).group(1)) / args.iterations
        cycles = int(re.search(r"Total Cycles:\s+(\d+)", b).group(1)) / args.iterations
        print(f"[{i}] {insts:8.1f} instructions {cycles:8.1f} cycles / iteration  {name[:110]}")
        if args.pressure == i:
            m = re.search(r"Resources:\n(.*?)\n\n", b, re.S)
            p = re.search(r"Resource pressure per iteration:\n(.*?)\n(.*?)\n", b)
            if m:
                print(m.group(1))
            if p:
                print(p.group(1) + "\n" + p.group(2))


if __name__ == "__main__":
    main()
