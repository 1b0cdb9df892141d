#!/bin/sh
# Re-measures the cost profiles of placement by cost (cpu::default_cost_profile, dnnl_ep::default_cost_profile):
# small models run by `epstack perf` on the CPU stack and on the oneDNN stack, with priority placement so each runs
# where asked: products at 1-256 rows (four MatMuls of 1024x1024), element-wise streaming, and chains of
# convolutions by kind, the way networks hold them (so that the CPU provider's blocked layout and its reorders at the
# chain's ends are priced as in a network, not once per convolution):
#   conv3x3     3x3 unit-stride dense convolutions, 4 a chain (Winograd's domain on the CPU provider), at ResNet's
#               64x56x56, 128x28x28, 256x14x14 and 512x7x7
#   conv        other dense convolutions: a 7x7 stride-2 stem and three 3x3 stride-2 convolutions
#   pointwise   1x1 convolutions, 4 a chain, expanding and reducing 4x (256 <-> 64 at 56x56, 1024 <-> 256 at 14x14)
#   depthwise   3x3 depthwise convolutions, 4 a chain (144 channels at 56x56, 384 at 14x14)
# Prints each model's median milliseconds and the GFLOP/s or GB/s it implies, then each kind's rate (its models' work
# over their time): the figures of a cost_profile. Products streaming from memory are measured on a model with more
# weights than the last-level cache (pass one, e.g. the shared mlp_b1, as MLP=path; and the shared llm_decode as
# LLM=path to fit the fixed cost of a streaming product).
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
work = open(f'{out}/work.tsv', 'w')
def save(name, kind, gwork, nodes, x, y, inits):
    g = helper.make_graph(nodes, name, [x], [y], initializer=inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)]); m.ir_version = 8
    onnx.save(m, f'{out}/{name}.onnx')
    work.write(f'{name}\t{kind}\t{gwork:.6f}\n')
for M in (1, 4, 16, 64, 256):
    W = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), 'W')
    nodes, prev = [], 'x'
    for i in range(4):
        nodes.append(helper.make_node('MatMul', [prev, 'W'], [f'y{i}'])); prev = f'y{i}'
    save(f'matmul_m{M}', f'matmul_m{M}', 4 * 2 * M * 1024 * 1024 / 1e9, nodes,
         helper.make_tensor_value_info('x', TensorProto.FLOAT, [M, 1024]),
         helper.make_tensor_value_info(prev, TensorProto.FLOAT, [M, 1024]), [W])
