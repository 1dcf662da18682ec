import csv, sys, collections
f = sys.argv[1]
rows = list(csv.reader(open(f)))
hdr = rows[1]; data = rows[2:]
ix = {h: i for i, h in enumerate(hdr)}
def num(r, k):
    try: return float(r[ix[k]].replace(',', ''))
    except: return 0.0
stalls = [h for h in hdr if h.startswith('stall_') and 'Not Issued' not in h]
tot = collections.Counter(); inst = 0; samples = 0
for r in data:
    for s in stalls: tot[s] += num(r, s)
    inst += num(r, 'Instructions Executed'); samples += num(r, 'Warp Stall Sampling (All Samples)')
print("instructions executed (warp)", inst, "samples", samples)
for s, v in tot.most_common(12): print("  %-28s %6.1f%%" % (s, 100 * v / samples))
# top instructions by samples
top = sorted(data, key=lambda r: -num(r, 'Warp Stall Sampling (All Samples)'))[:int(sys.argv[2]) if len(sys.argv) > 2 else 30]
for r in top:
    st = sorted(((num(r, s), s) for s in stalls), reverse=True)[:2]
    print("%s %6.2f%% ex=%9d  %-60s %s" % (r[ix['Address']], 100 * num(r, 'Warp Stall Sampling (All Samples)') / samples,
          num(r, 'Instructions Executed'), r[ix['Source']][:60], " ".join("%s:%d" % (s[6:], v) for v, s in st)))
