"""The `sageattention` drop-in (python/sageattention_shim), without torch or a GPU: imported from
the source tree, its functions must have the reference's signatures (parsed with ast from the
reference's sources in ../shared/anchors/sageattention-ref when that folder is there, skipped
otherwise) and hand every argument to the sage2 function of the same name (sage2's functions
replaced by recorders); unknown keywords are dropped with one warning; its version passes diffusers'
check and names this sage2; and it refuses to import over another `sageattention` (a distribution of
that name or a package elsewhere on sys.path) unless SAGE2_SAGEATTENTION_OVERRIDE=1."""
import ast
import importlib
import inspect
import os
import re
import subprocess
import sys
import textwrap
import warnings

import pytest

import sage2

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(HERE))
SHIM = os.path.join(REPO, "python", "sageattention_shim")
SAGE2_PKG = os.path.dirname(os.path.abspath(sage2.__file__))
FUNCTIONS = ("sageattn", "sageattn_varlen", "sageattn_qk_int8_pv_fp16_triton", "sageattn_qk_int8_pv_fp16_cuda",
             "sageattn_qk_int8_pv_fp8_cuda", "sageattn_qk_int8_pv_fp8_cuda_sm90")


def _reference_dir():
    """The reference package's sources: $SAGEATTENTION_REF_DIR, ../shared/anchors/sageattention-ref
    beside the repository (CI and the developers' machines have it), or a copy in .anchors-ref."""
    for d in (os.environ.get("SAGEATTENTION_REF_DIR"),
              os.path.join(os.path.dirname(REPO), "shared", "anchors", "sageattention-ref", "sageattention"),
              os.path.join(REPO, ".anchors-ref", "sageattention")):
        if d and os.path.isfile(os.path.join(d, "core.py")) and os.path.isfile(os.path.join(d, "__init__.py")):
            return d
    pytest.skip("the reference's sources are not here (../shared/anchors/sageattention-ref beside the repository, "
                "or $SAGEATTENTION_REF_DIR)")


def _need_shim():
    if not os.path.isfile(os.path.join(SHIM, "sageattention", "__init__.py")):
        pytest.skip("no python/sageattention_shim beside the tests (%s)" % SHIM)


NO_DEFAULT = "<required>"