def chain(name, kind, C0, H0, layers):
    """layers: (out_channels, kernel, stride, group); each convolution followed by Relu."""
    nodes, inits, prev, C, H, flops = [], [], 'x', C0, H0, 0
    for i, (O, k, s, group) in enumerate(layers):
        w = rng.standard_normal((O, C // group, k, k)).astype(np.float32) * (2.0 / (C // group * k * k)) ** 0.5
        b = rng.standard_normal(O).astype(np.float32) * 0.1
        inits += [numpy_helper.from_array(w, f'W{i}'), numpy_helper.from_array(b, f'B{i}')]
        Ho = (H + 2 * (k // 2) - k) // s + 1
        nodes.append(helper.make_node('Conv', [prev, f'W{i}', f'B{i}'], [f'c{i}'], pads=[k // 2] * 4, strides=[s, s],
                                      group=group))
        nodes.append(helper.make_node('Relu', [f'c{i}'], [f'r{i}']))
        flops += 2 * O * Ho * Ho * (C // group) * k * k
        prev, C, H = f'r{i}', O, Ho
    save(name, kind, flops / 1e9, nodes, helper.make_tensor_value_info('x', TensorProto.FLOAT, [1, C0, H0, H0]),
         helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, C, H, H]), inits)
for C, H in ((64, 56), (128, 28), (256, 14), (512, 7)):
    chain(f'conv3x3_c{C}_{H}', 'conv3x3', C, H, [(C, 3, 1, 1)] * 4)
chain('conv_strided', 'conv', 3, 224, [(64, 7, 2, 1), (128, 3, 2, 1), (256, 3, 2, 1), (512, 3, 2, 1)])
chain('pointwise_c256_56', 'pointwise', 256, 56, [(64, 1, 1, 1), (256, 1, 1, 1)] * 2)
chain('pointwise_c1024_14', 'pointwise', 1024, 14, [(256, 1, 1, 1), (1024, 1, 1, 1)] * 2)
chain('depthwise_c144_56', 'depthwise', 144, 56, [(144, 3, 1, 144)] * 4)
chain('depthwise_c384_14', 'depthwise', 384, 14, [(384, 3, 1, 384)] * 4)
# streaming: 3 tensors of 4 MiB moved (Relu reads and writes; Add reads two, writes one): 0.02097 GB per run
save('eltwise_1m', 'stream', 0.02097, [helper.make_node('Relu', ['x'], ['a']), helper.make_node('Add', ['a', 'x'], ['y'])],
     helper.make_tensor_value_info('x', TensorProto.FLOAT, [1024, 1024]),
     helper.make_tensor_value_info('y', TensorProto.FLOAT, [1024, 1024]), [])
PY
: > "$OUT/results.tsv"
while IFS="$(printf '\t')" read -r m kind work; do
  for p in cpu dnnl,cpu; do
    "$BUILD/tools/epstack" perf --model "$OUT/$m.onnx" --providers "$p" --threads 2 --warmup 10 --iters 100 \
      --creates 1 --max-seconds 10 --config epstack.placement=priority 2>/dev/null |
      /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); ms=d["run_ms"]["median"]; w=float(sys.argv[4]); print(f"{sys.argv[1]:20} {sys.argv[2]:9} {ms:8.3f} ms  {w/ms*1e3:7.1f} G/s"); open(sys.argv[5], "a").write(f"{sys.argv[3]}\t{sys.argv[2]}\t{w}\t{ms}\n")' "$m" "$p" "$kind" "$work" "$OUT/results.tsv"
  done
done < "$OUT/work.tsv"
/usr/bin/python3 - "$OUT/results.tsv" <<'PY'
import sys, collections
tot = collections.defaultdict(lambda: [0.0, 0.0])
for line in open(sys.argv[1]):
    kind, p, w, ms = line.split('\t')
    t = tot[(kind, p)]; t[0] += float(w); t[1] += float(ms)
print('rate by kind (GFLOP/s; stream GB/s):')
for (kind, p), (w, ms) in sorted(tot.items()):
    print(f'  {kind:11} {p:9} {w / ms * 1e3:7.1f}')
PY
# Streaming products: MLP (few products over many weights, e.g. the shared mlp_b1) and, when given, LLM (many
# smaller ones, e.g. the shared llm_decode) on both stacks, interleaved, ROUNDS times. With both, fit each provider's
# dram_gbps and stream_kernel_us to the medians: a model's time is its products' weights over the rate plus a fixed
# cost per streaming product plus the rest of its estimate (`epstack partition MODEL --providers dnnl,cpu` prints the
# estimates to take the rest from; mlp_b1 has 4 streaming products over 100.7 MB, llm_decode 25 over 91.9 MB).
if [ -n "${MLP:-}" ]; then
  i=0
  while [ "$i" -lt "${ROUNDS:-5}" ]; do
    for m in "$MLP" ${LLM:-}; do
      for p in cpu dnnl,cpu; do
        "$BUILD/tools/epstack" perf --model "$m" --providers "$p" --threads 2 --warmup 5 --iters 30 --creates 1 \
          --max-seconds 20 --config epstack.placement=priority 2>/dev/null |
          /usr/bin/python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); ms=d["run_ms"]["median"]; gbps=d["read_ms"]["bytes"]/ms/1e6; print(f"{sys.argv[2]:24} {sys.argv[1]:9} {ms:7.3f} ms, file bytes at {gbps:.1f} GB/s")' "$p" "$(basename "$m")"
      done
    done
    i=$((i + 1))
  done
fi
