import csv,sys
def load(f):
    kern={}; cur=None; hdr=None
    for row in csv.reader(open(f)):
        if row and row[0]=="Kernel Name": cur=row[1]; kern.setdefault(cur,[]); hdr=None; continue
        if row and row[0]=="Address": hdr=row; continue
        if hdr and row: kern[cur].append(dict(zip(hdr,row)))
    return kern
def num(x):
    try: return float(x.replace(',',''))
    except: return 0.0
K=load(sys.argv[1])
for k,rows in K.items():
    runs=[]; cur=None
    samp=sum(num(r["Warp Stall Sampling (All Samples)"]) for r in rows); ni=sum(num(r['stall_no_inst']) for r in rows)
    for i,r in enumerate(rows):
        e=num(r['Instructions Executed'])>0
        if cur is None or cur[0]!=e: cur=[e,i,i,0]; runs.append(cur)
        cur[2]=i; cur[3]+=num(r['stall_no_inst'])
    print(k, len(rows),'sass', len(runs),'runs; samples',int(samp),'no_inst',int(ni))
    print(' '.join(('X' if e else '.')+str(b-a+1)+('(ni%d)'%n if n else '') for e,a,b,n in runs))
