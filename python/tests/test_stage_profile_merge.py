"""bench/stage_profile.py --merge (no torch, no GPU): one-round runs of one commit, taken one run at a
time and alternated with another build, become the scoreboard's quant_us records: per shape the
median over the runs, rounds = the number of runs; runs of different commits are refused."""
import json
import os
import subprocess
import sys

REPO = os.environ.get("SAGE2_SOURCE_DIR") or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "stage_profile.py")


def _run_file(path, run, commit, values):
    with open(path, "w") as fh:
        for shape, us in values.items():
            fh.write(json.dumps({"run": run, "commit": commit, "mode": "stage_profile", "round": 1, "shape": shape,
                                 "batch": 1, "heads": 24, "kv_heads": 24, "head_dim": 128, "seq_len": 4608,
                                 "causal": False, "dtype": "bf16", "quant_us": us, "copy_gbps": 4000.0 + us,
                                 "path": "quantized", "device": "test", "command": "python3 bench/stage_profile.py"}) + "\n")
            # a one-round run also writes its own quant_us record (rounds 1): merge must ignore it
            fh.write(json.dumps({"run": run, "commit": commit, "mode": "quant_us", "rounds": 1, "us": us, "shape": shape}) + "\n")


def _merge(tmp_path, files):
    out = tmp_path / "merged.jsonl"
    p = subprocess.run([sys.executable, SCRIPT, "--merge", *map(str, files), "--out", str(out)], capture_output=True, text=True)
    return p, out


def test_merge_takes_the_median_of_the_runs(tmp_path):
    files = []
    for i, (a, b) in enumerate([(70.0, 20.0), (64.0, 22.0), (66.0, 19.0)]):
        f = tmp_path / ("r%d.jsonl" % i)
        _run_file(f, "run%d" % i, "c" * 40, {"flux-1024": a, "sdxl-1024": b})
        files.append(f)
    p, out = _merge(tmp_path, files)
    assert p.returncode == 0, p.stderr
    recs = {r["shape"]: r for r in map(json.loads, out.read_text().splitlines())}
    assert recs["flux-1024"]["us"] == 66.0 and recs["sdxl-1024"]["us"] == 20.0
    assert all(r["rounds"] == 3 and r["mode"] == "quant_us" and r["commit"] == "c" * 40 for r in recs.values())
    assert recs["flux-1024"]["copy_gbps"] == 4066.0  # the median run's bandwidth


def test_merged_runs_of_two_builds_from_one_device_call_get_two_run_ids(tmp_path):
    runs = {}
    for commit in ("a" * 40, "b" * 40):
        files = []
        for i in range(3):
            f = tmp_path / ("%s%d.jsonl" % (commit[0], i))
            _run_file(f, "2026-11-29T01:16Z-stages", commit, {"flux-1024": 60.0 + i})
            files.append(f)
        out = tmp_path / ("merged-%s.jsonl" % commit[0])
        p = subprocess.run([sys.executable, SCRIPT, "--merge", *map(str, files), "--out", str(out)], capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        runs[commit] = json.loads(out.read_text().splitlines()[0])["run"]
    assert runs["a" * 40] != runs["b" * 40]
    assert runs["a" * 40].endswith("aaaaaaa") and runs["b" * 40].endswith("bbbbbbb")


def test_merge_refuses_runs_of_two_commits(tmp_path):
    f1, f2 = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    _run_file(f1, "run1", "a" * 40, {"flux-1024": 70.0})
    _run_file(f2, "run2", "b" * 40, {"flux-1024": 60.0})
    p, out = _merge(tmp_path, [f1, f2])
    assert p.returncode != 0 and "commit" in (p.stderr + p.stdout)
    assert not out.exists()
