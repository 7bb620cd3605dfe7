"""tools/compare_family_pretrain_gpt.py as a user's script without `if __name__ == "__main__":`: it starts the
training at its top level (Megatron-Bridge#926's pretrain_Qwen3_8B.py did). multiprocessing's spawn start method runs
the parent's script again in each child it starts, here megatron-core's persistent asynchronous checkpoint worker
(`--async-save --use-persistent-ckpt-worker`), which then starts the training too (fixtures/memory-calibration b64)."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from compare_family_pretrain_gpt import main

main()
