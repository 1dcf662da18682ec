import csv,sys,collections
def load(f):
    kern={}; cur=None; hdr=None
    for row in csv.reader(open(f)):
        if row and row[0]=="Kernel Name": cur=row[1]; kern[cur]=[]; hdr=None; continue
        if row and row[0]=="Address": hdr=row; continue
        if hdr and row: kern[cur].append(dict(zip(hdr,row)))
    return kern
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
f=sys.argv[1]; k=sys.argv[2]
rows=load(f)[k]
stalls=[h for h in rows[0] if h.startswith('stall_') and 'Not Issued' not in h]
tot=collections.Counter(); 
for r in rows:
    for s in stalls: tot[s]+=num(r[s])
S=sum(tot.values())
print(f, k, "samples", S, "inst executed", sum(num(r["Instructions Executed"]) for r in rows))
for s,v in tot.most_common(8): print("  %-24s %8d %5.1f%%"%(s,v,100*v/S))
# top instructions by samples
top=sorted(rows,key=lambda r:-num(r["Warp Stall Sampling (All Samples)"]))[:int(sys.argv[3]) if len(sys.argv)>3 else 12]
for r in top: print("  %6s %-60s samp %6d exec %8d"%(r["Address"],r["Source"][:60],num(r["Warp Stall Sampling (All Samples)"]),num(r["Instructions Executed"])), ' '.join('%s=%d'%(s[6:],num(r[s])) for s in stalls if num(r[s])>0.1*num(r["Warp Stall Sampling (All Samples)"])))
