#!/usr/bin/env bash
# Everything that needs a CUDA GPU, in one go, on a machine that has one: install opsdk into the
# current Python (no network needed: --no-deps), build every op for this machine's GPU, run the
# GPU tests, the standalone CUDA check of the flagship and the GPU benchmarks. Logs go to OUTDIR;
# the summary is printed last. Each stage has its own time limit, so one hang cannot eat the rest.
#
#     bash bench/gpu_check.sh [OUTDIR] [STAGES]
#
# STAGES: default "install build tests check bench fusebench"; also "tune"
# (bench/tune_pairwise_manhattan_gpu.sh) and "suite" (the whole test suite but Ray's and the
# wheel's, in parallel).
set -uo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
out="$(mkdir -p "${1:-gpu-check-out}" && cd "${1:-gpu-check-out}" && pwd)"
stages="${2:-install build tests check bench fusebench}"
py="${PYTHON:-python3}"
cd "$root"
export PYTHONUNBUFFERED=1
summary=()
stage() {  # stage NAME LIMIT_S COMMAND...: run, log to OUTDIR/NAME.log, remember rc and seconds
    local name=$1 limit=$2; shift 2
    case " $stages " in *" $name "*) ;; *) return 0 ;; esac
    local t0=$SECONDS
    timeout "$limit" "$@" > "$out/$name.log" 2>&1
    local rc=$?
    summary+=("$(printf '%-8s rc=%-3s %4ss  %s' "$name" "$rc" "$((SECONDS - t0))" "$(tail -n 1 "$out/$name.log" | cut -c1-110)")")
}

{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
  nvcc --version | tail -n 2; g++ --version | head -n 1; uptime
  "$py" -c "import sys, numpy, cupy; print(sys.version.split()[0], 'numpy', numpy.__version__, 'cupy', cupy.__version__)"
} > "$out/env.log" 2>&1

# setuptools/wheel from ./.whl when present (an offline machine with an older setuptools).
install() {
    if compgen -G ".whl/*.whl" > /dev/null; then
        "$py" -m pip install -q --no-index --no-deps --upgrade .whl/*.whl || return
    fi
    "$py" -m pip install -q --no-deps --no-build-isolation -e . && "$py" -c "import opsdk; print('opsdk', opsdk.__version__)"
}
export py
export -f install
stage install 180 bash -c install
stage build 200 opsdk build --no-progress --cuda on

GPU_TESTS=(tests/runtime/test_cuda_eager.py tests/runtime/test_cuda_jit.py tests/runtime/test_devices.py
           tests/runtime/test_builtin_gpu.py tests/runtime/test_placement.py
           tests/runtime/test_mnist_on_device.py tests/gradcheck/test_author_ops.py
           tests/codegen/test_build_cuda_dev.py tests/codegen/test_build_cuda_optional.py
           tests/codegen/test_nvrtc.py tests/codegen/test_build_cuda.py tests/runtime/test_fusion.py
           tests/runtime/test_fusion_cuda.py tests/codegen/test_fused_cuda.py
           tests/runtime/test_fusion_cuda_reductions.py tests/codegen/test_fused_cuda_rows.py)
parallel=()
"$py" -c "import xdist" 2>/dev/null && parallel=(-n "${GPU_CHECK_WORKERS:-8}")
stage tests 200 "$py" -m pytest -q -rfEs -p no:cacheprovider "${parallel[@]}" "${GPU_TESTS[@]}"
stage check 60 bash bench/check_pairwise_manhattan_gpu.sh sm_90
stage tune 120 bash bench/tune_pairwise_manhattan_gpu.sh sm_90
# The whole suite but Ray's and the wheel's tests, on this GPU machine (not the default: minutes).
stage suite 240 "$py" -m pytest -q -rfEs -p no:cacheprovider "${parallel[@]}" -m "not slow" \
    --ignore=tests/dist --ignore=tests/packaging tests
stage bench 150 "$py" bench/bench_pairwise_manhattan_gpu.py --quick
stage fusebench 120 "$py" bench/bench_fusion.py --gpu

echo "== $out"
printf '%s\n' "${summary[@]}"
