"""scripts/sass_census.py on synthetic SASS: main-loop detection (nested loops, a persistent outer
loop, an out-of-line slow path that branches back into the loop), the instruction classes, the
per-unit normalisation, -res-usage registers/spills, nvdisasm syntax and .xz input."""
import json
import lzma

import checkout_script
import pytest


@pytest.fixture(scope="module")
def sc():
    return checkout_script.load("scripts/sass_census.py")


def line(addr, text):
    return f"        /*{addr:04x}*/                   {text} ;   /* 0x000fe40000000f00 */\n" \
           f"                                                          /* 0x000fe40000000f00 */\n"


# kernel_a: prologue HMMA, outer loop 0x30..0x1d0 (2 tensor ops) holding an inner loop 0x80..0xc0
# without tensor ops, and a forward-skippable LDGSTS at 0xe0.
A_BODY = [
    "IMAD.MOV.U32 R1, RZ, RZ, c[0x0][0x28]", "S2R R0, SR_TID.X", "HMMA.16816.F32 R4, R8, R12, RZ",
    "LDSM.16.M88.4 R8, [R2]", "LDSM.16.MT88.4 R12, [R2+0x100]", "HMMA.16816.F32 R4, R8, R12, R4",
    "IMMA.16832.S8.S8 R16, R8.ROW, R12.COL, RZ", "I2F R16, R16",
    "FFMA R4, R4, R5, R6", "FMUL R5, R5, 0.5", "IADD3 R3, R3, 0x1, RZ", "ISETP.GE.AND P1, PT, R3, 0x4, PT",
    "@!P1 BRA 0x80", "@P2 BRA 0xf0", "LDGSTS.E.BYPASS.128 [R20], [R22.64]", "MUFU.EX2 R5, R5",
    "F2FP.PACK_AB R6, R5, R4", "SHFL.BFLY PT, R7, R6, 0x1, 0x1f", "BAR.SYNC.DEFER_BLOCKING 0x0", "LDGDEPBAR",
    "DEPBAR.LE SB0, 0x0", "MOV R9, R7", "@!PT LDS RZ, [RZ]", "LDS R10, [R2+0x200]", "STS [R2+0x300], R10",
    "HADD2 R11, R11, R11", "FMNMX R12, R12, R13, !PT", "FADD R13, R13, R12", "ISETP.NE.AND P0, PT, R3, R0, PT",
    "@P0 BRA 0x30", "STG.E [R14.64], R4", "EXIT", "BRA 0x200",
]
# kernel_b: a persistent loop 0x10..0x70 around the tensor loop 0x20..0x50 (same tensor count: the
# smaller wins); the slow path at 0x90 jumps back into the loop at 0x40 (no loop of its own) and
# holds a spill reload.
B_BODY = [
    "S2R R0, SR_TID.X", "MOV R1, R0", "HMMA.16816.F32 R4, R8, R12, R4", "@P1 BRA 0x90",
    "ISETP.NE.AND P0, PT, R3, R0, PT", "@P0 BRA 0x20", "STG.E [R14.64], R4", "@P3 BRA 0x10", "EXIT",
    "LDL R5, [R1]", "BRA 0x40",
]

RES = """
Resource usage:
 Common:
  GLOBAL:0
 Function kernel_b:
  REG:40 STACK:8 SHARED:0 LOCAL:8 CONSTANT[0]:400 TEXTURE:0 SURFACE:0 SAMPLER:0
 Function _Z8kernel_aPf:
  REG:96 STACK:0 SHARED:0 LOCAL:0 CONSTANT[0]:400 TEXTURE:0 SURFACE:0 SAMPLER:0
"""


def cuobjdump_text():
    out = "\n\tcode for sm_80\n\n\t\tFunction : _Z8kernel_aPf\n\t.headerflags\t@\"EF_CUDA_SM80\"\n"
    out += "".join(line(16 * i, t) for i, t in enumerate(A_BODY))
    out += "\t\t..........\n\n\n\t\tFunction : kernel_b\n\t.headerflags\t@\"EF_CUDA_SM80\"\n"
    out += "".join(line(16 * i, t) for i, t in enumerate(B_BODY))
    return out + "\t\t..........\n"


