import ctypes, sys, re
nv = ctypes.CDLL("/usr/local/cuda/lib64/libnvrtc.so")
src=open(sys.argv[1],'rb').read()
def comp(extra):
    prog = ctypes.c_void_p(); nv.nvrtcCreateProgram(ctypes.byref(prog), src, b"k.cu", 0, None, None)
    opts = ["--gpu-architecture=sm_90a", "--include-path=/work/main/templates", "-std=c++17", "-default-device", "--ptxas-options=-v", "-prec-div=true", "-prec-sqrt=true", "-ftz=false"] + extra
    arr = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts]); r=nv.nvrtcCompileProgram(prog, len(opts), arr)
    n = ctypes.c_size_t(); nv.nvrtcGetProgramLogSize(prog, ctypes.byref(n)); log = ctypes.create_string_buffer(n.value); nv.nvrtcGetProgramLog(prog, log)
    nv.nvrtcDestroyProgram(ctypes.byref(prog))
    return r, [l for l in log.value.decode().splitlines() if 'spill' in l or 'registers' in l]
print("default 1", comp([]))
print("ofast    ", comp(["--Ofast-compile=max"]))
print("default 2", comp([]))
