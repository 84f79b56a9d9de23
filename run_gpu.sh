python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 THUNDER_PADVEC_CACHE_DIR=/tmp/padvec-cache
timeout 300 python3 -m pytest -m gpu -q -p no:cacheprovider tests 2>&1 | tail -8 | tee $OUT/gpu-tests-final.log
