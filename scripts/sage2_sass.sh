#!/usr/bin/env bash
# sage2's real SASS for one arch, no GPU needed: compile the kernels into a private kernel cache
# with `sage2-autotune --compile-only`, pull the cubins out of the cache entries and disassemble.
#
# usage: scripts/sage2_sass.sh ARCH OUTDIR [extra sage2-autotune options]
#   ARCH     sm_80, sm_86, sm_89, sm_90a, ... (as sage2-autotune --arch takes it)
#   OUTDIR   gets cache/ (the kernel cache) and, per cache entry whose key passes $SAGE2_SASS_FILTER
#            (a Python regex searched in the key, default '^attn_'), NAME.cubin, NAME.sass (cuobjdump -sass),
#            NAME.res (cuobjdump -res-usage), NAME.json (the entry's key and ptxas facts);
#            index.tsv lists NAME and key.
#   The default selection (overridden by extra options of the same name, given after it):
#     --head-dims 64,128 --dtypes f16 --causal none,top-left --bits 8 --family mma --tiles 64x64x4x2
#   e.g. scripts/sage2_sass.sh sm_80 /tmp/census/sm80 --pv fp16
#        scripts/sage2_sass.sh sm_89 /tmp/census/sm89 --pv fp8
# fp16 P~V accumulation (key "|acc16") cannot be selected here: sage2-autotune always takes the
# arch's default accumulation (fp32). Its kernels come from the CPU test "pv_acc16*" instead:
#   SAGE2_DUMP_DIR=DIR build/tests/sage2_cpu_tests -tc="pv_acc16*"; ptxas -arch=sm_80 DIR/<hash>.ptx
# (the key is on the first line of DIR/<hash>.log; ptxas of the dumped PTX gives NVRTC's SASS).
# Environment: SAGE2_BUILD (default build/ of this checkout), CUOBJDUMP (default
# /usr/local/cuda/bin/cuobjdump, else cuobjdump on PATH, else the copy the triton wheel bundles,
# else NVIDIA's nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm wheels unpacked into SAGE2_SASS_TOOLS,
# default ~/.cache/sage2-sass-tools, by `pip download`),
# SAGE2_SASS_FILTER.
#
# Cache entry format (cache/disk_cache.hpp): 64-byte little-endian header, magic "S2CUBIN\0",
# u32 header size at 12, u32 key length at 28, u32 metadata length at 32, u64 cubin length at 40;
# then key | cubin (an ELF) | metadata (JSON with the entry name and ptxas facts).
set -euo pipefail
if [[ $# -lt 2 ]]; then
  sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
arch=$1; out=$2; shift 2
root=$(cd "$(dirname "$0")/.." && pwd)
build=${SAGE2_BUILD:-$root/build}
find_tool() {  # $1 = tool name: $CUOBJDUMP-style override handled by the caller
  local c
  for c in "/usr/local/cuda/bin/$1" "$(command -v "$1" || true)" \
           /tmp/venv/lib/python3*/site-packages/triton/backends/nvidia/bin/"$1" \
           "$(python3 -c 'import site; print(site.getsitepackages()[0])' 2>/dev/null)/triton/backends/nvidia/bin/$1"; do
    [[ -n $c && -x $c ]] && { echo "$c"; return 0; }
  done
  # Last resort: NVIDIA's own wheels of the two tools (cuobjdump runs nvdisasm from its PATH),
  # unpacked once into $SAGE2_SASS_TOOLS (default ~/.cache/sage2-sass-tools).
  local tools=${SAGE2_SASS_TOOLS:-$HOME/.cache/sage2-sass-tools}
  if [[ ! -x $tools/bin/$1 ]]; then
    mkdir -p "$tools/wheels" "$tools/bin"
    python3 -m pip download -q --no-deps -d "$tools/wheels" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm >&2 &&
      for w in "$tools"/wheels/*.whl; do
        python3 -c 'import sys, zipfile; z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.endswith(("/bin/cuobjdump", "/bin/nvdisasm")):
        open(sys.argv[2] + "/" + n.rsplit("/", 1)[1], "wb").write(z.read(n))' "$w" "$tools/bin"
      done
    chmod +x "$tools"/bin/* 2>/dev/null
  fi
  [[ -x $tools/bin/$1 ]] && { echo "$tools/bin/$1"; return 0; }
  echo "sage2_sass.sh: no $1 found (set ${1^^}=PATH; a CUDA toolkit, the triton wheel or pip's nvidia-cuda-cuobjdump and nvidia-cuda-nvdisasm have one)" >&2
  return 1
}
cuobjdump=${CUOBJDUMP:-$(find_tool cuobjdump)}
export PATH="$(dirname "$cuobjdump"):$PATH"  # (cuobjdump -sass runs the nvdisasm beside it)
filter=${SAGE2_SASS_FILTER:-^attn_}
mkdir -p "$out"
cache=$out/cache

# CLI11 takes the last value of a repeated option, so the caller's options override these.
"$build/tools/sage2-autotune" --compile-only --arch "$arch" --cache-dir "$cache" --jobs 2 --no-progress -v \
  --head-dims 64,128 --dtypes f16 --causal none,top-left --bits 8 --family mma --tiles 64x64x4x2 \
  "$@" | tee "$out/autotune.txt"

python3 - "$cache" "$out" "$filter" <<'EOF'
import json, os, re, struct, sys
cache, out, flt = sys.argv[1], sys.argv[2], re.compile(sys.argv[3])
rows = []
for f in sorted(os.listdir(cache)):
    if not f.endswith(".s2c"):
        continue
    d = open(os.path.join(cache, f), "rb").read()
    magic, ver, hdr, arch, nv_maj, nv_min, key_len, meta_len, _r, cubin_len = struct.unpack_from("<8sIIIiiIIIQ", d, 0)
    if magic != b"S2CUBIN\0":
        print(f"{f}: not a sage2 cache entry", file=sys.stderr)
        continue
    key = d[hdr:hdr + key_len].decode()
    cubin = d[hdr + key_len:hdr + key_len + cubin_len]
    meta = json.loads(d[hdr + key_len + cubin_len:hdr + key_len + cubin_len + meta_len])
    if not flt.search(key):
        continue
    # key = kind|arch|dNN|family|tile|bits|smoothing|in>out|causal:X|acc2:A.lse:L[|pv16][|acc16]|sage2:..|code:..|nvrtc:..
    f = key.split("|")
    keep = [f[0], f[1], f[2], f[4], f[5], f[7], f[8].replace("causal:", "")]
    if "lse:1" in key:
        keep.append("lse")
    keep += [x for x in f[10:] if x in ("pv16", "acc16", "su")]  # (su: channel_stats at once)
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", "_".join(keep))
    open(os.path.join(out, name + ".cubin"), "wb").write(cubin)
    json.dump({"key": key, "entry": meta.get("entry"), "facts": meta.get("facts")},
              open(os.path.join(out, name + ".json"), "w"), indent=1)
    rows.append((name, key))
with open(os.path.join(out, "index.tsv"), "w") as t:
    for n, k in rows:
        t.write(f"{n}\t{k}\n")
print(f"{len(rows)} cubins extracted into {out}")
EOF

while IFS=$'\t' read -r name key; do
  "$cuobjdump" -sass "$out/$name.cubin" > "$out/$name.sass" 2>> "$out/cuobjdump.log"
  "$cuobjdump" -res-usage "$out/$name.cubin" > "$out/$name.res" 2>> "$out/cuobjdump.log"
done < "$out/index.tsv"
cut -f1 "$out/index.tsv" | sed "s|^|$out/|; s|$|.sass|"
