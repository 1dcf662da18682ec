import os, sys
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import stage_profile as sp
sp.SHAPES["vit-h14-197"] = (64, 12, 12, 64, 197, False, "fp16")
sp.SHAPES["vit-l-257-hd80"] = (32, 16, 16, 80, 257, False, "fp16")
sp.main()
