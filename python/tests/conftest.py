"""pytest setup of the sage2 Python suite: makes python/ importable (so PYTHONPATH is optional)
and prints what the run is testing against."""
import os
import sys

# The suite specifies the optimized kernels' results: its Contexts wait for them (the tiered
# compile, on by default, is specified by test_gpu_tiered.py in child processes of its own).
os.environ.setdefault("SAGE2_TIERED_COMPILE", "0")

HERE = os.path.dirname(os.path.abspath(__file__))
PYTHON_DIR = os.path.dirname(HERE)
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)
if HERE not in sys.path:
    sys.path.insert(0, HERE)


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA torch, a GPU and libsage2 (skipped otherwise)")


def pytest_report_header(config):
    import sage2

    lines = ["sage2 %s, package %s, library: %s" % (sage2.__version__, os.path.dirname(sage2.__file__),
                                                     sage2.library_path() or "not found")]
    try:
        lines.append("NVRTC: %s (%s)" % sage2._lib.nvrtc_library()[:2])
    except sage2.Sage2Error as e:
        lines.append("NVRTC: %s" % str(e).splitlines()[0])
    try:
        import torch

        lines.append("torch %s, CUDA %s, GPU available: %s" % (torch.__version__, torch.version.cuda,
                                                                torch.cuda.is_available()))
        if torch.cuda.is_available():
            lines.append("device: %s" % torch.cuda.get_device_name())
    except ImportError:
        lines.append("torch: not installed (torch tests skip)")
    return lines


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    mod = sys.modules.get("sage2_testutil")
    lines = getattr(mod, "REPORT", None) if mod else None
    if lines:
        terminalreporter.section("sage2 accuracy vs fp64 (torch SDPA / exact formula)")
        for line in lines:
            terminalreporter.write_line(line)