def _ast_signatures(path, names):
    """{function: [(parameter, default or NO_DEFAULT), ..., ('**' + kwargs name)]} from source."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    out = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in names:
            a = node.args
            assert not a.posonlyargs and not a.kwonlyargs and a.vararg is None, node.name
            pos = [p.arg for p in a.args]
            defaults = [NO_DEFAULT] * (len(pos) - len(a.defaults)) + [ast.literal_eval(d) for d in a.defaults]
            out[node.name] = list(zip(pos, defaults)) + (["**" + a.kwarg.arg] if a.kwarg else [])
    return out


def _signature(fn):
    out = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            out.append("**" + p.name)
        else:
            assert p.kind is p.POSITIONAL_OR_KEYWORD, (fn.__name__, p)
            out.append((p.name, NO_DEFAULT if p.default is p.empty else p.default))
    return out


@pytest.fixture
def shim(monkeypatch):
    """The sageattention package of the source tree, freshly imported (sys.path and sys.modules
    restored afterwards)."""
    _need_shim()
    monkeypatch.syspath_prepend(SHIM)
    for name in [m for m in sys.modules if m == "sageattention" or m.startswith("sageattention.")]:
        monkeypatch.delitem(sys.modules, name)
    # where the reference is installed too (a GPU machine with it on the path), the source tree's
    # drop-in is tested all the same; the refusal has its own test below
    monkeypatch.setenv("SAGE2_SAGEATTENTION_OVERRIDE", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        mod = importlib.import_module("sageattention")
    assert os.path.dirname(os.path.abspath(mod.__file__)) == os.path.join(SHIM, "sageattention")
    yield mod
    for name in [m for m in sys.modules if m == "sageattention" or m.startswith("sageattention.")]:
        del sys.modules[name]


def test_public_names_and_signatures_are_the_references(shim):
    ref = _reference_dir()
    init = ast.parse(open(os.path.join(ref, "__init__.py"), encoding="utf-8").read())
    exported = {a.asname or a.name for n in init.body if isinstance(n, ast.ImportFrom) for a in n.names}
    assert exported == set(FUNCTIONS) == set(shim.__all__), (exported, shim.__all__)
    want = _ast_signatures(os.path.join(ref, "core.py"), FUNCTIONS)
    assert set(want) == set(FUNCTIONS), sorted(want)
    for name in FUNCTIONS:
        assert _signature(getattr(shim, name)) == want[name], name
        assert getattr(shim.core, name) is getattr(shim, name)
    # sage2's own entry points of the reference's names have the reference's signatures too
    mine = _ast_signatures(os.path.join(SAGE2_PKG, "_reference_api.py"), FUNCTIONS)
    assert set(mine) == {n for n in FUNCTIONS if n.startswith("sageattn_qk")}, sorted(mine)
    for name, sig in mine.items():
        assert sig == want[name], (name, sig, want[name])


class Recorder:
    def __init__(self, name, result):
        self.name, self.result, self.calls = name, result, []

    def __call__(self, *args, **kwargs):
        self.calls.append((args, kwargs))
        return self.result


def _record_sage2(monkeypatch):
    recs = {}
    for name in FUNCTIONS:
        recs[name] = Recorder(name, object())
        monkeypatch.setattr(sage2, name, recs[name])
    return recs


def test_every_function_hands_its_arguments_to_sage2(shim, monkeypatch):
    recs = _record_sage2(monkeypatch)
    q, k, v, m, cq, ck = (object() for _ in range(6))
    cases = [
        # (function, positional args after q, k, v, keywords, what sage2's function of that name receives)
        ("sageattn", ("NHD", True, 0.5, True), dict(attn_mask=m, smooth_v=True),
         dict(tensor_layout="NHD", is_causal=True, sm_scale=0.5, return_lse=True, attn_mask=m, smooth_v=True)),
        ("sageattn", (), {}, dict(tensor_layout="HND", is_causal=False, sm_scale=None, return_lse=False)),
        ("sageattn_qk_int8_pv_fp16_triton", ("NHD", "cuda", False, m, 0.25, False, True), {},
         dict(tensor_layout="NHD", quantization_backend="cuda", is_causal=False, attn_mask=m, sm_scale=0.25,
              smooth_k=False, return_lse=True)),
        ("sageattn_qk_int8_pv_fp16_cuda", ("NHD", True, "per_warp", 0.5, "fp16", False, True, True), {},
         dict(tensor_layout="NHD", is_causal=True, qk_quant_gran="per_warp", sm_scale=0.5, pv_accum_dtype="fp16",
              smooth_k=False, smooth_v=True, return_lse=True)),
        ("sageattn_qk_int8_pv_fp8_cuda", (), {},
         dict(tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread", sm_scale=None,
              pv_accum_dtype="fp32+fp16", smooth_k=True, smooth_v=False, return_lse=False)),
        ("sageattn_qk_int8_pv_fp8_cuda_sm90", ("NHD",), dict(pv_accum_dtype="fp32", smooth_v=True),
         dict(tensor_layout="NHD", is_causal=False, qk_quant_gran="per_thread", sm_scale=None,
              pv_accum_dtype="fp32", smooth_k=True, return_lse=False, smooth_v=True)),
    ]
    for name, args, kwargs, want in cases:
        rec = recs[name]
        n = len(rec.calls)
        assert getattr(shim, name)(q, k, v, *args, **kwargs) is rec.result, name
        assert len(rec.calls) == n + 1, name
        got_args, got_kwargs = rec.calls[-1]
        assert got_args[:3] == (q, k, v) and len(got_args) == 3, (name, got_args)
        assert got_kwargs == want, (name, got_kwargs)
    # varlen: the reference's positional order (max_seqlen_q/k required, smooth_k tenth)
    rec = recs["sageattn_varlen"]
    assert shim.sageattn_varlen(q, k, v, cq, ck, 10, 20, True, 0.5, False) is rec.result
    args, kwargs = rec.calls[-1]
    assert args == (q, k, v, cq, ck)
    assert kwargs == dict(max_seqlen_q=10, max_seqlen_k=20, is_causal=True, sm_scale=0.5, smooth_k=False), kwargs
    shim.sageattn_varlen(q, k, v, cq, ck, 10, 20, return_lse=True, causal=True)
    assert rec.calls[-1][1] == dict(max_seqlen_q=10, max_seqlen_k=20, is_causal=False, sm_scale=None, smooth_k=True,
                                    return_lse=True, causal=True)
    with pytest.raises(TypeError):
        shim.sageattn_varlen(q, k, v, cq, ck)  # max_seqlen_q/k are required, as in the reference


def test_unknown_keywords_are_dropped_with_one_warning(shim, monkeypatch):
    recs = _record_sage2(monkeypatch)
    q = object()
    with pytest.warns(UserWarning, match=r"sageattention.sageattn: keyword 'frobnicate' is not one sage2 knows"):
        shim.sageattn(q, q, q, frobnicate=3, dropout_p=0.0)
    assert recs["sageattn"].calls[-1][1] == dict(tensor_layout="HND", is_causal=False, sm_scale=None,
                                                 return_lse=False, dropout_p=0.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        shim.sageattn(q, q, q, frobnicate=4)  # the second time: no warning
    assert "frobnicate" not in recs["sageattn"].calls[-1][1]


def test_sage2_refuses_what_it_cannot_honour_through_the_shim(shim):
    """The keywords are sage2's to judge: a value it refuses still raises (not dropped). Runs sage2's
    own translation (no torch needed for it)."""
    from sage2 import _compat

    with pytest.raises(ValueError, match="window_size"):
        _compat.translate(False, None, {"window_size": (128, 0)}, frozenset())
    assert "window_size" in shim.core._PASSED and "pv_accum_dtype" in shim.core._PASSED


def _version_tuple(v):
    return tuple(int(x) for x in re.match(r"(\d+(?:\.\d+)*)", v).group(1).split("."))


def test_version_passes_diffusers_check_and_names_this_sage2(shim):
    text = open(os.path.join(SHIM, "pyproject.toml"), encoding="utf-8").read()
    version = re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert shim.__version__ == version
    public, _, local = version.partition("+")
    assert _version_tuple(public) >= (2, 1, 1)  # diffusers: is_sageattention_version(">=", "2.1.1")
    cmake = open(os.path.join(REPO, "CMakeLists.txt"), encoding="utf-8").read()
    sage2_version = re.search(r"project\(sage2\s+VERSION\s+([0-9.]+)", cmake).group(1)
    assert local == "sage2." + sage2_version, (local, sage2_version)
    assert re.search(r'^name = "sageattention"$', text, re.M)  # the name diffusers looks the version up by
    try:
        from packaging.version import Version
    except ImportError:
        try:
            from pip._vendor.packaging.version import Version
        except ImportError:
            Version = None
    if Version is not None:
        assert Version(version) >= Version("2.1.1")


def test_installed_drop_in_is_this_one():
    """Where the wheel is installed (CI's fresh venv), importlib.metadata reports it as diffusers
    reads it, and it is the drop-in of this source tree."""
    import importlib.metadata as md

    try:
        version = md.version("sageattention")
    except md.PackageNotFoundError:
        pytest.skip("the sageattention drop-in is not installed here")
    if "+sage2" not in version:
        pytest.skip("another sageattention (%s) is installed here" % version)
    _need_shim()
    text = open(os.path.join(SHIM, "pyproject.toml"), encoding="utf-8").read()
    assert version == re.search(r'^version = "([^"]+)"', text, re.M).group(1)
    assert _version_tuple(version) >= (2, 1, 1)


IMPORT = textwrap.dedent("""
    import warnings
    warnings.simplefilter("always")
    try:
        with warnings.catch_warnings(record=True) as w:
            import sageattention
        print("IMPORTED", sageattention.__file__)
        for x in w:
            print("WARNING", x.category.__name__, x.message)
    except ImportError as e:
        print("REFUSED", e)
""")


def _import_in(tmp_path, path_entries, env_extra=None):
    from fake_torch import sage2_child_env

    # the entries given, then where this process found sage2 (not this process's PYTHONPATH: no other
    # sageattention than the ones the test places)
    env = sage2_child_env(first=path_entries, inherit_pythonpath=False)
    env.pop("SAGE2_SAGEATTENTION_OVERRIDE", None)
    env.update(env_extra or {})
    r = subprocess.run([sys.executable, "-c", IMPORT], capture_output=True, text=True, env=env, cwd=str(tmp_path),
                       timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_never_shadows_another_sageattention_silently(tmp_path):
    _need_shim()
    out = _import_in(tmp_path, [SHIM])
    if "REFUSED" in out:  # this machine has a real sageattention installed: the refusal is right
        assert "another sageattention is installed" in out and str(tmp_path) not in out, out
    else:
        assert "IMPORTED " + os.path.join(SHIM, "sageattention") in out and "WARNING" not in out, out
    # another distribution named sageattention (what pip leaves for the reference's package)
    site = tmp_path / "site"
    info = site / "sageattention-2.2.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sageattention\nVersion: 2.2.0\n")
    out = _import_in(tmp_path, [SHIM, site])
    assert "REFUSED sageattention: this `sageattention` is sage2's drop-in" in out, out
    assert "the distribution sageattention 2.2.0" in out and "SAGE2_SAGEATTENTION_OVERRIDE=1" in out, out
    out = _import_in(tmp_path, [SHIM, site], {"SAGE2_SAGEATTENTION_OVERRIDE": "1"})
    assert "IMPORTED" in out and "WARNING RuntimeWarning sageattention:" in out, out
    assert "the distribution sageattention 2.2.0" in out and "sage2 runs" in out, out
    # a sageattention package later on sys.path (a source copy of the reference, no metadata)
    other = tmp_path / "other"
    (other / "sageattention").mkdir(parents=True)
    (other / "sageattention" / "__init__.py").write_text("from .core import sageattn\n")
    out = _import_in(tmp_path, [SHIM, other])
    assert "REFUSED" in out and "the package " + str(other / "sageattention") in out, out
    # another copy of the drop-in itself (an installed wheel beside the source tree) is no conflict
    copy = tmp_path / "copy"
    (copy / "sageattention").mkdir(parents=True)
    (copy / "sageattention" / "__init__.py").write_text(
        open(os.path.join(SHIM, "sageattention", "__init__.py"), encoding="utf-8").read())
    info = copy / "sageattention-2.2.0+sage2.0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: sageattention\nVersion: 2.2.0+sage2.0.1.0\n")
    out = _import_in(tmp_path, [SHIM, copy])
    assert str(copy) not in out, out


@pytest.mark.gpu
def test_on_the_gpu_the_drop_in_gives_sage2s_results(shim):
    """On a GPU: each function of the drop-in gives the bits of the sage2 call it maps to."""
    from sage2_testutil import activation_like, require_gpu, torch

    require_gpu()
    q, k, v = activation_like(2, 8, 8, 512, 512, 128, dtype=torch.float16, layout="NHD", seed=3)
    major = torch.cuda.get_device_capability()[0]
    pairs = [
        (lambda: shim.sageattn(q, k, v, tensor_layout="NHD", is_causal=True),
         lambda: sage2.sageattn(q, k, v, tensor_layout="NHD", is_causal=True)),
        (lambda: shim.sageattn_qk_int8_pv_fp16_cuda(q, k, v, "NHD", pv_accum_dtype="fp16+fp32"),
         lambda: sage2.sageattn(q, k, v, "NHD", pv_precision="fp16")),
        (lambda: shim.sageattn_qk_int8_pv_fp16_triton(q, k, v, "NHD"),
         lambda: sage2.sageattn(q, k, v, "NHD", pv_precision="fp16")),
    ]
    if major >= 9 or torch.cuda.get_device_capability() == (8, 9):  # FP8 exists from sm_89 on
        pairs += [
            (lambda: shim.sageattn_qk_int8_pv_fp8_cuda(q, k, v, "NHD", qk_quant_gran="per_warp"),
             lambda: sage2.sageattn(q, k, v, "NHD", pv_precision="fp8")),
            (lambda: shim.sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, "NHD", return_lse=True)[1],
             lambda: sage2.sageattn(q, k, v, "NHD", pv_precision="fp8", return_lse=True)[1]),
        ]
    for a, b in pairs:
        assert torch.equal(a(), b())
    lens = torch.tensor([0, 100, 612, 1024], dtype=torch.int64, device="cuda")
    qv, kv, vv = (t.reshape(1024, 8, 128) for t in (q, k, v))
    got = shim.sageattn_varlen(qv, kv, vv, lens, lens, 512, 512, is_causal=True)
    assert torch.equal(got, sage2.sageattn_varlen(qv, kv, vv, lens.int(), lens.int(), 512, 512, is_causal=True))
