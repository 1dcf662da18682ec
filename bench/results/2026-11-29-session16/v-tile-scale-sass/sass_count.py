"""Static SASS histogram of a dumped kernel source (SAGE2_DUMP_DIR .cu), compiled with NVRTC here.
   python3 sass_count.py ARCH FILE.cu [--inc DIR] [--top N]
--inc: the templates folder to compile against (default /work/main/templates): a hacked copy
isolates one path (e.g. the lean K path with its fallback removed)."""
import ctypes, sys, subprocess, tempfile, os, collections, re, argparse
ap = argparse.ArgumentParser()
ap.add_argument("arch"); ap.add_argument("cu"); ap.add_argument("--inc", default="/work/main/templates")
ap.add_argument("--top", type=int, default=25)
a = ap.parse_args()
nv = ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so")
src = open(a.cu, "rb").read()
prog = ctypes.c_void_p()
assert nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None) == 0
opts = ["--gpu-architecture=" + a.arch, "--include-path=" + a.inc, "-std=c++17", "-default-device",
        "--ptxas-options=-v", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"]
arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
r = nv.nvrtcCompileProgram(prog, len(opts), arr)
n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
log = ctypes.create_string_buffer(n.value); nv.nvrtcGetProgramLog(prog, log)
text = log.value.decode(errors="replace")
if r != 0:
    print(text[:3000]); sys.exit(1)
print("\n".join(l for l in text.splitlines() if "registers" in l or "spill" in l))
nv.nvrtcGetCUBINSize(prog, ctypes.byref(n))
cub = ctypes.create_string_buffer(n.value); nv.nvrtcGetCUBIN(prog, cub)
with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
    f.write(cub.raw); path = f.name
sass = subprocess.run(["cuobjdump", "-sass", path], capture_output=True, text=True).stdout
os.unlink(path)
ops = re.findall(r"^\s+/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z0-9_]+)", sass, re.M)
c = collections.Counter(ops)
print("total", sum(c.values()))
for k, v in c.most_common(a.top): print("%6d %s" % (v, k))
