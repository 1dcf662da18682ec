"""sageattn(small_q_path=...) without a GPU and without torch (the fake torch and fake library of
fake_torch.py, in a subprocess): the option reaches sage2_attention_params.small_q_path (0 auto,
1 quantized, 2 direct) on the checked path, on the cached fast path and through the custom op;
each value is its own signature; bad values and 'direct' with kv_lens or in sageattn_varlen raise
ValueError before anything reaches the library."""
from fake_torch import FAKE_TORCH_VARLEN, run_driver

DRIVER = r'''
import sys
sys.path.insert(0, sys.argv[1])
import torch
import sage2
from fake_torch import FakeLib, T, install

fake = FakeLib(varlen=True, masked=False)
install(fake)

def last_code():
    return fake.calls[-1]["p"][10]

q, k, v = T(1, 8, 1, 64), T(1, 2, 4096, 64), T(1, 2, 4096, 64)
for value, code in ((None, 0), ("auto", 0), ("quantized", 1), ("direct", 2)):
    for rep in range(2):  # the checked call, then the cached fast path
        kw = {} if value is None else {"small_q_path": value}
        n0 = len(fake.calls)
        sage2.sageattn(q, k, v, **kw)
        assert len(fake.calls) == n0 + 1
        assert last_code() == code, (value, rep, last_code())
# each value has its own workspace query (signature)
keys = {q_["p"][10] for q_ in fake.ws_queries}
assert keys == {0, 1, 2}, keys
# the custom op (autograd on): the code is its last argument
torch._grad[0] = True
ops0 = len(torch.OP_CALLS)
sage2.sageattn(T(1, 8, 1, 64, rg=True), k, v, small_q_path="direct")
assert len(torch.OP_CALLS) == ops0 + 1 and torch.OP_CALLS[-1][1][-1] == 2, torch.OP_CALLS[-1]
assert last_code() == 2
torch._grad[0] = False
# refusals
for bad in ("fast", 2, True):
    try:
        sage2.sageattn(q, k, v, small_q_path=bad)
        raise AssertionError("accepted small_q_path=%r" % (bad,))
    except ValueError as e:
        assert "small_q_path" in str(e), str(e)
n0 = len(fake.calls)
kvl = T(1, dtype=torch.int32)
try:
    sage2.sageattn(q, k, v, kv_lens=kvl, small_q_path="direct")
    raise AssertionError("direct with kv_lens accepted")
except ValueError as e:
    assert "dense calls only" in str(e), str(e)
cu = T(2, dtype=torch.int32)
try:
    sage2.sageattn_varlen(T(5, 8, 64), T(9, 2, 64), T(9, 2, 64), cu, cu, small_q_path="direct")
    raise AssertionError("direct in sageattn_varlen accepted")
except ValueError as e:
    assert "small_q_path='direct'" in str(e), str(e)
assert len(fake.calls) == n0, "a refused call reached the library"
# quantized is accepted with kv_lens (the varlen entry point ignores it: varlen is always quantized)
sage2.sageattn(q, k, v, kv_lens=kvl, small_q_path="quantized")
assert fake.calls[-1]["fn"] == "varlen"
print("SMALL Q PATH OK")
'''


def test_small_q_path_reaches_the_library(tmp_path):
    r = run_driver(tmp_path, DRIVER, FAKE_TORCH_VARLEN)
    assert "SMALL Q PATH OK" in r.stdout, r.stdout + r.stderr
