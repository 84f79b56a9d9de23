#!/usr/bin/env bash
# One GPU-machine call for a whole session's checks, in order of importance, each part bounded:
#   1. pytest -m gpu (the random-program budget from PADVEC_GPU_PROGRAMS, default 80)
#   2. the RoPE suite, forward then forward+backward, each form in its own part (run JSONs under $OUT)
#   3. the notebooks executed on the GPU, written back under $OUT/notebooks (needs .whl/nb, below)
# Wheels: `bash ../shared/device/fetch_wheels.sh liger-kernel`, then for the notebooks the Jupyter stack
# into .whl/nb: nbclient nbformat jupyter_client jupyter_core traitlets pyzmq tornado ipykernel ipython comm
# debugpy psutil nest_asyncio matplotlib-inline jedi parso prompt_toolkit wcwidth pexpect ptyprocess stack_data
# executing asttokens pure_eval decorator fastjsonschema jsonschema jsonschema-specifications referencing
# rpds-py attrs platformdirs python-dateutil six tqdm ipython_pygments_lexers pygments typing_extensions
# Carry ".whl". Results files: python benchmarks/report.py $files/run_*.json back home.
set -o pipefail
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 THUNDER_PADVEC_CACHE_DIR=/tmp/padvec-cache
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 240 python3 -m pytest -m gpu -q -p no:cacheprovider 2>&1 | tee $OUT/gpu_tests.log | tail -4
for part in "not qkv and not bwd and not test_host" "qkv and not bwd" "not qkv and bwd and not test_host" "qkv and bwd" "test_host"; do
  name=$(echo "$part" | tr -c 'a-z' '_')
  timeout 280 python3 -m pytest benchmarks -q -p no:cacheprovider --benchmark-only \
    --benchmark-json=$OUT/run_$name.json -k "$part" 2>&1 | tee -a $OUT/suite.log | tail -1
done
if ls .whl/nb/*.whl > /dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/nb-site .whl/nb/*.whl
  mkdir -p $OUT/notebooks
  PYTHONPATH=/tmp/nb-site:$PYTHONPATH timeout 240 python3 -c "
import sys, nbformat
from nbclient import NotebookClient
for path in sys.argv[1:]:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=200, kernel_name='python3', resources={'metadata': {'path': 'notebooks'}}).execute()
    nbformat.write(nb, '$OUT/' + path)
    print('executed', path)
" notebooks/*.ipynb 2>&1 | tail -3
fi
