"""Reads `ncu --page source --print-source sass --csv` exports (session 35, c1).

    python3 ncu_source.py stalls FILE KERNEL [N]   warp-stall samples by reason, the N top instructions
    python3 ncu_source.py runs FILE                runs of executed (X) / never-executed (.) SASS
                                                   instructions per kernel, with their no_inst samples
"""
import collections
import csv
import sys


def load(f):
    kern, cur, hdr = {}, None, None
    for row in csv.reader(open(f)):
        if row and row[0] == "Kernel Name":
            cur, hdr = row[1], None
            kern.setdefault(cur, [])
            continue
        if row and row[0] == "Address":
            hdr = row
            continue
        if hdr and row:
            kern[cur].append(dict(zip(hdr, row)))
    return kern


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def stalls(f, k, n=12):
    rows = load(f)[k]
    names = [h for h in rows[0] if h.startswith("stall_") and "Not Issued" not in h]
    tot = collections.Counter()
    for r in rows:
        for s in names:
            tot[s] += num(r[s])
    total = sum(tot.values())
    print(f, k, "samples", total, "inst executed", sum(num(r["Instructions Executed"]) for r in rows))
    for s, v in tot.most_common(8):
        print("  %-24s %8d %5.1f%%" % (s, v, 100 * v / total))
    for r in sorted(rows, key=lambda r: -num(r["Warp Stall Sampling (All Samples)"]))[:n]:
        samp = num(r["Warp Stall Sampling (All Samples)"])
        print("  %6s %-60s samp %6d exec %8d" % (r["Address"], r["Source"][:60], samp, num(r["Instructions Executed"])),
              " ".join("%s=%d" % (s[6:], num(r[s])) for s in names if num(r[s]) > 0.1 * samp))


def runs(f):
    for k, rows in load(f).items():
        out, cur = [], None
        for i, r in enumerate(rows):
            e = num(r["Instructions Executed"]) > 0
            if cur is None or cur[0] != e:
                cur = [e, i, i, 0]
                out.append(cur)
            cur[2] = i
            cur[3] += num(r["stall_no_inst"])
        samp = sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rows)
        print(k, len(rows), "sass", len(out), "runs; samples", int(samp), "no_inst", int(sum(num(r["stall_no_inst"]) for r in rows)))
        print(" ".join(("X" if e else ".") + str(b - a + 1) + ("(ni%d)" % ni if ni else "") for e, a, b, ni in out))


if __name__ == "__main__":
    if sys.argv[1] == "stalls":
        stalls(sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 12)
    else:
        runs(sys.argv[2])
