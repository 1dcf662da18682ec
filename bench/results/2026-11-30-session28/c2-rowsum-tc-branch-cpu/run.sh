# branch s28-rowsum-tc (02fd848; rowsum_tc_02fd848.patch: git am onto eb83691), CPU only
build/tests/sage2_cpu_tests -tc="rowsum*,fused exponent*,pv_acc16*"
SAGE2_SASS_FILTER=^attn_mma bash scripts/sage2_sass.sh sm_80 D --pv fp16 --causal none --head-dims 64,128 --tiles 64x64x4x2
python3 scripts/sass_census.py D/X.sass --kernel attention_mma --tile-units 0.25
