"""Median NVRTC time of a dumped kernel source under the quick options.
   python3 qt.py INCLUDE_DIR FILE.cu [-DX=1 ...]"""
import ctypes, sys, time, re, statistics
nv = ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so")
import os; ARCH = "--gpu-architecture=" + os.environ.get("ARCH", "sm_90a")
inc, f, extra = sys.argv[1], sys.argv[2], sys.argv[3:]
base = [ARCH, "--include-path=" + inc, "-std=c++17", "-default-device", ] + ([] if "compute" in ARCH else ["--ptxas-options=-v"]) + [
        "-prec-div=true", "-prec-sqrt=true", "-ftz=false", ] + extra
src = open(f, "rb").read()
ts = []
for i in range(int(os.environ.get("REPS", "7"))):
    prog = ctypes.c_void_p()
    nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None)
    arr = (ctypes.c_char_p * len(base))(*[o.encode() for o in base])
    t0 = time.perf_counter(); r = nv.nvrtcCompileProgram(prog, len(base), arr); ts.append(time.perf_counter() - t0)
    n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n)); log = ctypes.create_string_buffer(n.value)
    nv.nvrtcGetProgramLog(prog, log); text = log.value.decode(errors="replace")
    if r != 0: print(text[:3000]); sys.exit(1)
    ps = ctypes.c_size_t(); nv.nvrtcGetPTXSize(prog, ctypes.byref(ps)); ptx = ctypes.create_string_buffer(ps.value); nv.nvrtcGetPTX(prog, ptx)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
lines = ptx.value.decode().count("\n"); calls = ptx.value.decode().count("call.uni")
regs = re.findall(r"Used (\d+) registers", text); stack = re.findall(r"(\d+) bytes stack frame", text)
print("%-40s %s median %.0f ms (min %.0f)  ptx %d lines %d calls regs %s stack %s" % (f.split('/')[-1][:16], ' '.join(extra), 1000*statistics.median(ts), 1000*min(ts), lines, calls, regs[-1:], stack[-1:]))