def nvdisasm_text():
    """kernel_a in nvdisasm -c syntax: labels, `(.L_x_N) branch targets, SHI_REGISTERS."""
    labels = {0x30: ".L_x_0", 0x80: ".L_x_1", 0xf0: ".L_x_2"}
    out = "\t.target\tsm_80\n//--------------------- .text._Z8kernel_aPf ---------\n"
    out += "\t.section\t.text._Z8kernel_aPf,\"ax\",@progbits\n\t.sectioninfo\t@\"SHI_REGISTERS=96\"\n"
    out += "_Z8kernel_aPf:\n.text._Z8kernel_aPf:\n"
    for i, t in enumerate(A_BODY):
        a = 16 * i
        if a in labels:
            out += labels[a] + ":\n"
        for tgt, lab in labels.items():
            t = t.replace(f"BRA 0x{tgt:x}", f"BRA `({lab})")
        out += f"        /*{a:04x}*/                   {t} ;\n"
    return out


EXPECT_A = {"tensor": 2, "ldsm": 2, "ldsm_t": 1, "lds": 1, "sts": 1, "shared": 4, "ldgsts": 1, "ldg": 0,
            "stg": 0, "ffma": 1, "fmul": 1, "fadd": 1, "fmnmx": 1, "float_other": 0, "int": 3, "uniform": 0,
            "mufu": 1, "conv": 2, "half": 1, "shfl": 1, "bar": 1, "depbar": 2, "bra": 3, "mov": 1, "other": 0,
            "total": 26}


def test_nested_loop_counts(sc):
    fa, fb = sc.parse_sass(cuobjdump_text())
    assert (fa.name, fa.arch, len(fa.insns)) == ("_Z8kernel_aPf", "sm_80", len(A_BODY))
    c = sc.census_function(fa)
    loop = c["loop"]
    assert loop["header"] == "0x0030" and loop["ranges"] == "0x0030-0x01d0" and loop["size"] == 27
    assert loop["inner"] == [{"header": "0x0080", "size": 5, "tensor": 0}]
    assert loop["counts"] == EXPECT_A
    assert [(r["range"], r["size"]) for r in loop["skippable"]] == [("0x00e0-0x00e0", 1)]
    assert c["tensor_in_function"] == 3 and (c["stl"], c["ldl"]) == (0, 0)
    # --loop picks the inner loop instead
    inner = sc.census_function(fa, loop_addr=0x80)["loop"]
    assert inner["size"] == 5 and inner["counts"]["ffma"] == 1 and inner["counts"]["tensor"] == 0


def test_persistent_loop_and_out_of_line_path(sc):
    _, fb = sc.parse_sass(cuobjdump_text())
    c = sc.census_function(fb)
    loop = c["loop"]
    # the natural loop of the back edge 0x50 -> 0x20 includes the slow path 0x90..0xa0
    assert loop["header"] == "0x0020" and loop["ranges"] == "0x0020-0x0050, 0x0090-0x00a0"
    assert loop["counts"]["tensor"] == 1 and loop["counts"]["total"] == 6 and loop["ldl"] == 1
    assert loop["inner"] == [] and loop["other_tensor_loops"] == []
    assert loop["enclosing"] == [{"header": "0x0010", "size": 9, "tensor": 1}]
    headers = {L["header"]: L["size"] for L in c["loops"]}
    assert headers == {"0x0010": 9, "0x0020": 6}  # no loop from the slow path's BRA 0x40
    assert c["ldl"] == 1


