"""PTX of dumped kernel sources under two template folders: identical or not, per kernel.
   python3 ptx_same.py OLD_TEMPLATES NEW_TEMPLATES KEY_REGEX DUMP_DIR..."""
import ctypes, glob, hashlib, re, sys
from concurrent.futures import ThreadPoolExecutor
nv = ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so")
def ptx(src, inc, arch):
    prog = ctypes.c_void_p(); nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None)
    opts = ["--gpu-architecture=" + arch, "--include-path=" + inc, "-std=c++17", "-default-device", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"]
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    r = nv.nvrtcCompileProgram(prog, len(opts), arr)
    if r: return "ERR%d" % r
    n = ctypes.c_size_t(); nv.nvrtcGetPTXSize(prog, ctypes.byref(n)); b = ctypes.create_string_buffer(n.value); nv.nvrtcGetPTX(prog, b)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    # virtual registers renamed in order of first appearance: a renumbering is not a difference
    names = {}
    text = re.sub(r"%(r|rd|f|fd|p|rs|h|hh)(\d+)", lambda m: "%" + m.group(1) + str(names.setdefault(m.group(0), len(names))), b.value.decode())
    return hashlib.sha256(text.encode()).hexdigest()[:12]
old, new, rx = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
files = []
for d in sys.argv[4:]:
    for f in sorted(glob.glob(d + "/*.cu")):
        key = open(f[:-3] + ".log", errors="replace").readline().strip()
        if rx.search(key): files.append((f, key))
def one(fk):
    f, key = fk
    arch = "compute_" + key.split("|")[1][3:]
    src = open(f, "rb").read()
    return key, ptx(src, old, arch), ptx(src, new, arch)
same = diff = 0
with ThreadPoolExecutor(2) as ex:
    for key, a, b in ex.map(one, files):
        if a == b and not a.startswith("ERR"): same += 1
        else: diff += 1; print("DIFF", key[:140], a, b)
print("identical", same, "different", diff)
