#!/bin/sh
# Re-measures the cost profiles of placement by cost (cpu::default_cost_profile, dnnl_ep::default_cost_profile):
# single-operator models (products at 1-256 rows, dense, 1x1 and depthwise convolutions, element-wise streaming) run by
# `epstack perf` on the CPU stack and on the oneDNN stack, with priority placement so each runs where asked.
# Prints median milliseconds and the GFLOP/s or GB/s they imply; products streaming from memory are measured on
# a model with more weights than the last-level cache (pass one, e.g. the shared mlp_b1, as MLP=path).
# Usage: scripts/calibrate_placement.sh [BUILD_DIR]    (needs Debian's python3-onnx to write the models)
# On a shared virtual machine single sub-millisecond operators vary by up to 2x from one run to the next: run it
# several times on a quiet machine and keep the medians.
set -eu
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT="$BUILD/placement-calibration"
mkdir -p "$OUT"
/usr/bin/python3 - "$OUT" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
out = sys.argv[1]
rng = np.random.default_rng(0)
def save(name, nodes, x, y, inits):
    g = helper.make_graph(nodes, name, [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]); m.ir_version = 8
    onnx.save(m, f'{out}/{name}.onnx')
for M in (1, 4, 16, 64, 256):
    W = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), 'W')
    nodes, prev = [], 'x'
    for i in range(4):
        nodes.append(helper.make_node('MatMul', [prev, 'W'], [f'y{i}'])); prev = f'y{i}'
    save(f'matmul_m{M}', nodes, helper.make_tensor_value_info('x', TensorProto.FLOAT, [M, 1024]),
         helper.make_tensor_value_info(prev, TensorProto.FLOAT, [M, 1024]), [W])
def conv(name, C, H, k, group):
    W = numpy_helper.from_array(rng.standard_normal((C, C // group, k, k)).astype(np.float32) * 0.05, 'W')
    save(name, [helper.make_node('Conv', ['x', 'W'], ['y'], pads=[k // 2] * 4, group=group)],
         helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, C, H, H]),
         helper.make_tensor_value_info('y', TensorProto.FLOAT, [1, C, H, H]), [W])
conv('conv3x3_c64_56', 64, 56, 3, 1)
conv('conv1x1_c128_56', 128, 56, 1, 1)
conv('dw3x3_c128_56', 128, 56, 3, 128)
save('eltwise_1m', [helper.make_node('Relu', ['x'], ['a']), helper.make_node('Add', ['a', 'x'], ['y'])],
     helper.make_tensor_value_info('x', TensorProto.FLOAT, [1024, 1024]),
     helper.make_tensor_value_info('y', TensorProto.FLOAT, [1024, 1024]), [])
PY
# model, then the work it does: GFLOP (products, convolutions) or GB moved (streaming)
set -- matmul_m1 0.00839 matmul_m4 0.03355 matmul_m16 0.1342 matmul_m64 0.5369 matmul_m256 2.147 \
  conv3x3_c64_56 0.2312 conv1x1_c128_56 0.1028 dw3x3_c128_56 0.00723 eltwise_1m 0.02097
while [ $# -gt 0 ]; do
  m=$1 work=$2
  shift 2
  for p in cpu dnnl,cpu; do
    "$BUILD/tools/epstack" perf --model "$OUT/$m.onnx" --providers "$p" --threads 2 --warmup 10 --iters 100 \
      --creates 1 --max-seconds 10 --config epstack.placement=priority 2>/dev/null |
      /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); ms=d["run_ms"]["median"]; w=float(sys.argv[3]); print(f"{sys.argv[1]:18} {sys.argv[2]:9} {ms:8.3f} ms  {w/ms*1e3:7.1f} G/s")' "$m" "$p" "$work"
  done
done
if [ -n "${MLP:-}" ]; then
  for p in cpu dnnl,cpu; do
    "$BUILD/tools/epstack" perf --model "$MLP" --providers "$p" --threads 2 --warmup 5 --iters 30 --creates 1 \
      --max-seconds 20 --config epstack.placement=priority 2>/dev/null |
      /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); gbps=d["read_ms"]["bytes"]/d["run_ms"]["median"]/1e6; print(f"{sys.argv[1]:9} weights streamed: {gbps:.1f} GB/s")' "$p"
  done
fi
