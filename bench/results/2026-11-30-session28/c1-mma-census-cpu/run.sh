# base = .dev-base (3336b36), new = build (87c3605); per arch (sm_80 --pv fp16, sm_89 --pv fp8):
SAGE2_BUILD=$PWD/B SAGE2_SASS_FILTER=^attn_mma bash scripts/sage2_sass.sh ARCH D --pv PV --causal none --head-dims 64,128 --tiles 64x64x4x2
python3 scripts/sass_census.py D/X.sass --kernel attention_mma --tile-units 0.25