def test_nvdisasm_syntax_same_census(sc):
    (f,) = sc.parse_sass(nvdisasm_text())
    assert f.name == "_Z8kernel_aPf" and f.labels[".L_x_1"] == 0x80
    loop = sc.census_function(f)["loop"]
    assert loop["header"] == "0x0030" and loop["counts"] == EXPECT_A
    assert sc.parse_nvdisasm_registers(nvdisasm_text()) == {"_Z8kernel_aPf": 96}


def test_main_table_json_normalisation(sc, tmp_path, capsys):
    sass = tmp_path / "k.sass.xz"
    with lzma.open(sass, "wt") as f:
        f.write(cuobjdump_text())
    res = tmp_path / "k.res"
    res.write_text(RES)
    out = tmp_path / "c.json"
    rc = sc.main([str(sass), "--kernel", "kernel_", "--res", str(res), "--tile-units", "0.5",
                  "--tile-units", "0.25", "--label", "A", "--label", "B", "--json", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "| class | A | B |" in text
    assert "| tensor (HMMA/IMMA/QMMA/GMMA) | 4 | 4 |" in text  # 2 / 0.5, 1 / 0.25
    assert "| registers | 96 | 40 |" in text
    assert "SPILLS in: B" in text
    cols = json.loads(out.read_text())["columns"]
    assert [c["label"] for c in cols] == ["A", "B"] and cols[1]["local"] == 8
    assert cols[0]["loop"]["counts"]["ldsm"] == 2  # JSON keeps raw counts
    # a census JSON is an input too: columns reused, relabelled
    rc = sc.main([str(out), "--label", "x", "--label", "y", "--raw"])
    assert rc == 0 and "| tensor (HMMA/IMMA/QMMA/GMMA) | 2 | 1 |" in capsys.readouterr().out


def test_classify_edge_cases(sc):
    assert sc.classify("HFMA2.MMA", "R3, -RZ, RZ, 0, 0") == "mov"
    assert sc.classify("HFMA2.MMA", "R3, R4, R5, R6") == "half"
    assert sc.classify("IMAD.MOV.U32", "R1, RZ, RZ, R2") == "mov"
    assert sc.classify("IMAD.WIDE.U32", "R2, R3, R4, R5") == "int"
    assert sc.classify("QMMA.16832.F32.E4M3.E4M3", "") == "tensor"
    assert sc.classify("F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C", "") == "conv"
    assert sc.classify("I2FP.F32.S32", "") == "conv"
    assert sc.classify("UIADD3", "") == "uniform"
    assert sc.Insn(0, "@!PT LDS RZ, [RZ]").cls == "nop"


def test_full_tile_total_skips_mask_regions_only(sc, tmp_path, capsys):
    # a loop 0x10..0x90: a copy region the branch at 0x20 may skip (LDGSTS: a full tile runs it),
    # a mask region the branch at 0x50 may skip (three moves: a full tile skips it)
    body = ["S2R R0, SR_TID.X", "HMMA.16816.F32 R4, R8, R12, R4", "@P1 BRA 0x40",
            "LDGSTS.E.BYPASS.128 [R20], [R22.64]", "@P2 BRA 0x80", "IMAD.MOV.U32 R4, RZ, RZ, -0x800000",
            "IMAD.MOV.U32 R5, RZ, RZ, -0x800000", "IMAD.MOV.U32 R6, RZ, RZ, -0x800000",
            "ISETP.NE.AND P0, PT, R3, R0, PT", "@P0 BRA 0x10", "EXIT"]
    text = "\n\tcode for sm_80\n\n\t\tFunction : kernel_c\n\t.headerflags\t@\"EF_CUDA_SM80\"\n"
    text += "".join(line(16 * i, t) for i, t in enumerate(body)) + "\t\t..........\n"
    sass = tmp_path / "c.sass"
    sass.write_text(text)
    assert sc.main([str(sass), "--kernel", "kernel_c", "--raw"]) == 0
    out = capsys.readouterr().out
    assert "| total (no NOP, no @!PT) | 9 |" in out  # 0x10..0x90
    assert "| total a full tile runs (without skippable regions holding no tensor op or copy) | 6 |" in out
