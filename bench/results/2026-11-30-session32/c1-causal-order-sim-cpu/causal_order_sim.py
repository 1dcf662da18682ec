"""The attention kernel's tail under two CTA start orders for causal calls (CPU model, session 32).
CTAs start in linear block order on 132 SMs x 3 slots; a CTA's work = 1.5 + its KV tiles (bq 64,
bk 128: the fixed prologue/epilogue in tile units); on an SM with k CTAs each runs at min(0.5, 1/k)
of the SM (one CTA alone cannot fill it). Orders: "pair by pair" (x = query block, longest first,
y = pair: main before the change) and "banded" (bands of G pairs, each band's longest blocks of all
its pairs first: kernels::causal_band_pairs). Prints each order's makespan / the ideal (total work /
SMs) and the gain.   python3 causal_order_sim.py"""


def simulate(works, sms=132, per=3, cap1=0.5):
    queue, qi, t = list(works), 0, 0.0
    sm = [[] for _ in range(sms)]
    for s in range(sms):
        while len(sm[s]) < per and qi < len(queue):
            sm[s].append(queue[qi]); qi += 1
    while any(sm):
        dt = min(min(a) / min(cap1, 1 / len(a)) for a in sm if a)
        t += dt
        for s in range(sms):
            if sm[s]:
                sp = min(cap1, 1 / len(sm[s]))
                sm[s] = [w - sp * dt for w in sm[s] if w - sp * dt > 1e-9]
            while len(sm[s]) < per and qi < len(queue):
                sm[s].append(queue[qi]); qi += 1
    return t


def run(n, pairs, band, bq=64, bk=128, ovh=1.5, causal=True):
    nb = (n + bq - 1) // bq
    tiles = lambda qb: ((min(n, (qb + 1) * bq) if causal else n) + bk - 1) // bk
    cur = [ovh + tiles(nb - 1 - x) for h in range(pairs) for x in range(nb)]
    banded = []
    for b0 in range(0, pairs, band):
        banded += [ovh + tiles(nb - 1 - x) for x in range(nb) for h in range(b0, min(pairs, b0 + band))]
    ideal = sum(cur) / 132
    a, b = simulate(cur), simulate(banded)
    print(f"N {n:5d} pairs {pairs:3d} band {band:3d} {'causal' if causal else 'full  '}: "
          f"pair by pair {a / ideal:.3f}  banded {b / ideal:.3f}  gain {a / b:.3f}", flush=True)


# bands as kernels::causal_band_pairs gives them at hd 128 (8 MiB of K^ + V^ per band)
for n, g in ((1024, 32), (2048, 16), (4096, 8)):
    run(n, 128, g)
run(3000, 28, 28)   # the `small` cell B 1 H 28 N 3000 causal (GQA 7: 8 kv heads a band)
run(4096, 28, 28)   # Qwen2.5-7B prefill 4K
run(1024, 128, 32, causal=False)
