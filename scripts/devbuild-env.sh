# Sourced by the device-machine scripts that run the bundled .devbuild/ across fake nodes
# (gpu-fn-suites.sh, gpu-fn-bench.sh), from the repository root: libraries from .devbuild/lib and
# the pip NCCL 2.28.9 (the system's 2.28.3 does not match epx's headers), no NVLS/MNNVL, eager
# module loading (docs/plugins.md). Logs go under $OUT (default ./gpu-logs).
PIPNCCL=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/lib:$PIPNCCL:${LD_LIBRARY_PATH:-}
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 CUDA_MODULE_LOADING=EAGER
OUT=${OUT:-gpu-logs}; mkdir -p "$OUT"
