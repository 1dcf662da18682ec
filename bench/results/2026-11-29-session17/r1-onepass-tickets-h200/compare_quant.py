import json, sys, glob, collections
# usage: cmp.py DIR label1:glob1 label2:glob2 ...  -> per-shape median quant_us of the one-round runs
d = sys.argv[1]; cols = []
for spec in sys.argv[2:]:
    lab, pat = spec.split(":")
    vals = collections.defaultdict(list)
    for f in sorted(glob.glob(d + "/" + pat)):
        for line in open(f):
            r = json.loads(line)
            if r.get("mode") == "quant_us": vals[r["shape"]].append(r["us"])
    cols.append((lab, vals))
shapes = list(cols[0][1])
print("%-24s" % "shape" + "".join("%22s" % l for l, _ in cols))
for s in shapes:
    print("%-24s" % s + "".join("%22s" % "/".join("%.1f" % x for x in v[s]) for _, v in cols))
